package pgqueuestore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/migration"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the newest migration this package knows: the number of
// migration files.
const SchemaVersion = 14

// DefaultSchema is the PostgreSQL schema the store lives in unless
// WithSchema says otherwise.
const DefaultSchema = "fairrelay_queue"

// MaxSchemaLen is the longest schema name, in bytes, a store accepts: its
// wake-up channel, "fairrelay_queue." and the name, must fit PostgreSQL's
// 63-byte identifiers. A longer name would be cut short by the server
// without an error (two long names could become one schema) and
// pg_notify would refuse the channel, failing every write that wakes
// listeners.
const MaxSchemaLen = 63 - len(channelPrefix)

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
	hook     func(queue.HookPoint)
	policy   *queue.Policy
	realTime clock.Source
	skew     clock.Tick
	rtSet    bool // WithRealTime was given

	notifyEvery time.Duration
	notifySet   bool

	// version, when not 0, is the migration Open stops at: a schema as an
	// older build made it, for the migration tests.
	version int
	// general, set by tests, keeps every call on the general path: the
	// statements sent from Go, never settle_claim (onecall.go).
	general bool
}

// WithSchema sets the PostgreSQL schema the store lives in (created when
// missing). The default is DefaultSchema. A name that is empty, longer than
// MaxSchemaLen or holds a control character makes Open fail.
func WithSchema(name string) Option { return func(o *options) { o.schema = name } }

// WithHook makes the store call fn at each queue.HookPoint, as queuestore
// does: inside the transaction for the points that say so. fn may end the
// process (that is how crashes are injected); the server then rolls the
// transaction back.
func WithHook(fn func(queue.HookPoint)) Option { return func(o *options) { o.hook = fn } }

// WithPolicy sets the policy a new store records. On an existing store a
// different policy makes Open fail with queue.ErrPolicyMismatch; without
// this option Open uses the recorded one (docs/contract.md §7.1).
func WithPolicy(p queue.Policy) Option { return func(o *options) { o.policy = &p } }

// WithRealTime makes ticks real time (docs/contract.md §7.3), as
// queuestore.WithRealTime does: a write whose tick is at most skew below
// the clock mark happens AT the mark; further below is
// queue.ErrTimeRegression; a tick above src.Now() + skew is
// queue.ErrTimeAhead. A nil src or a negative skew makes Open fail with
// queue.ErrInvalid.
func WithRealTime(src clock.Source, skew clock.Tick) Option {
	return func(o *options) { o.realTime, o.skew, o.rtSet = src, skew, true }
}

// Store is a durable fair queue in one PostgreSQL schema. It is safe for
// concurrent use, and any number of Store values, in any number of
// processes, may share a schema.
type Store struct {
	pool     *pgxpool.Pool
	own      bool
	schema   string
	q        func(string) string
	hook     func(queue.HookPoint)
	realTime clock.Source
	skew     clock.Tick
	notify   *notifier
	dests    atomic.Bool // destinations exist (destination_claim.go)
	rotating atomic.Bool // the policy last read is the rotation (onecall.go)
	general  bool        // never settle_claim (options.general)
	// markConn is the transactional enqueue's connection for raising the
	// clock mark, outside the pool (raiseMark); Close closes it. Whoever
	// holds turn (a one-slot channel, so that waiting for it can end with
	// a context) may use c and closed; raised is the highest tick this
	// store raised the mark to.
	markConn struct {
		turn   chan struct{}
		c      *pgx.Conn
		closed bool
		raised atomic.Int64
	}
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
// open). It creates the schema when missing and runs the migrations past
// the schema's version (every one for a new schema), each recording the
// version it reaches in schema_migrations, in one transaction under an
// advisory lock, so several processes may open a new schema at once. An
// existing store is never cleared. A schema with a newer version, or with
// tables but no version, is queue.ErrSchemaVersion.
func OpenPool(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	o := options{schema: DefaultSchema}
	for _, opt := range opts {
		opt(&o)
	}
	if err := migration.CheckSchemaName(o.schema, MaxSchemaLen); err != nil {
		return nil, fmt.Errorf("open: %w: %v", queue.ErrInvalid, err)
	}
	if o.policy != nil {
		if err := o.policy.Validate(); err != nil {
			return nil, fmt.Errorf("open: %w", err)
		}
		p := o.policy.Normal()
		o.policy = &p
	}
	if o.rtSet && o.realTime == nil {
		return nil, fmt.Errorf("open: %w: WithRealTime without a clock source", queue.ErrInvalid)
	}
	if o.rtSet && o.skew < 0 {
		return nil, fmt.Errorf("open: %w: WithRealTime skew %d is negative", queue.ErrInvalid, o.skew)
	}
	quoted := pgx.Identifier{o.schema}.Sanitize()
	every := DefaultNotifyInterval
	if o.notifySet {
		if o.notifyEvery < 0 {
			return nil, fmt.Errorf("open: %w: negative notify interval %v", queue.ErrInvalid, o.notifyEvery)
		}
		every = o.notifyEvery
	}
	s := &Store{pool: pool, schema: o.schema, hook: o.hook, realTime: o.realTime, skew: o.skew, notify: &notifier{every: every},
		general: o.general || (o.version != 0 && o.version < oneCallVersion),
		q:       func(sql string) string { return strings.ReplaceAll(sql, "{s}", quoted) }}
	s.markConn.turn = make(chan struct{}, 1)
	if err := s.migrate(ctx, o.policy, o.version); err != nil {
		return nil, fmt.Errorf("open schema %s: %w", o.schema, err)
	}
	return s, nil
}

// Close closes the pool when Open made it, and the connection EnqueueTx
// raises the clock mark on, when one was opened.
func (s *Store) Close() error {
	s.markConn.turn <- struct{}{}
	var err error
	if c := s.markConn.c; c != nil {
		err = c.Close(context.Background())
		s.markConn.c = nil
	}
	s.markConn.closed = true
	<-s.markConn.turn
	if s.own {
		s.pool.Close()
	}
	return err
}

// migrateHook, when set (by tests), is called inside the migration's
// transaction after each migration file ran and recorded its version; an
// error fails the migration there.
var migrateHook func(version int) error

// migrate runs the migrations past the schema's version, up to version
// (every one when version is 0), each recording the version it reaches in
// schema_migrations, records a new schema's policy or checks the recorded
// one, all in one transaction under an advisory lock of the schema's name.
func (s *Store) migrate(ctx context.Context, p *queue.Policy, version int) error {
	if version == 0 {
		version = len(migrations)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		h := fnv.New64a()
		h.Write([]byte("fairrelay_queue\x00migrate\x00" + s.schema))
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64())); err != nil {
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
			return fmt.Errorf("%w: schema has tables but no schema_migrations: not a queue store", queue.ErrSchemaVersion)
		} else if _, err := tx.Exec(ctx, s.q(`CREATE TABLE {s}.schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`)); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		pending, err := migration.Pending(migrations, v)
		if err != nil {
			return fmt.Errorf("%w: schema has version %d, this build knows up to %d", queue.ErrSchemaVersion, v, len(migrations))
		}
		pending = pending[:max(min(version-v, len(pending)), 0)]
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
		if v == 0 {
			np := queue.DefaultPolicy()
			if p != nil {
				np = *p
			}
			ins, args := `INSERT INTO {s}.meta (id, clock_mark, ticket, `+qPolicyCols+`)
VALUES (1, 0, 0, $1, $2, $3, $4, $5, $6, $7, $8, $9)`, policyArgs(np)
			if version == 6 {
				// A schema stopped at migration 6 has no retention.
				ins, args = `INSERT INTO {s}.meta (id, clock_mark, ticket, `+qPolicyColsV6+`)
VALUES (1, 0, 0, $1, $2, $3, $4, $5, $6, $7, $8)`, args[:8]
			}
			if version < 6 {
				// A schema stopped before migration 6 (the migration
				// tests' older builds) has no schedule or retry-after cap.
				ins, args = `INSERT INTO {s}.meta
    (id, clock_mark, ticket, lease, max_attempts, backoff_base, backoff_cap, jitter, fairness)
VALUES (1, 0, 0, $1, $2, $3, $4, $5, $6)`, args[:6]
			}
			if _, err := tx.Exec(ctx, s.q(ins), args...); err != nil {
				return fmt.Errorf("record policy: %w", err)
			}
			return nil
		}
		if p != nil {
			stored, err := readPolicy(ctx, tx, s.q)
			if err != nil {
				return err
			}
			if !stored.Equal(*p) {
				return fmt.Errorf("%w: the schema records %+v, Open was given %+v", queue.ErrPolicyMismatch, stored, *p)
			}
		}
		return nil
	})
}

// qPolicyCols are meta's policy columns, in the order of policyRow's
// dest and policyArgs.
const qPolicyCols = qPolicyColsV6 + `, retention`

// qPolicyColsV6 are the policy columns of a schema at migration 6.
const qPolicyColsV6 = `lease, max_attempts, backoff_base, backoff_cap, jitter, fairness, schedule, retry_after_cap`

const qPolicy = `SELECT ` + qPolicyCols + ` FROM {s}.meta WHERE id = 1`

// policyRow scans meta's policy columns (qPolicyCols) into a queue.Policy.
type policyRow struct {
	p                          queue.Policy
	lease, base, capT, retryAt int64
	retention                  int64
	fair                       string
	schedule                   []int64
}

// dest is the scan destinations of qPolicyCols.
func (r *policyRow) dest() []any {
	return []any{&r.lease, &r.p.MaxAttempts, &r.base, &r.capT, &r.p.Jitter, &r.fair, &r.schedule, &r.retryAt, &r.retention}
}

// policy is the scanned policy: an empty schedule is none (nil).
func (r *policyRow) policy() queue.Policy {
	p := r.p
	p.Lease, p.BackoffBase, p.BackoffCap, p.Fairness = clock.Tick(r.lease), clock.Tick(r.base), clock.Tick(r.capT), queue.Fairness(r.fair)
	p.RetryAfterCap = clock.Tick(r.retryAt)
	p.Retention = clock.Tick(r.retention)
	p.Schedule = nil
	for _, w := range r.schedule {
		p.Schedule = append(p.Schedule, clock.Tick(w))
	}
	return p
}

// policyArgs are p's values for qPolicyCols: no schedule is an empty
// array (the column is NOT NULL).
func policyArgs(p queue.Policy) []any {
	sched := make([]int64, 0, len(p.Schedule))
	for _, w := range p.Schedule {
		sched = append(sched, int64(w))
	}
	return []any{int64(p.Lease), p.MaxAttempts, int64(p.BackoffBase), int64(p.BackoffCap), p.Jitter, string(p.Fairness),
		sched, int64(p.RetryAfterCap), int64(p.Retention)}
}

// rowQuerier is what pgx.Tx and *pgxpool.Pool share.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readPolicy(ctx context.Context, tx rowQuerier, q func(string) string) (queue.Policy, error) {
	var r policyRow
	if err := tx.QueryRow(ctx, q(qPolicy)).Scan(r.dest()...); err != nil {
		return queue.Policy{}, fmt.Errorf("read policy: %w", err)
	}
	return r.policy(), nil
}

// Policy returns the store's recorded policy.
func (s *Store) Policy(ctx context.Context) (queue.Policy, error) {
	p, err := readPolicy(ctx, s.pool, s.q)
	if err != nil {
		return queue.Policy{}, fmt.Errorf("policy: %w", err)
	}
	return p, nil
}

// qCustomPlans makes the server plan each statement of a read
// transaction for its own arguments and the tables' sizes at that moment,
// instead of reusing a generic plan made once per connection (after five
// executions of a prepared statement). A queue's tables grow from empty
// within seconds: a generic plan made while events was tiny scans the
// whole table until autovacuum analyzes it. SET LOCAL ends with the
// transaction, so a pool the caller passes to OpenPool keeps its own
// setting for everything else. See docs/decisions/postgres-custom-plans.md.
const qCustomPlans = `SET LOCAL plan_cache_mode = force_custom_plan`

// qKeyPlans makes every statement of a write transaction run the generic
// plan its connection made once, with sequential scans, hash joins and
// merge joins off for that plan: the plan reaches each row through an
// index, by key, whatever the tables' size and statistics were when it was
// made, so it cannot go wrong as the tables grow, and no write pays for
// planning again (a custom plan cost about as much as running the
// statement). Every write statement has the index it needs
// (TestPlans_IndexDriven checks the generic plans, also of an empty store
// never analyzed). JIT is off too: a statement with no index to use (the
// turn's DELETE FROM arrivals) keeps its sequential scan at the disabled
// scan's cost, far above jit_above_cost, and was compiled on every run,
// the first in each connection spending 80 ms loading LLVM. Parallel
// workers are off for the same reason: a disabled scan's cost made the
// merged pick over 100 destinations start two workers on every run (45 ms
// against 1). set_config(…, true) ends with the transaction, as SET LOCAL does. See
// docs/decisions/postgres-custom-plans.md.
const qKeyPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), set_config('jit', 'off', true),
set_config('max_parallel_workers_per_gather', '0', true)`

// admission is the meta row as the transaction's first statement read and
// locked it; admit checks a tick against it.
type admission struct {
	mark int64
	m    meta
}

// withTx runs fn in one READ COMMITTED transaction and commits it when fn
// returns nil; any error rolls everything back. BEGIN, qKeyPlans, the
// read of the meta row FOR UPDATE and the taking of the committed
// arrivals (qTakeArrivals) go to the server in one round trip, so every
// write's first statement locks the meta row and writes take turns
// (docs/decisions/postgres-one-write-turn.md); the turn then promotes the
// arrivals into heads (promoteArrivals) before fn gets the row, for admit
// or admitPipe, which every write calls first.
func (s *Store) withTx(ctx context.Context, fn func(pgx.Tx, admission) error) error {
	return s.withTxAfter(ctx, nil, fn)
}

// withTxAfter is withTx with the steps locks run before the meta row is
// locked, in the same round trip: locks that may wait for a caller's
// transaction (EnqueueTx) and so must never wait while the meta row is
// held, such as those SetFlowDestination takes on a flow's counter. An
// enqueue's locks (lockSteps) go through withTxRead, with its reads.
func (s *Store) withTxAfter(ctx context.Context, locks []step, fn func(pgx.Tx, admission) error) error {
	return s.withTxRead(ctx, locks, nil, func(tx pgx.Tx, a admission, _ bool, _ *pipe) error { return fn(tx, a) })
}

// withTxRead is withTxAfter with reads that go to the server after the
// meta row is locked and the arrivals taken, in the same first round
// trip, so a write that knows what it must read before it begins (a
// settle: its events) spends no round trip of its own on it
// (docs/decisions/postgres-per-event-cost.md). What the reads saw is
// what fn would read, unless the turn promoted arrivals (a flow's last
// seq, head and readiness may have moved since): fn is told so (stale)
// and must read again. What fn leaves on last goes to the server with
// COMMIT (begin).
func (s *Store) withTxRead(ctx context.Context, locks, reads []step, fn func(tx pgx.Tx, a admission, stale bool, last *pipe) error) error {
	var a admission
	var arrived []string
	first := append(locks, step{what: "read clock mark", sql: s.q(qAdmitRead), rows: func(r pgx.Rows) error {
		var pr policyRow
		if err := r.Scan(append([]any{&a.mark, &a.m.ticket}, pr.dest()...)...); err != nil {
			return err
		}
		a.m.policy = pr.policy()
		s.rotating.Store(rotation(a.m.policy))
		return nil
	}}, step{what: "take arrivals", sql: s.q(qTakeArrivals), rows: func(r pgx.Rows) error {
		var f string
		if err := r.Scan(&f); err != nil {
			return err
		}
		arrived = append(arrived, f)
		return nil
	}})
	first = append(first, reads...)
	return s.begin(ctx, pgx.TxOptions{}, qKeyPlans, first, func(tx pgx.Tx, last *pipe) error {
		if len(arrived) > 0 {
			if err := s.promoteArrivals(ctx, tx, arrived, a.m.policy); err != nil {
				return err
			}
		}
		return fn(tx, a, len(arrived) > 0, last)
	})
}

// withReadTx runs fn in one read-only REPEATABLE READ transaction, with
// qCustomPlans sent in the same round trip as BEGIN.
func (s *Store) withReadTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.begin(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, qCustomPlans, nil, func(tx pgx.Tx, _ *pipe) error { return fn(tx) })
}

// begin sends BEGIN (with o), plans (qKeyPlans or qCustomPlans) and the
// steps first in one round trip (pgx.Batch.BeginTx), reads their results
// and runs fn; when fn returns nil, the statements it left on last go to
// the server with COMMIT, in one round trip (pipe.commit): a write's last
// statements cost no round trip of their own
// (docs/decisions/postgres-commit-in-the-last-batch.md). Any error rolls
// everything back.
func (s *Store) begin(ctx context.Context, o pgx.TxOptions, plans string, first []step, fn func(tx pgx.Tx, last *pipe) error) (err error) {
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
	b.Queue(plans)
	for _, st := range first {
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
	for _, what := range []string{"begin", "plans"} {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	for _, st := range first {
		if err := st.read(br); err != nil {
			_ = br.Close()
			return err
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	var last pipe
	if err := fn(tx, &last); err != nil {
		return err
	}
	if err := last.commit(ctx, tx); err != nil {
		return err
	}
	committed = true
	return nil
}

func (s *Store) call(p queue.HookPoint) {
	if s.hook != nil {
		s.hook(p)
	}
}

// meta is what admit read: the last ticket and the policy.
type meta struct {
	ticket int64
	policy queue.Policy
}

const qAdmitRead = `SELECT clock_mark, ticket, ` + qPolicyCols + `
FROM {s}.meta WHERE id = 1 FOR UPDATE`

// admit checks the tick against the meta row that withTx read and locked
// as the transaction's first statement: against the policy
// (queue.ErrTickOverflow), the wall clock (real time: queue.ErrTimeAhead)
// and the clock mark (queue.ErrTimeRegression, also clock.ErrRegression),
// and records it as the new mark, exactly as queuestore's admit does. With
// real time a tick at most the skew below the mark is moved up to the mark.
// It returns the (possibly moved) tick.
func (s *Store) admit(ctx context.Context, tx pgx.Tx, a admission, now clock.Tick) (clock.Tick, meta, error) {
	return s.admitPipe(ctx, tx, a, now, nil)
}

// admitPipe is admit, but with a pipe the write of the new clock mark is
// queued on pp, to go with the caller's next statements in one round trip
// (the batch operations: docs/decisions/postgres-batch-round-trips.md);
// the caller sends pp, or leaves it to go with COMMIT when pp is the
// transaction's last pipe (begin).
func (s *Store) admitPipe(ctx context.Context, tx pgx.Tx, a admission, now clock.Tick, pp *pipe) (clock.Tick, meta, error) {
	mark, m := a.mark, a.m
	if err := m.policy.CheckTick(now); err != nil {
		return 0, meta{}, err
	}
	if s.realTime != nil {
		wall := s.realTime.Now()
		if limit := satAdd(wall, s.skew); now > limit {
			return 0, meta{}, fmt.Errorf("%w: tick %d is more than %d ahead of the wall clock %d", queue.ErrTimeAhead, now, s.skew, wall)
		}
		if now < clock.Tick(mark) && now >= clock.Tick(mark)-s.skew {
			now = clock.Tick(mark)
		}
	}
	next, cerr := clock.Mark(mark).Admit(now)
	if cerr != nil {
		return 0, meta{}, fmt.Errorf("%w: %w", queue.ErrTimeRegression, cerr)
	}
	if next != clock.Mark(mark) {
		if pp != nil {
			pp.exec("record clock mark", s.q(qRecordMark), int64(now))
		} else if _, err := tx.Exec(ctx, s.q(qRecordMark), int64(now)); err != nil {
			return 0, meta{}, fmt.Errorf("record clock mark: %w", err)
		}
	}
	return now, m, nil
}

const qRecordMark = `UPDATE {s}.meta SET clock_mark = $1 WHERE id = 1`

// satAdd is a + b, or math.MaxInt64 when that overflows.
func satAdd(a, b clock.Tick) clock.Tick {
	if a > clock.Tick(math.MaxInt64)-b {
		return clock.Tick(math.MaxInt64)
	}
	return a + b
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
