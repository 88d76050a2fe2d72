package experiment

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
)

// The server the PostgreSQL backend uses: PostgresEnv (a URL) when it is
// set, else DefaultPostgresURL, as the project's tests (pgtest) do.
const (
	PostgresEnv        = "FAIRRELAY_POSTGRES"
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// PostgresURL returns FAIRRELAY_POSTGRES or DefaultPostgresURL.
func PostgresURL() string {
	if u := os.Getenv(PostgresEnv); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// postgresPoolSize is the most connections one process of the experiment
// opens: every store of the process shares one pool, so eight claimant
// processes and the parent stay far below max_connections.
const postgresPoolSize = 4

// postgresBackend keeps each store in a schema of its own:
// <run>_<scenario>_<lab>_<store>, e.g. exp_1f2e3d4c_atomic_enqueue_a1b2c3_queue.
type postgresBackend struct {
	url string
	run string // the per-run prefix, exp_<8 hex digits>
}

// Postgres returns the PostgreSQL backend on the server at url, with a
// fresh per-run prefix for its schemas. It connects once to fail early when
// the server cannot be reached.
func Postgres(url string) (Backend, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	be, err := postgresWithRun(url, "exp_"+hex.EncodeToString(b[:]))
	if err != nil {
		return nil, err
	}
	p, err := be.(postgresBackend).pool(context.Background())
	if err != nil {
		return nil, err
	}
	// amcheck makes the integrity check real (see integrity); a server
	// without it, or a user who may not create it, still runs everything
	// else. Parallel creators may race: the loser's error is harmless.
	_, _ = p.Exec(context.Background(), `CREATE EXTENSION IF NOT EXISTS amcheck`)
	var amcheck bool
	if err := p.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'amcheck')`).Scan(&amcheck); err != nil {
		return nil, err
	}
	if !amcheck {
		// Said once per run: every integrity line will read ok without
		// an index checked.
		fmt.Fprintln(os.Stderr, "experiment: the server has no amcheck extension (Debian: postgresql-contrib; CREATE EXTENSION amcheck as a superuser): the integrity check looks only for prepared transactions")
	}
	return be, nil
}

func postgresWithRun(url, run string) (Backend, error) {
	if url == "" || run == "" {
		return nil, fmt.Errorf("%w: postgres backend without a URL or a run prefix", errBadJob)
	}
	return postgresBackend{url: url, run: run}, nil
}

// Name implements Backend.
func (postgresBackend) Name() string { return BackendPostgres }

// String says where the stores are, without the URL (it may hold a
// password).
func (b postgresBackend) String() string {
	return "postgres, one schema per store and scenario, " + b.run + "_*, dropped after each scenario"
}

var pools struct {
	sync.Mutex
	m map[string]*pgxpool.Pool
}

// pool returns the process's pool for the backend's server.
func (b postgresBackend) pool(ctx context.Context) (*pgxpool.Pool, error) {
	pools.Lock()
	defer pools.Unlock()
	if p, ok := pools.m[b.url]; ok {
		return p, nil
	}
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cfg.MaxConns = postgresPoolSize
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("postgres at %s: %w", b.url, err)
	}
	if pools.m == nil {
		pools.m = map[string]*pgxpool.Pool{}
	}
	pools.m[b.url] = p
	return p, nil
}

// version is the server's version (server_version).
func (b postgresBackend) version(ctx context.Context) (string, error) {
	p, err := b.pool(ctx)
	if err != nil {
		return "", err
	}
	var v string
	if err := p.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", fmt.Errorf("server_version: %w", err)
	}
	return v, nil
}

// labs counts the scenarios of this process that opened a store.
var labs atomic.Int64

// maxSchemaLen is the longest schema name the experiment makes: a queue's
// wake-up channel is "fairrelay_queue.<schema>" and PostgreSQL refuses a
// channel name longer than 63 bytes.
const maxSchemaLen = 63 - len("fairrelay_queue.")

// labKey returns the schema prefix of one scenario: the run's prefix, a
// counter, so that scenarios running in parallel (go test) never share a
// schema, and the start of the scenario's name, for a reader of the
// server's catalogue. Every schema name stays within maxSchemaLen.
func (b postgresBackend) labKey(name string) string {
	name = strings.ReplaceAll(name, "-", "_")
	key := fmt.Sprintf("%s_%d_", b.run, labs.Add(1))
	if room := maxSchemaLen - len(key) - len("_receiver"); len(name) > room {
		name = name[:max(room, 0)]
	}
	return key + name
}

// schema is the schema of the store file of l.
func (b postgresBackend) schema(l *Lab, file string) string {
	if l.key == "" {
		l.key = b.labKey(l.name)
	}
	return l.key + "_" + strings.TrimSuffix(file, ".db")
}

func (b postgresBackend) openQueue(ctx context.Context, l *Lab, file string, o queueOptions) (QueueStore, error) {
	p, err := b.pool(ctx)
	if err != nil {
		return nil, err
	}
	opts := []pgqueuestore.Option{pgqueuestore.WithSchema(b.schema(l, file))}
	if o.policy != nil {
		opts = append(opts, pgqueuestore.WithPolicy(*o.policy))
	}
	if o.hook != nil {
		opts = append(opts, pgqueuestore.WithHook(o.hook))
	}
	if o.rtSet {
		opts = append(opts, pgqueuestore.WithRealTime(o.realTime, o.skew))
	}
	return pgqueuestore.OpenPool(ctx, p, opts...)
}

func (b postgresBackend) openReceiver(ctx context.Context, l *Lab, file string, o receiverOptions) (ReceiverStore, error) {
	p, err := b.pool(ctx)
	if err != nil {
		return nil, err
	}
	opts := []pgreceiverstore.Option{pgreceiverstore.WithSchema(b.schema(l, file))}
	if o.maxDelta != 0 {
		opts = append(opts, pgreceiverstore.WithMaxDelta(o.maxDelta))
	}
	if o.hook != nil {
		opts = append(opts, pgreceiverstore.WithHook(o.hook))
	}
	if o.now != nil {
		opts = append(opts, pgreceiverstore.WithNow(o.now))
	}
	return pgreceiverstore.OpenPool(ctx, p, opts...)
}

// integrity is PostgreSQL's counterpart of PRAGMA integrity_check on the
// store's schema: no transaction is left prepared, and amcheck's
// bt_index_check (with heapallindexed) finds every B-tree index of the
// schema consistent with itself and with its table. Without the amcheck
// extension on the server only the first part runs.
func (b postgresBackend) integrity(ctx context.Context, l *Lab, file string) (string, error) {
	res, _, err := b.checkSchema(ctx, b.schema(l, file))
	if err != nil {
		return "", fmt.Errorf("integrity %s: %w", file, err)
	}
	return res, nil
}

// checkSchema checks one schema as integrity says and returns "ok" or the
// first problem, and the indexes it checked with amcheck.
func (b postgresBackend) checkSchema(ctx context.Context, schema string) (string, []string, error) {
	p, err := b.pool(ctx)
	if err != nil {
		return "", nil, err
	}
	var exists bool
	if err := p.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return "", nil, err
	}
	if !exists {
		// Never opened: nothing to check, as PRAGMA integrity_check
		// finds a new empty file ok.
		return "ok", nil, nil
	}
	var prepared int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_xacts`).Scan(&prepared); err != nil {
		return "", nil, err
	}
	if prepared != 0 {
		return fmt.Sprintf("%d prepared transactions left", prepared), nil, nil
	}
	var amcheck bool
	if err := p.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'amcheck')`).Scan(&amcheck); err != nil {
		return "", nil, err
	}
	if !amcheck {
		return "ok", nil, nil
	}
	rows, err := p.Query(ctx, `SELECT c.oid::regclass::text FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_am a ON a.oid = c.relam
		WHERE n.nspname = $1 AND a.amname = 'btree' ORDER BY 1`, schema)
	if err != nil {
		return "", nil, err
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", nil, err
	}
	if len(indexes) == 0 {
		return "no indexes in schema " + schema, nil, nil
	}
	for _, idx := range indexes {
		if _, err := p.Exec(ctx, `SELECT bt_index_check($1::regclass, true)`, idx); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				return "index " + idx + ": " + pe.Message, indexes, nil
			}
			return "", indexes, err
		}
	}
	return "ok", indexes, nil
}

// failWrites installs a PL/pgSQL trigger that raises msg before event, as
// conformance's FailWrites does for PostgreSQL.
func (b postgresBackend) failWrites(ctx context.Context, l *Lab, file, name, event, msg string) (func() error, error) {
	p, err := b.pool(ctx)
	if err != nil {
		return nil, err
	}
	sc := pgx.Identifier{b.schema(l, file)}.Sanitize()
	on, table, ok := strings.Cut(event, " ON ")
	if !ok {
		return nil, fmt.Errorf("install trigger: event %q is not \"<OP> ON <table>\"", event)
	}
	fn := sc + "." + pgx.Identifier{name}.Sanitize()
	ddl := fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '%s'; END $$;
CREATE TRIGGER %s BEFORE %s ON %s.%s FOR EACH ROW EXECUTE FUNCTION %s()`,
		fn, msg, pgx.Identifier{name}.Sanitize(), on, sc, pgx.Identifier{table}.Sanitize(), fn)
	if _, err := p.Exec(ctx, ddl); err != nil {
		return nil, fmt.Errorf("install trigger: %w", err)
	}
	return func() error {
		drop := fmt.Sprintf(`DROP TRIGGER %s ON %s.%s; DROP FUNCTION %s()`,
			pgx.Identifier{name}.Sanitize(), sc, pgx.Identifier{table}.Sanitize(), fn)
		if _, err := p.Exec(ctx, drop); err != nil {
			return fmt.Errorf("drop trigger: %w", err)
		}
		return nil
	}, nil
}

func (b postgresBackend) job(l *Lab, j *Job) {
	b.schema(l, QueueFile) // fixes l.key before the child needs it
	j.Backend, j.Postgres, j.Run, j.Key = BackendPostgres, b.url, b.run, l.key
}

// cleanup drops every schema of the scenario.
func (b postgresBackend) cleanup(ctx context.Context, l *Lab) error {
	if l.key == "" {
		return nil
	}
	p, err := b.pool(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range append([]string{QueueFile, ReceiverFile}, l.files...) {
		if _, err := p.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{b.schema(l, f)}.Sanitize()+" CASCADE"); err != nil {
			errs = append(errs, fmt.Errorf("drop schema of %s: %w", f, err))
		}
	}
	return errors.Join(errs...)
}
