package queuestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/dbfile"
)

// Errors of opening a file and of writing to it. Each comes wrapped with
// the path and the cause; errors.Is also matches the cause (fs.ErrNotExist,
// fs.ErrPermission, syscall.EISDIR, and the dbfile module's sentinels).
var (
	// ErrNotQueue reports a file that is not a queue store: not an SQLite
	// file, a truncated or damaged one, an empty file opened read-only, or
	// an SQLite database of something else (a receiver, another program's;
	// those also match ErrSchemaVersion). Open refuses it before writing
	// anything and leaves no lock file behind.
	ErrNotQueue = errors.New("queuestore: not a queue database")
	// ErrOpen reports a path that cannot be opened as asked: a directory, a
	// missing folder, a file or folder without the permission needed, or
	// (read-only) a file that does not exist. Nothing is created.
	ErrOpen = errors.New("queuestore: cannot open the database file")
	// ErrDiskFull reports a write that failed for want of space: the file
	// system is full or the process's file-size limit is reached. The
	// transaction is rolled back; what was committed before stays, and
	// writes succeed again once there is space.
	ErrDiskFull = errors.New("queuestore: no space left to write the database")
	// ErrReadOnly reports a write asked of a store opened [WithReadOnly].
	// Nothing changes.
	ErrReadOnly = errors.New("queuestore: the store is open read-only")
)

// WithReadOnly opens an existing queue for reading only: every read
// (Stats, Flows, Event, FlowEvents, Quarantined, Audit, Snapshot, Policy,
// NextDue, QuarantinedMatching) works, every write returns [ErrReadOnly].
// It creates no file at all (no lock file, no -wal or -shm), so an operator
// can look at a service's queue in a folder the operator cannot write, and
// leaves nothing behind that the service could not open. The file must
// exist and carry this package's schema version (a version-1 file needs a
// read-write Open first, which migrates it: [ErrSchemaVersion]). The dbfile
// module's OpenReadOnly says how, and its limit: keep a read-only store
// open for a short inspection.
func WithReadOnly() Option {
	return func(o *options) { o.readOnly = true }
}

// queueTables are the tables of every schema version.
var queueTables = []string{"meta", "flows", "events", "audit"}

// openReadOnly is Open for WithReadOnly.
func openReadOnly(path string, o options) (*Store, error) {
	ro, err := dbfile.OpenReadOnly(path, fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(ON)", BusyTimeoutMillis))
	if err != nil {
		return nil, openError(path, err)
	}
	db, err := sql.Open("sqlite", ro.URI)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open %q: %w", path, err), ro.Close())
	}
	s := &Store{db: db, ro: ro, hook: o.hook, rt: o.realTime, path: path}
	v, err := inspect(db)
	if err == nil && v != SchemaVersion {
		if v == 0 {
			err = fmt.Errorf("%w: the file is an empty database, nothing to read", ErrNotQueue)
		} else {
			err = fmt.Errorf("%w: file has version %d, a read-only open needs %d (open it read-write once to migrate it)", ErrSchemaVersion, v, SchemaVersion)
		}
	}
	if err != nil {
		return nil, errors.Join(migrateError(path, err), s.Close())
	}
	s.stmts = make(map[string]*sql.Stmt, len(readQueries))
	for _, q := range readQueries {
		st, err := db.Prepare(q)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("open %q: prepare %q: %w", path, q, err), s.Close())
		}
		s.stmts[q] = st
	}
	return s, nil
}

// probe looks into an existing file read-only, creating nothing, before a
// read-write Open writes anything: the connection's journal_mode=WAL alone
// would rewrite the header of another program's database, and a receiver's
// file (user_version 1 too) must not be taken for a version-1 queue. A file
// whose WAL needs recovery (dbfile.ErrNeedsWriter) is left to the
// read-write open.
func probe(path string, info dbfile.Info) error {
	if info.UserVersion > SchemaVersion {
		return fmt.Errorf("open %q: %w: file has version %d, this build knows %d", path, ErrSchemaVersion, info.UserVersion, SchemaVersion)
	}
	if info.Size == 0 {
		return nil // a new database
	}
	ro, err := dbfile.OpenReadOnly(path, fmt.Sprintf("_pragma=busy_timeout(%d)", BusyTimeoutMillis))
	switch {
	case errors.Is(err, dbfile.ErrNeedsWriter):
		return nil
	case err != nil:
		return openError(path, err)
	}
	db, err := sql.Open("sqlite", ro.URI)
	if err != nil {
		return errors.Join(fmt.Errorf("open %q: %w", path, err), ro.Close())
	}
	if _, err = inspect(db); err != nil {
		err = migrateError(path, err)
	}
	return errors.Join(err, db.Close(), ro.Close())
}

// inspect reads the file's schema version in one read transaction and
// refuses a file that is not a queue store: a newer version
// ([ErrSchemaVersion]), an older version without the queue's tables, version 0
// with anything in its schema ([ErrNotQueue] and [ErrSchemaVersion]). v is 0
// for an empty database, to be created.
func inspect(db *sql.DB) (v int, err error) {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case v > SchemaVersion:
		return v, fmt.Errorf("%w: file has version %d, this build knows %d", ErrSchemaVersion, v, SchemaVersion)
	case v < 0:
		return v, fmt.Errorf("%w: %w: user_version %d", ErrNotQueue, ErrSchemaVersion, v)
	case v == 0:
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
			return v, fmt.Errorf("read schema: %w", err)
		}
		if n > 0 {
			return v, fmt.Errorf("%w: %w: an SQLite database with %d schema objects of another program (user_version 0)", ErrNotQueue, ErrSchemaVersion, n)
		}
		return v, nil
	}
	for _, name := range queueTables {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, name).Scan(&n); err != nil {
			return v, fmt.Errorf("read schema: %w", err)
		}
		if n == 0 {
			return v, fmt.Errorf("%w: %w: version %d but no %s table (is it a receiver's or another program's database?)", ErrNotQueue, ErrSchemaVersion, v, name)
		}
	}
	return v, nil
}

// openError wraps an error from checking or opening path: the dbfile
// module's and writerlock's errors get this package's sentinel.
func openError(path string, err error) error {
	if errors.Is(err, dbfile.ErrNotDatabase) || errors.Is(err, dbfile.ErrTruncated) {
		return fmt.Errorf("open %q: %w: %w", path, ErrNotQueue, err)
	}
	return fmt.Errorf("open %q: %w: %w", path, ErrOpen, err) // dbfile.ErrPath, ErrNeedsWriter, the lock files
}

// migrateError wraps an error of the first transactions on path: damage that
// SQLite finds is ErrNotQueue, a full disk ErrDiskFull.
func migrateError(path string, err error) error {
	switch {
	case dbfile.IsDamaged(err):
		return fmt.Errorf("open %q: %w: %w", path, ErrNotQueue, err)
	case dbfile.IsFull(err, path):
		return fmt.Errorf("open %q: %w: %w", path, ErrDiskFull, err)
	}
	return fmt.Errorf("open %q: %w", path, err)
}

// closeRefused closes a store whose Open failed, and deletes the lock files
// that Open created when the file was refused as not a queue, or as a newer
// version (no process of this build can be using them for this file).
func (s *Store) closeRefused(err error) {
	wl := s.writer
	s.Close()
	if errors.Is(err, ErrNotQueue) || errors.Is(err, ErrSchemaVersion) {
		wl.Remove()
	}
}

// fullError marks a write that failed for want of space with ErrDiskFull.
func fullError(path string, err error) error {
	if err != nil && !errors.Is(err, ErrDiskFull) && dbfile.IsFull(err, path) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}
