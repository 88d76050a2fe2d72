package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DSN returns the data source name every fairrelay store uses for the file at
// path: WAL, synchronous=FULL, a 10-second busy timeout, foreign keys on and
// write transactions started IMMEDIATE. The ceiling and goqite are measured on
// exactly these pragmas.
func DSN(path string) string { return dsn(path, 10000) }

func dsn(path string, busyMs int) string {
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"+
		"&_pragma=foreign_keys(ON)&_txlock=immediate", path, busyMs)
}

// OpenDB opens the SQLite file at path with [DSN] and checks that the pragmas
// took effect.
func OpenDB(path string) (*sql.DB, error) { return openDB(path, 10000) }

// OpenDBNoWait is [OpenDB] with busy_timeout 0: a BEGIN IMMEDIATE that finds
// another writer fails at once with SQLITE_BUSY.
func OpenDBNoWait(path string) (*sql.DB, error) { return openDB(path, 0) }

func openDB(path string, busyMs int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path, busyMs))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: journal_mode: %w", path, err)
	}
	var sync int
	if err := db.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: synchronous: %w", path, err)
	}
	if mode != "wal" || sync != 2 {
		db.Close()
		return nil, fmt.Errorf("open %s: journal_mode=%s synchronous=%d, want wal and 2 (FULL)", path, mode, sync)
	}
	return db, nil
}

// IsBusy reports whether err is, or wraps, an SQLITE_BUSY error (any extended
// code of it).
func IsBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_BUSY
	}
	return false
}

// SQLiteVersion returns the version of the SQLite library linked in.
func SQLiteVersion(ctx context.Context, db *sql.DB) (string, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v); err != nil {
		return "", fmt.Errorf("sqlite_version: %w", err)
	}
	return v, nil
}
