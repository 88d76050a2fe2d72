package pgreceiverstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/migration"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the newest migration this package knows (the number of
// migration files). Snapshots report receiver.SnapshotFormat, as
// receiverstore's do, so the two backends' snapshots are equal.
const SchemaVersion = 5

// DefaultSchema is the PostgreSQL schema the store lives in unless
// WithSchema says otherwise.
const DefaultSchema = "fairrelay_receiver"

// MaxSchemaLen is the longest schema name, in bytes, a store accepts:
// PostgreSQL cuts longer identifiers short without an error, so two long
// names could become one schema.
const MaxSchemaLen = 63

// migrationFiles are the schema's migrations, migrations/0001_initial.sql
// and on (the migration module): file n brings a schema from version n-1
// to n; "{s}" in them is the quoted schema name.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are migrationFiles in order, checked at start-up.
var migrations = migration.MustLoad(migrationFiles, SchemaVersion)

// An Option changes how Open sets up a Store.
type Option func(*options)

type options struct {
	schema   string
	maxDelta int
	hook     func(receiver.HookPoint)
	now      func() time.Time
	// general, set by tests, keeps every receive on the general path: the
	// statements sent from Go, never receive_accepted (onecall.go).
	general bool
}

// WithSchema sets the PostgreSQL schema the store lives in (created when
// missing). The default is DefaultSchema. A name that is empty, longer than
// MaxSchemaLen or holds a control character makes Open fail.
func WithSchema(name string) Option { return func(o *options) { o.schema = name } }

// WithMaxDelta sets the receiver's capability: the largest delta it
// applies. A valid message with a larger delta gets
// receiver.UnsupportedDelta. n must be in 1..1000; Open returns
// receiver.ErrInvalidOption otherwise. The default is 1000.
func WithMaxDelta(n int) Option { return func(o *options) { o.maxDelta = n } }

// WithHook makes the store call fn at receiver.HookAcceptBeforeCommit,
// inside the accept transaction. fn must not use the store; it may end the
// process (that is how crashes are injected). ReceiveBatch calls it once
// per accepted message, before its one commit. A store with a hook
// receives every batch on the general path, as statements sent from Go,
// since the one-call path commits on the server with no turn for Go
// before the commit (two round trips a batch, not one).
func WithHook(fn func(receiver.HookPoint)) Option { return func(o *options) { o.hook = fn } }

// WithNow replaces the store's clock, time.Now, with now: the wall-clock
// time a receipt records as the moment it was accepted, which Prune
// compares with its before (docs/contract.md §7.9). Tests set it; a nil
// now is time.Now. PostgreSQL keeps the time to the microsecond.
func WithNow(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Store is the receiver on PostgreSQL. It is safe for concurrent use, and
// any number of Store values, in any number of processes, may share one
// schema.
type Store struct {
	pool     *pgxpool.Pool
	own      bool // Close closes the pool
	schema   string
	q        func(string) string // puts the quoted schema into a query
	maxDelta int64
	hook     func(receiver.HookPoint)
	now      func() time.Time // the clock of receipts' accepted_at (WithNow)
	general  bool             // never receive_accepted (options.general)
}

// Open connects to the database at url (a postgres:// URL or DSN that
// pgxpool.ParseConfig accepts) and opens the store in it. Close closes the
// pool.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	s, err := OpenPool(ctx, pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// OpenPool opens the store through a pool the caller owns (Close leaves it
// open). It creates the schema when missing and applies the migrations it
// lacks in one transaction under an advisory lock, so several processes
// may open a new schema at once. An existing store is never cleared. A
// schema with a newer version, or with tables but no version, is
// receiver.ErrSchemaVersion.
func OpenPool(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	o := options{schema: DefaultSchema, maxDelta: receiver.DefaultMaxDelta}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxDelta < 1 || o.maxDelta > receiver.DefaultMaxDelta {
		return nil, fmt.Errorf("open: %w: WithMaxDelta(%d) is outside 1..%d", receiver.ErrInvalidOption, o.maxDelta, receiver.DefaultMaxDelta)
	}
	if err := migration.CheckSchemaName(o.schema, MaxSchemaLen); err != nil {
		return nil, fmt.Errorf("open: %w: %v", receiver.ErrInvalidOption, err)
	}
	if o.now == nil {
		o.now = time.Now
	}
	quoted := pgx.Identifier{o.schema}.Sanitize()
	s := &Store{pool: pool, schema: o.schema, maxDelta: int64(o.maxDelta), hook: o.hook, now: o.now, general: o.general,
		q: func(sql string) string { return strings.ReplaceAll(sql, "{s}", quoted) }}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("open schema %s: %w", o.schema, err)
	}
	return s, nil
}

// Close closes the pool when Open made it.
func (s *Store) Close() error {
	if s.own {
		s.pool.Close()
	}
	return nil
}

// migrateHook, when set (by tests), is called inside the migration's
// transaction after each migration file ran and recorded its version; an
// error fails the migration there.
var migrateHook func(version int) error

// migrate runs the migrations past the schema's version, each recording
// the version it reaches in schema_migrations, in one transaction under an
// advisory lock of the schema's name.
func (s *Store) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey("migrate", s.schema, "")); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, s.q(`CREATE SCHEMA IF NOT EXISTS {s}`)); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		var hasVersions bool
		var tables int
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
    (SELECT count(*) FROM pg_tables WHERE schemaname = $2)`,
			pgx.Identifier{s.schema, "schema_migrations"}.Sanitize(), s.schema).Scan(&hasVersions, &tables); err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		v := 0
		if hasVersions {
			if err := tx.QueryRow(ctx, s.q(`SELECT coalesce(max(version), 0) FROM {s}.schema_migrations`)).Scan(&v); err != nil {
				return fmt.Errorf("read schema version: %w", err)
			}
		} else if tables != 0 {
			return fmt.Errorf("%w: schema has tables but no schema_migrations: not a receiver store", receiver.ErrSchemaVersion)
		} else if _, err := tx.Exec(ctx, s.q(`CREATE TABLE {s}.schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`)); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		pending, err := migration.Pending(migrations, v)
		if err != nil {
			return fmt.Errorf("%w: schema has version %d, this build knows up to %d", receiver.ErrSchemaVersion, v, len(migrations))
		}
		for _, m := range pending {
			if _, err := tx.Exec(ctx, s.q(m.SQL)); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, s.q(`INSERT INTO {s}.schema_migrations (version) VALUES ($1)`), m.Version); err != nil {
				return fmt.Errorf("migration %d (%s): record the version: %w", m.Version, m.Name, err)
			}
			if migrateHook != nil {
				if err := migrateHook(m.Version); err != nil {
					return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
				}
			}
		}
		return nil
	})
}

// lockKey is the advisory lock key of one name in one schema: 64 bits of
// FNV-1a over (kind, schema, name). A collision only makes two unrelated
// transactions take turns.
func lockKey(kind, schema, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("fairrelay_receiver\x00" + kind + "\x00" + schema + "\x00" + name))
	return int64(h.Sum64())
}

// qCustomPlans makes the server plan each statement of a read
// transaction for the tables' current size: a generic plan, made once per
// connection after five executions of a prepared statement while a new
// store's tables were nearly empty, could scan receipts in full for an ID
// until autovacuum's first analyze (docs/decisions/postgres-custom-plans.md,
// measured there). SET LOCAL ends with the transaction.
const qCustomPlans = `SET LOCAL plan_cache_mode = force_custom_plan`

// qKeyPlans makes every statement of a write transaction (a receive, a
// prune) run the generic plan its connection made once, with sequential
// scans, hash joins and merge joins off for that plan: each row is reached
// through an index, by key, whatever the tables' size and statistics when
// the plan was made, and no write pays for planning again (the foreign key
// checks' own statements included); JIT and parallel workers are off, as
// in pgqueuestore, since a disabled scan's cost would otherwise compile a
// statement, or start workers for it, on every run. TestPlans_WriteGeneric checks the
// plans, also of an empty store never analyzed. set_config(…, true) ends
// with the transaction, as SET LOCAL does. See
// docs/decisions/postgres-custom-plans.md.
const qKeyPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), set_config('jit', 'off', true),
set_config('max_parallel_workers_per_gather', '0', true)`

// maxKeyLocks is the most per-key advisory locks one write transaction
// takes. Each is a slot of PostgreSQL's lock table, which every session
// shares (max_locks_per_transaction × max_connections; 64 a session by
// default): a batch over more keys takes the store's write key exclusive
// instead, one lock whatever its size, and runs alone
// (docs/decisions/postgres-receiver-locks.md).
const maxKeyLocks = 64

// writeKey is the store's write key: every write transaction holds it,
// shared beside its per-key locks, or exclusive instead of them.
func (s *Store) writeKey() int64 { return lockKey("write", s.schema, "") }

// sharedWriteKey is the step that takes the write key shared.
func (s *Store) sharedWriteKey() batchStep {
	return batchStep{what: "lock write key", sql: `SELECT pg_advisory_xact_lock_shared($1)`, args: []any{s.writeKey()}}
}

// keyLocks are the advisory keys a write of ms locks beside the write key
// shared: the keys of its IDs and flows, in ascending order, each once; nil
// over maxKeyLocks keys, when the write takes the write key exclusive
// instead. Both paths of a receive take their locks from here
// (withWriteTx, receive_accepted), so that they take the same locks in the
// same order.
func (s *Store) keyLocks(ms []receiver.Message) []int64 {
	keys := make([]int64, 0, 2*len(ms))
	for _, m := range ms {
		keys = append(keys, lockKey("id", s.schema, m.ID), lockKey("flow", s.schema, m.Flow))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) > maxKeyLocks {
		return nil
	}
	return keys
}

// withWriteTx runs fn in one READ COMMITTED transaction after taking the
// store's write key shared and the advisory locks of the given message IDs
// and flows, in ascending key order, or, over more than maxKeyLocks keys,
// the write key exclusive alone; when fn returns nil, the steps it
// returns go with COMMIT (begin), and it rolls back otherwise. BEGIN,
// qKeyPlans, the locks and the reads go to the server in one round trip:
// reads run after the locks are held.
func (s *Store) withWriteTx(ctx context.Context, ms []receiver.Message, fn func(pgx.Tx) ([]batchStep, error), reads ...batchStep) error {
	var first []batchStep
	keys := s.keyLocks(ms)
	if keys == nil {
		first = []batchStep{{what: "lock write key exclusive", sql: `SELECT pg_advisory_xact_lock($1)`, args: []any{s.writeKey()}}}
	} else {
		first = []batchStep{s.sharedWriteKey(), {what: "lock", sql: `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`, args: []any{keys}}}
	}
	return s.begin(ctx, pgx.TxOptions{}, qKeyPlans, fn, append(first, reads...)...)
}

// withReadTx runs fn in one read-only REPEATABLE READ transaction: every
// read inside sees the same state.
func (s *Store) withReadTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.begin(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, qCustomPlans, func(tx pgx.Tx) ([]batchStep, error) {
		return nil, fn(tx)
	})
}

// batchStep is a statement sent in a batch (with BEGIN, or with COMMIT),
// what it is for, and, for a query, what reads each of its rows (nil: an
// Exec, whose command tag tag checks when not nil).
type batchStep struct {
	what string
	sql  string
	args []any
	rows func(pgx.Rows) error
	tag  func(pgconn.CommandTag) error
}

// read reads the step's result from br.
func (st batchStep) read(br pgx.BatchResults) error {
	if st.rows == nil {
		t, err := br.Exec()
		if err == nil && st.tag != nil {
			err = st.tag(t)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
		return nil
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("%s: %w", st.what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := st.rows(rows); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", st.what, err)
	}
	return nil
}

// begin starts a transaction with BEGIN, plans (qKeyPlans or
// qCustomPlans) and first in one round trip (pgx.Batch.BeginTx) and runs
// fn; when fn returns nil, the steps it returns go to the server with
// COMMIT, in one round trip: a write's statements cost no round trip of
// their own. Any error rolls everything back.
func (s *Store) begin(ctx context.Context, o pgx.TxOptions, plans string, fn func(pgx.Tx) ([]batchStep, error), first ...batchStep) (err error) {
	// The connection is taken from the pool here, not through a pool
	// transaction, because a COMMIT sent in a batch leaves that
	// transaction's wrapper open: only Commit or Rollback would give the
	// connection back, and each costs a round trip.
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer c.Release() // a connection left inside a transaction is destroyed, not pooled
	b := &pgx.Batch{}
	b.BeginTx(o)
	steps := append([]batchStep{{what: "begin"}, {what: "plans", sql: plans}}, first...)
	for _, st := range steps[1:] {
		b.Queue(st.sql, st.args...)
	}
	br := c.SendBatch(ctx, b)
	tx := br.Tx()
	committed := false
	defer func() {
		if committed {
			return
		}
		if rerr := tx.Rollback(ctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) && err == nil {
			err = fmt.Errorf("rollback: %w", rerr)
		}
	}()
	if err := readSteps(br, steps); err != nil {
		return err
	}
	last, err := fn(tx)
	if err != nil {
		return err
	}
	// The server runs COMMIT before Go reads the first result of the
	// batch, so a step whose result Go checks or reads cannot stop it:
	// then the steps go first, in a round trip of their own. The
	// receive's check runs on the server (qAdvanceFlows).
	if slices.ContainsFunc(last, func(st batchStep) bool { return st.tag != nil || st.rows != nil }) {
		if err := sendSteps(ctx, tx, last); err != nil {
			return err
		}
		last = nil
	}
	if err := sendSteps(ctx, tx, append(last, batchStep{what: "commit", sql: "COMMIT", tag: func(t pgconn.CommandTag) error {
		if t.String() != "COMMIT" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	}})); err != nil {
		return err
	}
	committed = true
	return nil
}

// sendSteps sends steps in one batch inside tx and reads their results.
func sendSteps(ctx context.Context, tx pgx.Tx, steps []batchStep) error {
	b := &pgx.Batch{}
	for _, st := range steps {
		b.Queue(st.sql, st.args...)
	}
	return readSteps(tx.SendBatch(ctx, b), steps)
}

// readSteps reads the results of steps from br and closes it.
func readSteps(br pgx.BatchResults, steps []batchStep) error {
	for _, st := range steps {
		if err := st.read(br); err != nil {
			_ = br.Close() // the step's error is the one to return
			return err
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("send batch: %w", err)
	}
	return nil
}

var errNoRows = pgx.ErrNoRows

func isNoRows(err error) bool { return errors.Is(err, errNoRows) }
