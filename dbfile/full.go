package dbfile

import (
	"errors"
	"os"
	"syscall"

	"modernc.org/sqlite"
)

// SQLite's result codes that IsFull looks at.
const (
	sqliteIOErr         = 10   // SQLITE_IOERR: its extended codes say which call failed
	sqliteCorrupt       = 11   // SQLITE_CORRUPT
	sqliteFull          = 13   // SQLITE_FULL
	sqliteNotADB        = 26   // SQLITE_NOTADB
	sqliteIOErrWrite    = 778  // SQLITE_IOERR_WRITE
	sqliteIOErrTruncate = 1546 // SQLITE_IOERR_TRUNCATE
	sqliteIOErrShmSize  = 4874 // SQLITE_IOERR_SHMSIZE
)

// maxFrame is the most one SQLite write adds to a file: a WAL frame of the
// largest page size (65536 bytes and a 24-byte frame header).
const maxFrame = 65536 + 24

// IsFull reports whether err, from a write to the database at path, failed
// for want of space: SQLite's SQLITE_FULL (the file system said ENOSPC), or
// ENOSPC or EFBIG from the operating system, or a write that stopped at the
// process's file-size limit.
//
// That last one needs a look at the files: SQLite turns a write(2) that
// failed with EFBIG (RLIMIT_FSIZE) into SQLITE_IOERR_WRITE and keeps the
// errno to itself. So for an I/O error of a write, a truncate or a growing
// shared-memory file, IsFull reports true only when the process has a
// file-size limit and the database, its -wal or its -shm file has come
// within one write of it. Any other I/O error is not "full": it is a real
// read or write failure, and IsFull reports false.
func IsFull(err error, path string) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG) {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch code := se.Code(); {
	case code&0xff == sqliteFull:
		return true
	case code == sqliteIOErrWrite || code == sqliteIOErrTruncate || code == sqliteIOErrShmSize:
		return atSizeLimit(path)
	}
	return false
}

// atSizeLimit reports whether the process has a file-size limit and one of
// the database's files is within one write of it.
func atSizeLimit(path string) bool {
	limit, ok := fileSizeLimit()
	if !ok {
		return false
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(name); err == nil && fi.Size()+maxFrame > limit {
			return true
		}
	}
	return false
}

// IsDamaged reports whether err is SQLite's SQLITE_CORRUPT or SQLITE_NOTADB:
// the file is damaged inside, or is not a database after all.
func IsDamaged(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqliteCorrupt, sqliteNotADB:
		return true
	}
	return false
}
