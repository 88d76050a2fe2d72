package queuestore

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/drivertx"
	"github.com/fairrelay/fairrelay/writerlock"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

//go:embed schema.sql
var schemaSQL string

// SchemaVersion is the schema version this build writes and reads, kept in
// PRAGMA user_version. Open refuses a file with any other non-zero version.
const SchemaVersion = 1

// The contract's constants (SPEC §2.3, §2.4).
const (
	// Lease is how long a claim holds its event: lease_until = now + Lease.
	Lease clock.Tick = 5
	// MaxAttempts is the number of claims in one round of an event.
	MaxAttempts = 3
	// BackoffBase is the backoff after the first failure.
	BackoffBase clock.Tick = 2
	// BackoffCap is the largest backoff.
	BackoffCap clock.Tick = 8
	// BusyTimeoutMillis is the SQLite busy timeout every connection uses.
	BusyTimeoutMillis = 10000
)

// Backoff returns the wait after the k-th failed attempt of a round:
// min(BackoffBase * 2^(k-1), BackoffCap); 2, 4, 8, 8, … It panics for k < 1,
// a programmer error.
func Backoff(k int) clock.Tick {
	if k < 1 {
		panic(fmt.Sprintf("queuestore: Backoff(%d): k must be at least 1", k))
	}
	d := BackoffBase
	for i := 1; i < k && d < BackoffCap; i++ {
		d *= 2
	}
	return min(d, BackoffCap)
}

// HookPoint names a point inside a store operation where the hook is called.
type HookPoint string

// The hook points. The crash injector arms them in a child process.
const (
	HookEnqueueSeqTaken    HookPoint = "queue.enqueue.seq_taken"    // inside the enqueue tx, after the flow's seq number is taken, before commit
	HookClaimCommitted     HookPoint = "queue.claim.committed"      // after a claim's tx commits, before Claim returns (only when a claim was made)
	HookSettleBeforeCommit HookPoint = "queue.settle.before_commit" // inside the settle tx, after its writes, before commit (only for acked/retry/quarantined)
	HookRedriveBeforeAudit HookPoint = "queue.redrive.before_audit" // inside the redrive tx, after the event update, before the audit insert
)

// An Option changes how Open sets up a Store.
type Option func(*options)

type options struct {
	hook func(HookPoint)
	keep writerlock.Keep
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
}

// writeQueries are prepared once, at Open, on the write connection
// (drivertx), so a write does not parse its SQL again.
var writeQueries = []string{
	qAdmitRead, qAdmit, qSetTicket,
	qFindEventFlow, qNewFlow, qNextSeq, qInsertEvent,
	qPromote, qPickHead, qQuarantineExpired, qBlockFlow, qClaimEvent, qServeFlow,
	qPickHeads, qClaimEvents, qServeFlows,
	qSettleReadRows, qAckEvents, qSetHeads,
	qSettleRead, qAck, qRetry, qQuarantine, qSetHead, qWaitFlow,
	qRedriveRead, qRedrive, qSetReadyNow, qInsertAudit,
}

// readQueries are prepared at Open and reused by every read transaction on
// every connection of the pool (database/sql keeps one prepared copy per
// connection).
var readQueries = []string{
	qSnapMeta, qSnapVersion, qSnapFlows, qSnapEvents, qSnapAudit,
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
	// The path is a URI path: escape what SQLite would read as the start of
	// the query or fragment, and the escape character itself.
	path = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + path +
		fmt.Sprintf("?_pragma=busy_timeout(%d)", BusyTimeoutMillis) +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)&_txlock=immediate"
}

// Open opens the queue store at path, creating the file and its schema when
// they do not exist. An existing store is opened as it is: nothing is
// cleared. A file with a newer (or unknown) schema version is refused with
// ErrSchemaVersion. The path is a plain file path (any '?', '#' or '%' in
// it is escaped for SQLite's URI form).
//
// Defaults: WAL journal, synchronous=FULL, foreign keys on, a busy timeout of
// BusyTimeoutMillis, write transactions BEGIN IMMEDIATE, no hook.
func Open(path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("open: %w: empty path", ErrInvalid)
	}
	o := options{keep: writerlock.DefaultKeep}
	for _, opt := range opts {
		opt(&o)
	}
	wl, err := writerlock.OpenKeep(path, BusyTimeoutMillis*time.Millisecond, o.keep)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", path, err)
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
	s := &Store{db: db, writer: wl, w: w, hook: o.hook}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
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

// migrate checks the journal mode and applies the schema to a new file, in
// one IMMEDIATE transaction so that two processes opening a new file at once
// do not both apply it.
func (s *Store) migrate(ctx context.Context) error {
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	return s.withTx(ctx, func(tx *txn) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		switch {
		case v == SchemaVersion:
			return nil
		case v != 0:
			return fmt.Errorf("%w: file has version %d, this build knows %d", ErrSchemaVersion, v, SchemaVersion)
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		if n != 0 {
			return fmt.Errorf("%w: file has tables but no schema version: not a queue store", ErrSchemaVersion)
		}
		if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
			return fmt.Errorf("apply schema: %w", err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
			return fmt.Errorf("set schema version: %w", err)
		}
		return nil
	})
}

// withTx runs fn in one read-write (BEGIN IMMEDIATE) transaction and commits
// it when fn returns nil; any error rolls everything back.
//
// The transaction runs in this process's turn among the file's writers
// (the writerlock module): the turn is taken before BEGIN and given back after
// COMMIT or ROLLBACK.
func (s *Store) withTx(ctx context.Context, fn func(tx *txn) error) error {
	if err := s.writer.Lock(ctx); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer s.writer.Unlock()
	return s.w.Tx(ctx, func(tx *drivertx.Tx) error { return fn(&txn{raw: tx}) })
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
	qAdmitRead = `SELECT clock_mark, ticket FROM meta WHERE id = 1`

	qAdmit = `UPDATE meta SET clock_mark = ?1 WHERE id = 1`
)

// admit is the first statement of every write transaction: it records now as
// the clock mark, or refuses it with ErrTimeRegression when now is below the
// mark. An error later in the transaction rolls the mark back with the rest.
// It returns the last ticket handed out. The mark is read first and written
// only when now is above it (an UPDATE ... RETURNING would build a temporary
// table in every transaction).
func admit(ctx context.Context, tx *txn, now clock.Tick) (int64, error) {
	var mark, ticket int64
	if err := tx.QueryRowContext(ctx, qAdmitRead).Scan(&mark, &ticket); err != nil {
		return 0, fmt.Errorf("read clock mark: %w", err)
	}
	next, cerr := clock.Mark(mark).Admit(now)
	if cerr != nil {
		return 0, fmt.Errorf("%w: %w", ErrTimeRegression, cerr)
	}
	if next != clock.Mark(mark) {
		if _, err := tx.ExecContext(ctx, qAdmit, int64(now)); err != nil {
			return 0, fmt.Errorf("record clock mark: %w", err)
		}
	}
	return ticket, nil
}
