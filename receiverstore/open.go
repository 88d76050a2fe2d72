package receiverstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/dbfile"
	"github.com/fairrelay/fairrelay/writerlock"
)

// Errors of opening a file and of writing to it. Each comes wrapped with
// the path and the cause; errors.Is also matches the cause (fs.ErrNotExist,
// fs.ErrPermission, syscall.EISDIR, and the dbfile module's sentinels).
var (
	// ErrNotReceiver reports a file that is not a receiver database: not an
	// SQLite file, a truncated or damaged one, an empty file opened
	// read-only, or an SQLite database of something else (a queue, another
	// program's). Open refuses it before writing anything and leaves no lock
	// file behind.
	ErrNotReceiver = errors.New("receiverstore: not a receiver database")
	// ErrOpen reports a path that cannot be opened as asked: a directory, a
	// missing folder, a file or folder without the permission needed, or
	// (read-only) a file that does not exist. Nothing is created.
	ErrOpen = errors.New("receiverstore: cannot open the database file")
	// ErrDiskFull reports a write that failed for want of space: the file
	// system is full or the process's file-size limit is reached. The
	// transaction is rolled back; what was committed before stays, and
	// writes succeed again once there is space.
	ErrDiskFull = errors.New("receiverstore: no space left to write the database")
	// ErrReadOnly reports a write asked of a store opened [WithReadOnly].
	// Nothing changes.
	ErrReadOnly = errors.New("receiverstore: the store is open read-only")
)

// WithReadOnly opens an existing receiver database for reading only:
// Total, NextExpected, Flows, Conflicts and Snapshot work, Receive and
// ReceiveBatch return [ErrReadOnly]. It creates no file at all (no lock
// file, no -wal or -shm), so an operator can look at a service's database
// in a folder the operator cannot write, and leaves nothing behind that the
// service could not open. The file must exist and carry this package's
// schema version (an older file needs a read-write Open first:
// [ErrSchemaVersion]). The dbfile module's OpenReadOnly says how, and its
// limit: keep a read-only store open for a short inspection.
func WithReadOnly() Option {
	return func(o *options) { o.readOnly = true }
}

// openReadOnly is Open for WithReadOnly.
func openReadOnly(path string, o options) (*Store, error) {
	ro, err := dbfile.OpenReadOnly(path, "_pragma=busy_timeout(10000)&_pragma=foreign_keys(ON)")
	if err != nil {
		return nil, openError(path, err)
	}
	db, err := sql.Open("sqlite", ro.URI)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", path, err), ro.Close())
	}
	err = withTx(context.Background(), db, nil, &sql.TxOptions{ReadOnly: true}, func(tx *sql.Tx) error {
		v, err := inspect(context.Background(), tx)
		switch {
		case err != nil:
		case v == 0:
			err = fmt.Errorf("%w: the file is an empty database (user_version 0), nothing to read", ErrNotReceiver)
		case v < SchemaVersion:
			err = fmt.Errorf("%w: the file has version %d; a read-write Open brings it to %d first", ErrSchemaVersion, v, SchemaVersion)
		}
		return err
	})
	if err != nil {
		return nil, errors.Join(migrateError(path, err), db.Close(), ro.Close())
	}
	return &Store{db: db, ro: ro, maxDelta: int64(o.maxDelta), hook: o.hook, path: path}, nil
}

// probe looks into an existing file read-only, creating nothing, before a
// read-write Open writes anything: the connection's journal_mode=WAL alone
// would rewrite the header of another program's database. A file whose WAL
// needs recovery (dbfile.ErrNeedsWriter) is left to the read-write open.
func probe(path string, info dbfile.Info) error {
	if info.Size == 0 {
		return nil // a new database
	}
	ro, err := dbfile.OpenReadOnly(path, "_pragma=busy_timeout(10000)")
	switch {
	case errors.Is(err, dbfile.ErrNeedsWriter):
		return nil
	case err != nil:
		return openError(path, err)
	}
	db, err := sql.Open("sqlite", ro.URI)
	if err != nil {
		return errors.Join(fmt.Errorf("open %s: %w", path, err), ro.Close())
	}
	err = withTx(context.Background(), db, nil, &sql.TxOptions{ReadOnly: true}, func(tx *sql.Tx) error {
		_, err := inspect(context.Background(), tx)
		return err
	})
	if err != nil {
		err = migrateError(path, err)
	}
	return errors.Join(err, db.Close(), ro.Close())
}

// inspect reads the file's schema version and refuses a file that is not a
// receiver database: a version of 1 or more without the receiver's tables
// (those of version 1, which every later version keeps),
// version 0 with anything in its schema ([ErrNotReceiver]), a newer version
// ([ErrSchemaVersion]). v is 0 for an empty database, to be created.
func inspect(ctx context.Context, tx *sql.Tx) (v int, err error) {
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read user_version: %w", err)
	}
	switch {
	case v > SchemaVersion:
		// A queue's file carries a version too: say what the file is
		// before saying its version is too new.
		if err := checkTables(ctx, tx); err != nil {
			return v, err
		}
		return v, fmt.Errorf("%w: file has version %d, this package knows up to %d", ErrSchemaVersion, v, SchemaVersion)
	case v >= 1:
		// This version or an older one, which migrate brings up to date.
		return v, checkTables(ctx, tx)
	case v < 0:
		return v, fmt.Errorf("%w: user_version %d", ErrNotReceiver, v)
	}
	return v, checkEmpty(ctx, tx)
}

// receiverTables are the tables of the receiver's schema.
var receiverTables = []string{"flows", "receipts", "conflicts"}

// checkTables refuses a file whose user_version says receiver but which
// lacks a receiver table (a queue database carries user_version 1 too).
func checkTables(ctx context.Context, tx *sql.Tx) error {
	for _, name := range receiverTables {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, name).Scan(&n); err != nil {
			return fmt.Errorf("read the schema: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: it has no %s table (is it another program's database, or a queue?)", ErrNotReceiver, name)
		}
	}
	return nil
}

// checkEmpty refuses to apply the schema to a version-0 file that already
// has tables: it belongs to another program, and Open must not write into it.
func checkEmpty(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		return fmt.Errorf("read the schema: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("%w: it is an SQLite database with %d schema objects of another program (user_version 0)", ErrNotReceiver, n)
	}
	return nil
}

// openError wraps an error from checking or opening path: the dbfile
// module's and writerlock's errors get this package's sentinel.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, dbfile.ErrNotDatabase), errors.Is(err, dbfile.ErrTruncated):
		return fmt.Errorf("open %s: %w: %w", path, ErrNotReceiver, err)
	case errors.Is(err, dbfile.ErrPath), errors.Is(err, dbfile.ErrNeedsWriter):
		return fmt.Errorf("open %s: %w: %w", path, ErrOpen, err)
	}
	return fmt.Errorf("open %s: %w: %w", path, ErrOpen, err) // writerlock's lock files
}

// migrateError wraps an error of the first transaction on path: damage that
// SQLite finds is ErrNotReceiver, a full disk ErrDiskFull.
func migrateError(path string, err error) error {
	switch {
	case dbfile.IsDamaged(err):
		return fmt.Errorf("open %s: %w: %w", path, ErrNotReceiver, err)
	case dbfile.IsFull(err, path):
		return fmt.Errorf("open %s: %w: %w", path, ErrDiskFull, err)
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// closeOrRemove closes the lock of an Open that failed, and deletes the
// lock files it created when the file was refused as not a receiver (no
// process can be using them for this file).
func closeOrRemove(wl *writerlock.Lock, err error) error {
	if errors.Is(err, ErrNotReceiver) || errors.Is(err, ErrSchemaVersion) {
		return wl.Remove()
	}
	return wl.Close()
}

// fullError marks a write that failed for want of space with ErrDiskFull.
func fullError(path string, err error) error {
	if err != nil && !errors.Is(err, ErrDiskFull) && dbfile.IsFull(err, path) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}
