package queuestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/dbfile"
	"github.com/fairrelay/fairrelay/drivertx"
	"github.com/fairrelay/fairrelay/migration"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/writerlock"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// migrationFiles are the schema's migrations, migrations/0001_initial.sql
// and on (the migration module): file n brings a file from version n-1 to
// n.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are migrationFiles in order, checked at start-up.
var migrations = migration.MustLoad(migrationFiles, SchemaVersion)

// SchemaVersion is the schema version this build writes and reads, kept in
// PRAGMA user_version: the number of migration files. Open brings a new or
// older file to it by running the migrations past the file's version, and
// refuses a file with a higher version.
const SchemaVersion = 9

// The contract's constants (docs/contract.md §2.3, §2.4): the default
// policy's values (DefaultPolicy). A store uses the policy recorded in its
// file (Policy, SetPolicy), which may differ.
// They are queue's constants.
const (
	// Lease is queue.Lease: how long a claim holds its event:
	// lease_until = now + Lease.
	Lease = queue.Lease
	// MaxAttempts is queue.MaxAttempts: the number of claims in one round
	// of an event.
	MaxAttempts = queue.MaxAttempts
	// BackoffBase is queue.BackoffBase: the backoff after the first failure.
	BackoffBase = queue.BackoffBase
	// BackoffCap is queue.BackoffCap: the largest backoff.
	BackoffCap = queue.BackoffCap
	// BusyTimeoutMillis is the SQLite busy timeout every connection uses.
	BusyTimeoutMillis = 10000
)

// Backoff is queue.Backoff: the default policy's wait after the k-th
// failed attempt of a round: min(BackoffBase * 2^(k-1), BackoffCap); 2, 4,
// 8, 8, … It panics for k < 1, a programmer error. DefaultPolicy().Backoff(k)
// is the same.
func Backoff(k int) clock.Tick { return queue.Backoff(k) }

// The hook points (queue's). The crash injector arms them in a child
// process.
const (
	HookEnqueueSeqTaken    = queue.HookEnqueueSeqTaken    // inside the enqueue tx, after the flow's seq number is taken, before commit
	HookClaimCommitted     = queue.HookClaimCommitted     // after a claim's tx commits, before Claim returns (only when a claim was made)
	HookSettleBeforeCommit = queue.HookSettleBeforeCommit // inside the settle tx, after its writes, before commit (only for acked/retry/quarantined)
	HookRedriveBeforeAudit = queue.HookRedriveBeforeAudit // inside the redrive tx, after the event update, before the audit insert
)

// An Option changes how Open sets up a Store.
type Option func(*options)

type options struct {
	hook     func(HookPoint)
	keep     writerlock.Keep
	readOnly bool // WithReadOnly (open.go)
	policy   *Policy
	realTime *realTime
}

// realTime is WithRealTime's setting.
type realTime struct {
	src  clock.Source
	skew clock.Tick
}

// WithPolicy gives the policy a new file is created with (the default is
// DefaultPolicy). On an existing file, a policy different from the one
// recorded is ErrPolicyMismatch and Open fails; the same policy, or no
// WithPolicy, opens the file with its recorded policy. An invalid policy is
// ErrInvalid. A new file with FairRotation gets the rotation's index
// (docs/contract.md §7.6).
func WithPolicy(p Policy) Option {
	return func(o *options) { o.policy = &p }
}

// WithRealTime makes ticks real time (docs/contract.md §7.3): src tells the
// wall clock (clock.Wall in production; ticks are then Unix milliseconds)
// and skew is the tolerance, in ticks, for writers that read the clock
// before they get the write turn. With it, every write checks its tick:
//
//   - a tick below the clock mark by at most skew is performed AT the mark
//     (leases and backoffs are computed from the mark);
//   - a tick further below the mark is ErrTimeRegression, as without it;
//   - a tick above src.Now() + skew is ErrTimeAhead, and nothing changes:
//     one caller with a wrong clock (seconds, nanoseconds, a typo) cannot
//     move the mark out of reach of everyone else.
//
// Without it, a write below the mark is ErrTimeRegression and any tick
// ahead is accepted (docs/contract.md §2.6). A nil src or a negative skew
// makes Open fail with ErrInvalid.
func WithRealTime(src clock.Source, skew clock.Tick) Option {
	return func(o *options) { o.realTime = &realTime{src: src, skew: skew} }
}

// WithHook makes the store call fn at each HookPoint. No cost when unset.
// fn runs on the calling goroutine, inside the transaction for the points
// that say so; it may call os.Exit (that is how crashes are injected). The
// batch operations call it where they pass the same point: EnqueueBatch once
// per event, ClaimBatch once after its commit, SettleBatch once before its
// commit.
func WithHook(fn func(HookPoint)) Option {
	return func(o *options) { o.hook = fn }
}

// WithWriterKeep sets how long this process keeps the file's write turn
// across consecutive writes before it hands the turn to the next writer
// process (writerlock.Keep). The default, writerlock.DefaultKeep, favours
// throughput: runs of up to 64 writes within 20 ms. writerlock.Keep{} hands
// the turn over after every write: the shortest waits for other processes,
// at about half the throughput when several processes write
// (docs/performance.md). A Keep that writerlock refuses makes Open fail.
func WithWriterKeep(k writerlock.Keep) Option {
	return func(o *options) { o.keep = k }
}

// Store is a durable fair queue in one SQLite file. It is safe for
// concurrent use, and several Store values, in one process or several, may
// share a file. Their writes take turns in arrival order through two lock
// files next to the database, PATH-writer and PATH-writer-gate (see
// the writerlock module).
type Store struct {
	db     *sql.DB
	writer *writerlock.Lock // turns among the file\'s writers (writerlock module, docs/performance.md "Fair writers")
	w      *drivertx.Conn   // the connection every write transaction runs on (drivertx)
	hook   func(HookPoint)
	stmts  map[string]*sql.Stmt // the read paths' statements, prepared once
	rt     *realTime            // WithRealTime; nil: logical time
	path   string               // as given to Open, for IsFull's look at the files
	ro     *dbfile.ReadOnly     // set by WithReadOnly: no writer, no w (open.go)
	pol    atomic.Pointer[cachedPolicy]
}

// cachedPolicy is the policy a Store last read, with meta.policy_rev as it
// was then; admit reads the policy again when the revision moved.
type cachedPolicy struct {
	pol Policy
	rev int64
}

// writeQueries are prepared once, at Open, on the write connection
// (drivertx), so a write does not parse its SQL again. RedriveAll's chunk
// read comes in four forms (no filter, flow, reason, both).
var writeQueries = append(redriveChunkQueries(), []string{
	qAdmitRead, qAdmit, qSetTicket,
	qFindEventFlow, qNewFlow, qNextSeq, qNextSeqHead, qInsertEvent,
	qPromote, qQuarantineExpired, qBlockFlow,
	qPickHeads, qClaimEvents, qServeFlows, qClaimEvent, qServeFlow,
	qRotPromote, qRotPickHeads, qRotServeFlows, qRotServeFlow, qRotSetClock,
	qSettleReadRows, qAckEvents, qSetHeads,
	qSettleRead, qAck, qRetry, qQuarantine, qSetHead, qWaitFlow, qInsertHistory, qTrimHistory,
	qRedriveRead, qRedrive, qSetReadyNow, qInsertAudit,
	qRedriveEvents, qRedriveFlows, qRotRedriveFlows, qRedriveAudit,
	qExtendRead, qExtend, qExtendFlow, qInsertAuditKind, qPolicyWrite,
	qPauseRead, qPause, qResume, qRotResume, qPruneAudit, qPruneHistory, qPruneEvents,
}...)

// readQueries are prepared at Open and reused by every read transaction on
// every connection of the pool (database/sql keeps one prepared copy per
// connection).
var readQueries = []string{
	qSnapMeta, qSnapFlows, qSnapEvents, qSnapAudit,
	qNextDueReady, qNextDueWaiting, qPolicyRead, qSnapAuditOther, qAuditAll,
	qSnapHistory, qEventHistory, qOldestWaiting,
	qPausedCount, qPrunableEvents, qPrunableAudit,
}

// txn is one transaction: a write transaction on the write connection
// (raw), or a read transaction through database/sql (Tx). Its
// QueryRowContext and ExecContext use the prepared statement for a known
// query, and plain SQL for any other.
type txn struct {
	raw *drivertx.Tx // a write transaction; nil for a read transaction
	*sql.Tx
	stmts map[string]*sql.Stmt
	bound map[string]*sql.Stmt // stmts bound to this transaction, on first use
}

// rowScanner is one row of a query: *sql.Row or *drivertx.Row.
type rowScanner interface {
	Scan(dest ...any) error
}

// stmt returns q's prepared statement bound to this transaction, binding it
// once per transaction (a batch runs the same few statements many times),
// or nil when q is not prepared.
func (t *txn) stmt(ctx context.Context, q string) *sql.Stmt {
	if st, ok := t.bound[q]; ok {
		return st
	}
	st, ok := t.stmts[q]
	if !ok {
		return nil
	}
	if t.bound == nil {
		t.bound = make(map[string]*sql.Stmt, 8)
	}
	b := t.Tx.StmtContext(ctx, st)
	t.bound[q] = b
	return b
}

// QueryRowContext runs q inside the transaction.
func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) rowScanner {
	if t.raw != nil {
		return t.raw.QueryRow(ctx, q, args...)
	}
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}

// QueryContext runs q inside a read transaction; the write paths read
// single rows only (QueryRowContext).
func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if t.raw != nil {
		return nil, fmt.Errorf("query %q: a write transaction reads single rows only", q)
	}
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

// ExecContext runs q inside the transaction.
func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if t.raw != nil {
		return t.raw.Exec(ctx, q, args...)
	}
	if st := t.stmt(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

// dsn builds the connection string: WAL, synchronous=FULL, foreign keys, a
// busy timeout, and BEGIN IMMEDIATE for every read-write transaction.
func dsn(path string) string {
	return uriPath(path) +
		fmt.Sprintf("?_pragma=busy_timeout(%d)", BusyTimeoutMillis) +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)&_txlock=immediate"
}

// uriPath is path in SQLite's URI form: escaped where SQLite would read the
// start of the query or fragment, and the escape character itself.
func uriPath(path string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// initNew gives a new (absent or empty) file auto_vacuum=INCREMENTAL, so
// that Prune can give the pages it frees back to the file system
// (docs/contract.md §7.9). The mode takes effect only before the file's
// first page is written, which the switch to WAL does: so it runs on a
// connection of its own, before any other. The pool's connections do not
// set it (on an existing file the pragma opens a write transaction), and
// an older file keeps the mode it has (PRAGMA auto_vacuum = INCREMENTAL
// then VACUUM, run once, converts it).
func initNew(path string) error {
	db, err := sql.Open("sqlite", uriPath(path)+
		fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=auto_vacuum(INCREMENTAL)&_pragma=journal_mode(WAL)", BusyTimeoutMillis))
	if err != nil {
		return err
	}
	return errors.Join(db.Ping(), db.Close())
}

// Open opens the queue store at path, creating the file and its schema when
// they do not exist. An existing store is opened as it is: nothing is
// cleared. A file with a newer (or unknown) schema version is refused with
// ErrSchemaVersion. A path that cannot be opened (ErrOpen) or a file that is
// not a queue store (ErrNotQueue) is refused before anything is written or
// created beside it (open.go); WithReadOnly opens an existing file without
// creating any. The path is a plain file path (any '?', '#' or '%' in
// it is escaped for SQLite's URI form).
//
// A new file records the policy given by WithPolicy, or DefaultPolicy; an
// existing file keeps its recorded policy (WithPolicy). A new file runs
// every migration from 1, an older file (version 1, 2 or 3) the ones past its
// version, all in one transaction (a version-1 file gets DefaultPolicy); if
// a migration fails, the file stays as it was.
//
// Defaults: WAL journal, synchronous=FULL, foreign keys on, a busy timeout of
// BusyTimeoutMillis, write transactions BEGIN IMMEDIATE, no hook, logical
// time (no WithRealTime).
func Open(path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("open: %w: empty path", ErrInvalid)
	}
	o := options{keep: writerlock.DefaultKeep}
	for _, opt := range opts {
		opt(&o)
	}
	if o.policy != nil {
		if err := o.policy.Validate(); err != nil {
			return nil, fmt.Errorf("open: %w", err)
		}
		p := o.policy.Normal()
		o.policy = &p
	}
	if rt := o.realTime; rt != nil {
		if rt.src == nil {
			return nil, fmt.Errorf("open: %w: WithRealTime without a clock source", ErrInvalid)
		}
		if rt.skew < 0 {
			return nil, fmt.Errorf("open: %w: WithRealTime skew %d is negative", ErrInvalid, rt.skew)
		}
	}
	if o.readOnly {
		return openReadOnly(path, o)
	}
	// A wrong file is refused before anything is created beside it (open.go).
	info, err := dbfile.Check(path, true)
	if err != nil {
		return nil, openError(path, err)
	}
	if err := probe(path, info); err != nil {
		return nil, err
	}
	wl, err := writerlock.OpenKeep(path, BusyTimeoutMillis*time.Millisecond, o.keep)
	if err != nil {
		return nil, openError(path, err)
	}
	if info.Size == 0 {
		if err := initNew(path); err != nil {
			wl.Close()
			return nil, fmt.Errorf("open %q: %w", path, err)
		}
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		wl.Close()
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	ctx := context.Background()
	w, err := drivertx.Open(ctx, db, nil)
	if err != nil {
		db.Close()
		wl.Close()
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	s := &Store{db: db, writer: wl, w: w, hook: o.hook, rt: o.realTime, path: path}
	if err := s.migrate(ctx, o.policy); err != nil {
		err = migrateError(path, err)
		s.closeRefused(err)
		return nil, err
	}
	dbfile.ShareSidecars(path)
	if err := w.Prepare(ctx, writeQueries); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	s.stmts = make(map[string]*sql.Stmt, len(readQueries))
	for _, q := range readQueries {
		st, err := db.Prepare(q)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("open %q: prepare %q: %w", path, q, err)
		}
		s.stmts[q] = st
	}
	return s, nil
}

// Close closes the store's statements, connections and writer lock files.
func (s *Store) Close() error {
	var first error
	for _, st := range s.stmts {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
	}
	if s.ro != nil { // WithReadOnly: no write connection, no lock files
		return errors.Join(first, s.db.Close(), s.ro.Close())
	}
	if err := s.w.Close(); err != nil && first == nil {
		first = err
	}
	if err := s.db.Close(); err != nil && first == nil {
		first = err
	}
	if err := s.writer.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// migrate checks the journal mode and, in one IMMEDIATE transaction (so
// that two processes opening a new file at once do not both apply it),
// runs the migrations past the file's version and checks the recorded
// policy against want (nil: no WithPolicy).
//
// It runs on a connection of its own with foreign keys off, as SQLite's
// table-rebuild procedure requires (the pragma cannot change inside a
// transaction); PRAGMA foreign_key_check runs before the commit.
func (s *Store) migrate(ctx context.Context, want *Policy) error {
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	if err := s.writer.Lock(ctx); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer s.writer.Unlock()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		conn.ExecContext(ctx, "PRAGMA foreign_keys = ON")
		return fmt.Errorf("begin: %w", err)
	}
	err = migrateTx(ctx, conn, want)
	if err == nil {
		_, err = conn.ExecContext(ctx, "COMMIT")
		if err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
	}
	if err != nil {
		conn.ExecContext(context.Background(), "ROLLBACK")
	}
	if _, ferr := conn.ExecContext(context.Background(), "PRAGMA foreign_keys = ON"); ferr != nil && err == nil {
		err = fmt.Errorf("restore foreign keys: %w", ferr)
	}
	if err != nil {
		conn.Raw(func(any) error { return driver.ErrBadConn }) // never reuse this connection
	}
	return err
}

// migrateHook, when set (by tests), is called inside the migration's
// transaction after each migration file ran and recorded its version; an
// error fails the migration there.
var migrateHook func(version int) error

// migrateTx is migrate's transaction body. It refuses a file that is not a
// queue's (tables but version 0) or is newer than this build, runs each
// migration past the file's version and records the version it reaches in
// PRAGMA user_version, checks the foreign keys the rebuilds could have
// broken, records a new file's policy, creates the rotation's index when
// the recorded policy is FairRotation (the index follows the policy, not
// the version: SetPolicy creates and drops it, and migration 3 rebuilds
// flows without it), and checks the recorded policy against want.
func migrateTx(ctx context.Context, conn *sql.Conn, want *Policy) error {
	var v int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	pending, err := migration.Pending(migrations, v)
	if err != nil {
		return fmt.Errorf("%w: file has version %d, this build knows %d", ErrSchemaVersion, v, SchemaVersion)
	}
	if v == 0 {
		var n int
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		if n != 0 {
			return fmt.Errorf("%w: file has tables but no schema version: not a queue store", ErrSchemaVersion)
		}
	}
	for _, m := range pending {
		if _, err := conn.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
		}
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
			return fmt.Errorf("migration %d (%s): record the version: %w", m.Version, m.Name, err)
		}
		if migrateHook != nil {
			if err := migrateHook(m.Version); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
	}
	if len(pending) > 0 {
		rows, err := conn.QueryContext(ctx, "PRAGMA foreign_key_check")
		if err != nil {
			return fmt.Errorf("migrate: foreign key check: %w", err)
		}
		bad := rows.Next()
		rows.Close()
		if bad {
			return fmt.Errorf("migrate: %w: foreign key check failed", ErrCorrupt)
		}
	}
	if v == 0 {
		p := DefaultPolicy()
		if want != nil {
			p = *want
		}
		if err := writePolicy(ctx, conn, p); err != nil {
			return err
		}
	}
	got, err := policyFromRow(conn.QueryRowContext(ctx, qPolicyRead))
	if err != nil {
		return fmt.Errorf("read policy: %w", err)
	}
	if len(pending) > 0 && got.Fairness == FairRotation {
		if _, err := conn.ExecContext(ctx, qRotIndex); err != nil {
			return fmt.Errorf("create rotation index: %w", err)
		}
	}
	if want != nil && !got.Equal(*want) {
		return fmt.Errorf("%w: the file records %+v, Open was given %+v", ErrPolicyMismatch, got, *want)
	}
	return nil
}

// withTx runs fn in one read-write (BEGIN IMMEDIATE) transaction and commits
// it when fn returns nil; any error rolls everything back.
//
// The transaction runs in this process's turn among the file's writers
// (the writerlock module): the turn is taken before BEGIN and given back after
// COMMIT or ROLLBACK.
func (s *Store) withTx(ctx context.Context, fn func(tx *txn) error) error {
	if s.ro != nil {
		return ErrReadOnly
	}
	if err := s.writer.Lock(ctx); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer s.writer.Unlock()
	return fullError(s.path, s.w.Tx(ctx, func(tx *drivertx.Tx) error { return fn(&txn{raw: tx}) }))
}

// withReadTx runs fn in one read transaction: every read inside sees the
// same state of the file.
func (s *Store) withReadTx(ctx context.Context, fn func(tx *txn) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	if err := fn(&txn{Tx: tx, stmts: s.stmts}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("end read: %w", err)
	}
	return nil
}

// call runs the hook at p, when one is set.
func (s *Store) call(p HookPoint) {
	if s.hook != nil {
		s.hook(p)
	}
}

const (
	// qAdmitRead reads, in one row, what every write needs first: the clock
	// mark, the last ticket and the policy's revision. A write whose cached
	// policy has another revision reads the policy again (qPolicyRead), so
	// a SetPolicy by any process applies to the next write of every
	// process, at the cost of one more integer column per write.
	qAdmitRead = `SELECT clock_mark, ticket, policy_rev FROM meta WHERE id = 1`

	qAdmit = `UPDATE meta SET clock_mark = ?1 WHERE id = 1`
)

// admission is what admit found: the tick the write happens at (now, or
// the mark when real time moved a slightly late tick up to it), the last
// ticket handed out and the recorded policy.
type admission struct {
	now    clock.Tick
	ticket int64
	pol    Policy
}

// admit is the first statement of every write transaction. It reads the
// mark, the ticket and the policy; refuses a tick that a lease or backoff
// would overflow (ErrTickOverflow); in real time (WithRealTime) refuses a
// tick too far ahead of the wall clock (ErrTimeAhead) and moves a tick at
// most skew below the mark up to the mark; then records now as the clock
// mark, or refuses it with ErrTimeRegression when it is below the mark. An
// error later in the transaction rolls the mark back with the rest. The
// mark is read first and written only when now is above it (an UPDATE ...
// RETURNING would build a temporary table in every transaction).
func (s *Store) admit(ctx context.Context, tx *txn, now clock.Tick) (admission, error) {
	var (
		mark, rev int64
		a         admission
	)
	if err := tx.QueryRowContext(ctx, qAdmitRead).Scan(&mark, &a.ticket, &rev); err != nil {
		return admission{}, fmt.Errorf("read clock mark: %w", err)
	}
	c := s.pol.Load()
	if c == nil || c.rev != rev {
		p, err := readPolicy(ctx, tx)
		if err != nil {
			return admission{}, err
		}
		c = &cachedPolicy{pol: p, rev: rev}
		s.pol.Store(c)
	}
	a.pol = c.pol
	if err := a.pol.CheckTick(now); err != nil {
		return admission{}, err
	}
	if rt := s.rt; rt != nil {
		wall := rt.src.Now()
		if limit := satAdd(wall, rt.skew); now > limit {
			return admission{}, fmt.Errorf("%w: tick %d is more than %d ahead of the wall clock %d", ErrTimeAhead, now, rt.skew, wall)
		}
		if now < clock.Tick(mark) && now >= clock.Tick(mark)-rt.skew {
			now = clock.Tick(mark)
		}
	}
	next, cerr := clock.Mark(mark).Admit(now)
	if cerr != nil {
		return admission{}, fmt.Errorf("%w: %w", ErrTimeRegression, cerr)
	}
	if next != clock.Mark(mark) {
		if _, err := tx.ExecContext(ctx, qAdmit, int64(now)); err != nil {
			return admission{}, fmt.Errorf("record clock mark: %w", err)
		}
	}
	a.now = now
	return a, nil
}

// satAdd is a + b, or math.MaxInt64 when that overflows (b >= 0).
func satAdd(a, b clock.Tick) clock.Tick {
	if a > clock.Tick(math.MaxInt64)-b {
		return clock.Tick(math.MaxInt64)
	}
	return a + b
}
