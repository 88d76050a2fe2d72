package receiverstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/receiver"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/fairrelay/fairrelay/dbfile"
	"github.com/fairrelay/fairrelay/drivertx"
	"github.com/fairrelay/fairrelay/migration"
	"github.com/fairrelay/fairrelay/writerlock"
)

// SchemaVersion is the PRAGMA user_version this package writes and reads:
// the number of migration files. Open refuses a file with a higher version.
const SchemaVersion = 3

// DefaultMaxDelta is receiver.DefaultMaxDelta: the largest delta the
// receiver applies unless [WithMaxDelta] says otherwise. It is also the
// highest cap allowed.
const DefaultMaxDelta = receiver.DefaultMaxDelta

// migrationFiles are the schema's migrations, migrations/0001_initial.sql
// and on (the migration module): file n brings a file from version n-1 to
// n.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are migrationFiles in order, checked at start-up.
var migrations = migration.MustLoad(migrationFiles, SchemaVersion)

var (
	// ErrInvalidBody reports a body that is not {"delta": N} with an
	// integer N in 1..1000. Nothing changes.
	ErrInvalidBody = receiver.ErrInvalidBody
	// ErrInvalid reports a message whose ID, Flow or Seq is out of bounds,
	// or a flow name that cannot exist. Nothing changes.
	ErrInvalid = receiver.ErrInvalid
	// ErrInvalidOption reports an Open option out of its range.
	ErrInvalidOption = receiver.ErrInvalidOption
	// ErrSchemaVersion reports a file written by a newer schema than this
	// package knows. Open refuses it and changes nothing.
	ErrSchemaVersion = receiver.ErrSchemaVersion
)

// HookAcceptBeforeCommit is receiver.HookAcceptBeforeCommit: called inside
// the accept transaction, after the receipt insert and the total update,
// before commit.
const HookAcceptBeforeCommit = receiver.HookAcceptBeforeCommit

// Option configures Open.
type Option func(*options)

type options struct {
	maxDelta int
	hook     func(HookPoint)
	keep     writerlock.Keep
	readOnly bool // WithReadOnly (open.go)
	effect   Effect
	schema   string
	now      func() time.Time
}

// WithMaxDelta sets the receiver's capability: the largest delta it applies.
// A valid message with a larger delta gets [UnsupportedDelta]. n must be in
// 1..1000; Open returns [ErrInvalidOption] otherwise. The default is 1000.
func WithMaxDelta(n int) Option {
	return func(o *options) { o.maxDelta = n }
}

// WithNow replaces the store's clock, time.Now, with now: the wall-clock
// time a receipt records as the moment it was accepted, which Prune
// compares with its before (docs/contract.md §7.9). Tests set it; a nil
// now is time.Now.
func WithNow(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithHook makes the store call fn at each HookPoint. No cost when unset.
// fn runs while the store holds a write transaction: it must not use the
// store. It may end the process (os.Exit): that is how crashes are injected.
// ReceiveBatch calls HookAcceptBeforeCommit once per accepted message, after
// all of the batch's writes and before its one commit.
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

// Store is the receiver's SQLite database. It is safe for concurrent use,
// and several Store values, in one process or many, may share one file.
// Their writes take turns in arrival order through two lock files next to
// the database, PATH-writer and PATH-writer-gate (see the writerlock module).
type Store struct {
	db       *sql.DB
	writer   *writerlock.Lock // turns among the file\'s writers (writerlock module, docs/performance.md "Fair writers")
	w        *drivertx.Conn   // the connection every write transaction runs on (drivertx); nil with an effect
	maxDelta int64
	hook     func(HookPoint)
	path     string           // as given to Open, for IsFull's look at the files
	ro       *dbfile.ReadOnly // set by WithReadOnly: no writer, no w (open.go)
	effect   Effect           // nil: the built-in delta sum only
	now      func() time.Time // the clock of receipts' accepted_at (WithNow)
	// pruneCommitted, when set (by tests), is called after a Prune's
	// transaction committed and before its incremental vacuum.
	pruneCommitted func()
}

// dsn opens path in WAL mode with synchronous=FULL, a 10 s busy timeout,
// foreign keys on and every read-write transaction started IMMEDIATE. A new
// file gets auto_vacuum=INCREMENTAL first (newFileVacuum).
//
// The path goes into an SQLite URI, where '#', '?' and '%' have meanings of
// their own (t.TempDir names fuzz seeds "FuzzX/seed#0"): it is made absolute
// and percent-encoded, or SQLite would open a file other than path.
func dsn(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	u := url.URL{
		Scheme: "file",
		Path:   filepath.ToSlash(abs),
		RawQuery: "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)" +
			"&_pragma=foreign_keys(ON)&_txlock=immediate",
	}
	return u.String(), nil
}

// Open opens or creates the receiver database at path and runs the
// migrations past the file's version (every one for a new file) in one
// transaction. An existing file is never cleared. The
// default MaxDelta is 1000 and no hook is set. Open returns
// [ErrInvalidOption] for an option out of range and [ErrSchemaVersion] for a
// file written by a newer version of this package. A path that cannot be
// opened ([ErrOpen]) or a file that is not a receiver database
// ([ErrNotReceiver]) is refused before anything is written or created beside
// it (open.go). [WithReadOnly] opens an existing file without creating any.
func Open(path string, opts ...Option) (*Store, error) {
	o := options{maxDelta: DefaultMaxDelta, keep: writerlock.DefaultKeep}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxDelta < 1 || o.maxDelta > DefaultMaxDelta {
		return nil, fmt.Errorf("%w: WithMaxDelta(%d) is outside 1..%d", ErrInvalidOption, o.maxDelta, DefaultMaxDelta)
	}
	if o.readOnly {
		return openReadOnly(path, o)
	}
	// A wrong file is refused before anything is created beside it (open.go).
	info, err := dbfile.Check(path, true)
	if err != nil {
		return nil, openError(path, err)
	} else if err := probe(path, info); err != nil {
		return nil, err
	}
	newFile := info.Size == 0
	name, err := dsn(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	wl, err := writerlock.OpenKeep(path, writeTurnTimeout, o.keep)
	if err != nil {
		return nil, openError(path, err)
	}
	if newFile {
		if err := newFileVacuum(context.Background(), path, wl); err != nil {
			return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), wl.Close())
		}
	}
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), wl.Close())
	}
	if err := migrate(context.Background(), db, wl); err != nil {
		err = migrateError(path, err)
		return nil, errors.Join(err, db.Close(), closeOrRemove(wl, err))
	}
	dbfile.ShareSidecars(path)
	if o.schema != "" {
		err := withTx(context.Background(), db, wl, nil, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(context.Background(), o.schema)
			return err
		})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("open %s: apply WithSchema: %w", path, err), db.Close(), wl.Close())
		}
	}
	if o.now == nil {
		o.now = time.Now
	}
	s := &Store{db: db, writer: wl, maxDelta: int64(o.maxDelta), hook: o.hook, path: path, effect: o.effect, now: o.now}
	if o.effect != nil {
		// The effect needs a *sql.Tx: writes go through database/sql.
		return s, nil
	}
	if s.w, err = drivertx.Open(context.Background(), db, writeQueries); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), db.Close(), wl.Close())
	}
	return s, nil
}

// newFileVacuum makes a new, empty file with auto_vacuum=INCREMENTAL, in
// the writer's turn, on a connection of its own whose first pragma it is:
// SQLite takes the setting only while the file has no page at all, before
// journal_mode=WAL writes its header. Prune then gives the pages of deleted
// receipts back to the file system (prune.go). It is called only for a
// file Open found empty; on a file another process made meanwhile it
// changes nothing.
func newFileVacuum(ctx context.Context, path string, wl *writerlock.Lock) error {
	name, err := dsn(path)
	if err != nil {
		return fmt.Errorf("set auto_vacuum: %w", err)
	}
	name = strings.Replace(name, "_pragma=busy_timeout(10000)&", "_pragma=busy_timeout(10000)&_pragma=auto_vacuum(INCREMENTAL)&", 1)
	if err := wl.Lock(ctx); err != nil {
		return fmt.Errorf("set auto_vacuum: %w", err)
	}
	defer wl.Unlock()
	db, err := sql.Open("sqlite", name)
	if err != nil {
		return fmt.Errorf("set auto_vacuum: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		return errors.Join(fmt.Errorf("set auto_vacuum: %w", err), db.Close())
	}
	return db.Close()
}

// migrateHook, when set (by tests), is called inside the migration's
// transaction after each migration file ran and recorded its version; an
// error fails the migration there.
var migrateHook func(version int) error

// migrate runs, in one transaction, each migration past the file's version
// (inspect refuses a file that is not a receiver's or is newer) and records
// the version it reaches in PRAGMA user_version.
func migrate(ctx context.Context, db *sql.DB, wl *writerlock.Lock) error {
	return withTx(ctx, db, wl, nil, func(tx *sql.Tx) error {
		v, err := inspect(ctx, tx)
		if err != nil {
			return err
		}
		pending, err := migration.Pending(migrations, v)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSchemaVersion, err)
		}

		for _, m := range pending {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
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

// Close closes the database and the writer lock files.
func (s *Store) Close() error {
	if s.ro != nil {
		return errors.Join(s.db.Close(), s.ro.Close())
	}
	var werr error
	if s.w != nil {
		werr = s.w.Close()
	}
	return errors.Join(werr, s.db.Close(), s.writer.Close())
}

// withTx runs fn in one transaction: IMMEDIATE unless opts asks for a
// read-only one (a deferred BEGIN). It commits when fn returns nil and rolls
// back otherwise.
//
// A read-write transaction runs in this process's turn among the file's
// writers (writerlock module): the turn is taken before BEGIN and given back
// after COMMIT or ROLLBACK.
func withTx(ctx context.Context, db *sql.DB, wl *writerlock.Lock, opts *sql.TxOptions, fn func(*sql.Tx) error) (err error) {
	if opts == nil || !opts.ReadOnly {
		if err := wl.Lock(ctx); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer wl.Unlock()
	}
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
			}
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// withWriteTx runs fn in one IMMEDIATE transaction on the store's write
// connection (drivertx), in this process's turn among the file's writers
// (the writerlock module), and commits it when fn returns nil; any error rolls
// everything back. Open's migration and the read-only Snapshot go through
// database/sql (withTx), and so do the writes of a store with an effect,
// whose transaction the effect shares as a *sql.Tx.
func (s *Store) withWriteTx(ctx context.Context, fn func(writeTx) error) error {
	if s.ro != nil {
		return ErrReadOnly
	}
	if s.effect != nil {
		return fullError(s.path, withTx(ctx, s.db, s.writer, nil, func(tx *sql.Tx) error {
			return fn(&sqlTx{tx: tx})
		}))
	}
	if err := s.writer.Lock(ctx); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer s.writer.Unlock()
	return fullError(s.path, s.w.Tx(ctx, func(tx *drivertx.Tx) error { return fn(driverTx{tx: tx}) }))
}
