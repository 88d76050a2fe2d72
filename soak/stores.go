package soak

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", for integrity_check and the receipts' commit order

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// This file is the only one that knows the backends. Everything else in
// the package reaches a run's stores through queue.Store and
// receiver.Store, opened by openQueue and openReceiver; what no contract
// method can say (a storage-level integrity check, the order in which
// receipts were committed) is asked of the backend here.

// The environment the soak command reads, as the experiment does
// (FAIRRELAY_BACKEND, FAIRRELAY_POSTGRES), and the server it uses when
// FAIRRELAY_POSTGRES is unset: the project's test server (pgtest).
const (
	BackendEnv         = "FAIRRELAY_BACKEND"
	PostgresEnv        = "FAIRRELAY_POSTGRES"
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// PostgresURL returns FAIRRELAY_POSTGRES, or DefaultPostgresURL when it is
// unset.
func PostgresURL() string {
	if u := os.Getenv(PostgresEnv); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// Stores names a run's queue and receiver in the form relayctl's --queue
// and --receiver take: two SQLite files (queue.db and receiver.db in the
// run's directory), or two PostgreSQL schemas given as postgres:// URLs
// with ?schema=NAME. Run writes it to the run's directory (StoresFile).
type Stores struct {
	Backend  string `json:"backend"`
	Queue    string `json:"queue"`
	Receiver string `json:"receiver"`
	// Shards is the number of shards of a sharded queue (Config.Shards;
	// 0: a plain queue). Queue is then the directory, or the base
	// schema's URL, that relayctl's --queue takes (shards.go).
	Shards int `json:"shards,omitempty"`
}

// StoresFile, in a run's directory, holds the run's Stores (JSON), so
// that CheckDir finds schemas as well as files.
const StoresFile = "stores.json"

// commitLog is the table, in a PostgreSQL receiver's schema, where the
// soak's trigger records each receipt at its commit (pgCommitLog).
const commitLog = "soak_commit_log"

// newStores names fresh stores for a run: files in dir, or two new
// schemas soak_<16 hex digits>_queue and _receiver on the server.
func newStores(c Config) (Stores, error) {
	switch c.Backend {
	case BackendSQLite:
		if c.Shards > 0 {
			return Stores{Backend: BackendSQLite, Queue: filepath.Join(c.Dir, "queue"), Receiver: filepath.Join(c.Dir, "receiver.db"), Shards: c.Shards}, nil
		}
		return Stores{Backend: BackendSQLite, Queue: filepath.Join(c.Dir, "queue.db"), Receiver: filepath.Join(c.Dir, "receiver.db")}, nil
	case BackendPostgres:
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return Stores{}, fmt.Errorf("soak: %w", err)
		}
		prefix := "soak_" + hex.EncodeToString(b[:])
		q, err := withSchema(c.Postgres, prefix+"_queue")
		if err != nil {
			return Stores{}, err
		}
		r, err := withSchema(c.Postgres, prefix+"_receiver")
		if err != nil {
			return Stores{}, err
		}
		return Stores{Backend: BackendPostgres, Queue: q, Receiver: r, Shards: c.Shards}, nil
	}
	return Stores{}, fmt.Errorf("%w: unknown backend %q", ErrConfig, c.Backend)
}

// isPostgres reports whether a store name is a PostgreSQL URL, as relayctl
// decides it.
func isPostgres(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// withSchema adds ?schema=NAME to a server URL.
func withSchema(server, schema string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || !isPostgres(server) {
		return "", fmt.Errorf("%w: PostgreSQL URL %q: want postgres://…", ErrConfig, redact(server))
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// pgTarget splits a store's URL into the URL pgx connects to and its
// schema, as relayctl does.
func pgTarget(target string) (conn, schema string, err error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", "", fmt.Errorf("%w: PostgreSQL URL: %v", ErrConfig, err)
	}
	q := u.Query()
	schema = q.Get("schema")
	if schema == "" {
		return "", "", fmt.Errorf("%w: %s names no schema", ErrConfig, redact(target))
	}
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// redact is a URL without its password, for logs; other names as they are.
func redact(target string) string {
	if !isPostgres(target) {
		return target
	}
	u, err := url.Parse(target)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// String says where the stores are, without a password.
func (s Stores) String() string {
	return fmt.Sprintf("queue %s, receiver %s", redact(s.Queue), redact(s.Receiver))
}

// queueOptions are what the soak sets when it opens a queue: the policy a
// new queue records, or real time at the wall clock.
type queueOptions struct {
	policy   *queue.Policy
	realTime bool
}

// openQueue opens the queue a store name names, on its backend: a sharded
// queue (shards.go) as one shard.Store over its shards.
func openQueue(ctx context.Context, target string, o queueOptions) (queue.Store, error) {
	members, sharded, err := queueMembers(ctx, target)
	if err != nil {
		return nil, err
	}
	if sharded {
		return openShards(ctx, members, o, false)
	}
	if isPostgres(target) {
		return openPGQueue(ctx, target, o)
	}
	return openSQLiteQueue(target, o)
}

func openSQLiteQueue(path string, o queueOptions) (queue.Store, error) {
	var opts []queuestore.Option
	if o.policy != nil {
		opts = append(opts, queuestore.WithPolicy(*o.policy))
	}
	if o.realTime {
		opts = append(opts, queuestore.WithRealTime(clock.Wall{}, producerSkew))
	}
	return queuestore.Open(path, opts...)
}

func openPGQueue(ctx context.Context, target string, o queueOptions) (queue.Store, error) {
	conn, schema, err := pgTarget(target)
	if err != nil {
		return nil, err
	}
	opts := []pgqueuestore.Option{pgqueuestore.WithSchema(schema)}
	if o.policy != nil {
		opts = append(opts, pgqueuestore.WithPolicy(*o.policy))
	}
	if o.realTime {
		opts = append(opts, pgqueuestore.WithRealTime(clock.Wall{}, producerSkew))
	}
	return pgqueuestore.Open(ctx, conn, opts...)
}

// openReceiver opens the receiver a store name names, on its backend.
func openReceiver(ctx context.Context, target string) (receiver.Store, error) {
	if isPostgres(target) {
		conn, schema, err := pgTarget(target)
		if err != nil {
			return nil, err
		}
		return pgreceiverstore.Open(ctx, conn, pgreceiverstore.WithSchema(schema))
	}
	return receiverstore.Open(target)
}

// producerSkew is the producers' real-time skew, in milliseconds
// (docs/contract.md §7.3): a batch that waited up to a second for its turn
// to write still commits.
const producerSkew = 1000

// transient reports an enqueue error that changed nothing and that a
// real-time producer tries again with a fresh tick: a tick that fell more
// than the skew behind the clock mark while it waited (either backend), or
// SQLite's writer lock given up on.
func transient(err error) bool {
	return errors.Is(err, queue.ErrTimeRegression) || errors.Is(err, queuestore.ErrWriteTimeout)
}

// createStores creates a run's queue with policy p and its receiver,
// before any process starts (a relay refuses a queue that does not exist),
// and returns them open. On PostgreSQL it also installs the receiver's
// commit log.
func createStores(ctx context.Context, s Stores, p queue.Policy) (queue.Store, receiver.Store, error) {
	var q queue.Store
	var err error
	if s.Shards > 0 {
		q, err = createShardedQueue(ctx, s.Queue, s.Shards, p)
	} else {
		q, err = openQueue(ctx, s.Queue, queueOptions{policy: &p})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("soak: create the queue: %w", err)
	}
	r, err := openReceiver(ctx, s.Receiver)
	if err != nil {
		q.Close()
		return nil, nil, fmt.Errorf("soak: create the receiver: %w", err)
	}
	if isPostgres(s.Queue) {
		members, _, err := queueMembers(ctx, s.Queue)
		if err != nil {
			q.Close()
			r.Close()
			return nil, nil, err
		}
		for _, m := range members {
			if err := pgEnqueueLog(ctx, m); err != nil {
				q.Close()
				r.Close()
				return nil, nil, err
			}
		}
	}
	if isPostgres(s.Receiver) {
		if err := pgCommitLog(ctx, s.Receiver); err != nil {
			q.Close()
			r.Close()
			return nil, nil, err
		}
	}
	return q, r, nil
}

// pgCommitLog installs, in a PostgreSQL receiver's schema, a table and a
// deferred constraint trigger that appends each receipt's ID, flow and seq
// to it when its transaction commits. PostgreSQL keeps no commit order of
// rows (SQLite's rowid is one, its writer being alone); the trigger runs
// at commit while the transaction still holds its flow's row, so within a
// flow the log's order is the order the receipts were committed in, and a
// rolled-back receipt leaves no line.
func pgCommitLog(ctx context.Context, target string) error {
	conn, schema, err := pgTarget(target)
	if err != nil {
		return err
	}
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return fmt.Errorf("soak: commit log: %w", err)
	}
	defer c.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	ddl := strings.NewReplacer("{s}", s, "{log}", commitLog).Replace(`
CREATE TABLE {s}.{log} (pos bigserial PRIMARY KEY, id text NOT NULL, flow text NOT NULL, seq bigint NOT NULL);
CREATE FUNCTION {s}.{log}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {s}.{log} (id, flow, seq) VALUES (NEW.id, NEW.flow, NEW.seq);
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER {log} AFTER INSERT ON {s}.receipts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {s}.{log}();`)
	if _, err := c.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("soak: commit log: %w", err)
	}
	return nil
}

// enqueueLog is the table, in a PostgreSQL queue's schema, where the
// soak's trigger records each event inserted (pgEnqueueLog).
const enqueueLog = "soak_enqueue_log"

// pgEnqueueLog installs, in a PostgreSQL queue's schema, a table and a
// trigger that copies each inserted event's ID, flow, seq and body into
// it, in the inserting transaction (a rolled-back enqueue leaves no line).
// The queue's retention deletes acked events (Prune); the log keeps them,
// so that the check still finds every event ever enqueued, and each one
// enqueued twice (an ID enqueued again after its prune is a new event).
func pgEnqueueLog(ctx context.Context, target string) error {
	conn, schema, err := pgTarget(target)
	if err != nil {
		return err
	}
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return fmt.Errorf("soak: enqueue log: %w", err)
	}
	defer c.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	ddl := strings.NewReplacer("{s}", s, "{log}", enqueueLog).Replace(`
CREATE TABLE {s}.{log} (pos bigserial PRIMARY KEY, id text NOT NULL, flow text NOT NULL, seq bigint NOT NULL, body bytea NOT NULL);
CREATE FUNCTION {s}.{log}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {s}.{log} (id, flow, seq, body) VALUES (NEW.id, NEW.flow, NEW.seq, NEW.body);
    RETURN NULL;
END
$$;
CREATE TRIGGER {log} AFTER INSERT ON {s}.events FOR EACH ROW EXECUTE FUNCTION {s}.{log}();`)
	if _, err := c.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("soak: enqueue log: %w", err)
	}
	return nil
}

// pruned returns the events that a PostgreSQL queue's enqueue log has and
// its events table no longer has (by ID and seq): the acked events its
// retention deleted, as acked events. SQLite keeps no such log: none.
func pruned(ctx context.Context, target string) ([]queue.EventState, error) {
	if !isPostgres(target) {
		return nil, nil
	}
	members, sharded, err := queueMembers(ctx, target)
	if err != nil {
		return nil, err
	}
	if !sharded {
		return prunedOf(ctx, target)
	}
	var out []queue.EventState
	for _, m := range members {
		p, err := prunedOf(ctx, m)
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	return out, nil
}

// prunedOf is pruned of one queue schema.
func prunedOf(ctx context.Context, target string) ([]queue.EventState, error) {
	conn, schema, err := pgTarget(target)
	if err != nil {
		return nil, err
	}
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("soak: pruned events: %w", err)
	}
	defer c.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	rows, err := c.Query(ctx, `SELECT l.id, l.flow, l.seq, l.body FROM `+s+`.`+enqueueLog+` AS l
		WHERE NOT EXISTS (SELECT 1 FROM `+s+`.events AS e WHERE e.id = l.id AND e.seq = l.seq AND e.flow = l.flow)
		ORDER BY l.flow, l.seq`)
	if err != nil {
		return nil, fmt.Errorf("soak: pruned events: %w", err)
	}
	defer rows.Close()
	var out []queue.EventState
	for rows.Next() {
		var e queue.EventState
		if err := rows.Scan(&e.ID, &e.Flow, &e.Seq, &e.Body); err != nil {
			return nil, fmt.Errorf("soak: pruned events: %w", err)
		}
		e.State, e.LifetimeAttempts = "acked", 1
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("soak: pruned events: %w", err)
	}
	return out, nil
}

// dropStores drops a PostgreSQL run's two schemas with everything in
// them; SQLite files stay with the run's directory.
func dropStores(ctx context.Context, s Stores) error {
	if s.Backend != BackendPostgres {
		return nil
	}
	var errs []error
	targets := []string{s.Receiver}
	if members, _, err := queueMembers(ctx, s.Queue); err != nil {
		errs = append(errs, err)
	} else {
		targets = append(targets, members...)
	}
	for _, target := range targets {
		conn, schema, err := pgTarget(target)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c, err := pgx.Connect(ctx, conn)
		if err != nil {
			errs = append(errs, fmt.Errorf("soak: drop schema %s: %w", schema, err))
			continue
		}
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			errs = append(errs, fmt.Errorf("soak: drop schema %s: %w", schema, err))
		}
		c.Close(ctx)
	}
	return errors.Join(errs...)
}

// DropStores drops the PostgreSQL schemas of a kept run directory (as
// Run leaves them after a failure or with Config.Keep); it does nothing
// for a SQLite run, whose files are in the directory.
func DropStores(ctx context.Context, dir string) error {
	s, err := readStores(dir)
	if err != nil {
		return err
	}
	return dropStores(ctx, s)
}

func writeStores(dir string, s Stores) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, StoresFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// readStores reads a run directory's StoresFile; a directory without one
// (kept before the soak ran on PostgreSQL) has queue.db and receiver.db.
func readStores(dir string) (Stores, error) {
	b, err := os.ReadFile(filepath.Join(dir, StoresFile))
	if errors.Is(err, os.ErrNotExist) {
		return Stores{Backend: BackendSQLite, Queue: filepath.Join(dir, "queue.db"), Receiver: filepath.Join(dir, "receiver.db")}, nil
	}
	if err != nil {
		return Stores{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var s Stores
	if err := json.Unmarshal(b, &s); err != nil {
		return Stores{}, fmt.Errorf("%w: %s: %v", ErrConfig, StoresFile, err)
	}
	if s.Backend != BackendSQLite && s.Backend != BackendPostgres || s.Queue == "" || s.Receiver == "" {
		return Stores{}, fmt.Errorf("%w: %s: want a backend, a queue and a receiver", ErrConfig, StoresFile)
	}
	return s, nil
}

// receipt is one receipt as the check reads it, in commit order.
type receipt struct {
	id, flow string
	seq      int64
	gone     bool // in the commit log, no longer in the receipts table (pruned, or lost)
}

// receipts reads every receipt of the receiver in the order they were
// committed, and the IDs of receipts the backend has no commit position
// for (only a PostgreSQL receiver whose commit log misses a line).
func receipts(ctx context.Context, target string) ([]receipt, []string, error) {
	if isPostgres(target) {
		return pgReceipts(ctx, target)
	}
	db, err := openRO(target)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT id, flow, seq FROM receipts ORDER BY rowid`)
	if err != nil {
		return nil, nil, fmt.Errorf("soak: receipts: %w", err)
	}
	defer rows.Close()
	var out []receipt
	for rows.Next() {
		var r receipt
		if err := rows.Scan(&r.id, &r.flow, &r.seq); err != nil {
			return nil, nil, fmt.Errorf("soak: receipts: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("soak: receipts: %w", err)
	}
	return out, nil, nil
}

// pgReceipts reads every receipt ever committed, in commit order: the
// commit log's lines (which the receiver's retention does not prune: a
// receipt pruned is still there, one accepted twice is there twice; those
// no longer in the receipts table are marked gone), then the receipts
// with no line, named in unplaced.
func pgReceipts(ctx context.Context, target string) (out []receipt, unplaced []string, err error) {
	conn, schema, err := pgTarget(target)
	if err != nil {
		return nil, nil, err
	}
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return nil, nil, fmt.Errorf("soak: receipts: %w", err)
	}
	defer c.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	rows, err := c.Query(ctx, `SELECT l.id, l.flow, l.seq, true, l.pos,
			NOT EXISTS (SELECT 1 FROM `+s+`.receipts AS r WHERE r.id = l.id) FROM `+s+`.`+commitLog+` AS l
		UNION ALL
		SELECT r.id, r.flow, r.seq, false, NULL, false FROM `+s+`.receipts AS r
		WHERE NOT EXISTS (SELECT 1 FROM `+s+`.`+commitLog+` AS l WHERE l.id = r.id)
		ORDER BY 5 NULLS LAST, 2, 3`)
	if err != nil {
		return nil, nil, fmt.Errorf("soak: receipts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r receipt
		var placed bool
		var pos *int64
		if err := rows.Scan(&r.id, &r.flow, &r.seq, &placed, &pos, &r.gone); err != nil {
			return nil, nil, fmt.Errorf("soak: receipts: %w", err)
		}
		out = append(out, r)
		if !placed {
			unplaced = append(unplaced, r.id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("soak: receipts: %w", err)
	}
	return out, unplaced, nil
}

// integrity checks a store's storage: "ok" or what is wrong. SQLite: PRAGMA
// integrity_check. PostgreSQL: no transaction left prepared, and amcheck's
// bt_index_check (with heapallindexed) finds every B-tree index of the
// schema consistent with itself and its table (the experiment's check).
func integrity(ctx context.Context, target string) (string, error) {
	if isPostgres(target) {
		return pgIntegrity(ctx, target)
	}
	db, err := openRO(target)
	if err != nil {
		return "", err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return "", fmt.Errorf("soak: integrity_check %s: %w", target, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "", fmt.Errorf("soak: integrity_check %s: %w", target, err)
		}
		lines = append(lines, s)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("soak: integrity_check %s: %w", target, err)
	}
	return strings.Join(lines, "; "), nil
}

func pgIntegrity(ctx context.Context, target string) (string, error) {
	conn, schema, err := pgTarget(target)
	if err != nil {
		return "", err
	}
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return "", fmt.Errorf("soak: integrity of %s: %w", schema, err)
	}
	defer c.Close(ctx)
	var prepared int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_xacts`).Scan(&prepared); err != nil {
		return "", fmt.Errorf("soak: integrity of %s: %w", schema, err)
	}
	if prepared != 0 {
		return fmt.Sprintf("%d prepared transactions left", prepared), nil
	}
	// A user who may not create the extension gets the error below.
	_, _ = c.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS amcheck`)
	rows, err := c.Query(ctx, `SELECT c.oid::regclass::text FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_am a ON a.oid = c.relam
		WHERE n.nspname = $1 AND a.amname = 'btree' ORDER BY 1`, schema)
	if err != nil {
		return "", fmt.Errorf("soak: integrity of %s: %w", schema, err)
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("soak: integrity of %s: %w", schema, err)
	}
	if len(indexes) == 0 {
		return "no indexes in schema " + schema, nil
	}
	for _, idx := range indexes {
		if _, err := c.Exec(ctx, `SELECT bt_index_check($1::regclass, true)`, idx); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code != "42883" { // 42883: no such function, amcheck missing
				return "index " + idx + ": " + pe.Message, nil
			}
			return "", fmt.Errorf("soak: integrity of %s (needs the amcheck extension): %w", schema, err)
		}
	}
	return "ok", nil
}

// openRO opens a SQLite file read-only through database/sql.
func openRO(path string) (*sql.DB, error) {
	u := url.URL{Scheme: "file", OmitHost: true, Path: path, RawQuery: "mode=ro&_pragma=busy_timeout(10000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("soak: open %s: %w", path, err)
	}
	return db, nil
}
