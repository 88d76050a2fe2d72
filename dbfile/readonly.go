package dbfile

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// ReadOnly is a read-only way into a database file that creates no file:
// no -wal, no -shm, no lock file. Give URI to sql.Open("sqlite", …); close
// the sql.DB first, then the ReadOnly.
type ReadOnly struct {
	// URI is the SQLite URI to open.
	URI string
	// Immutable reports that the file had no write-ahead log, so the URI
	// reads the file alone, without SQLite's locks (immutable=1).
	Immutable bool
	// Info is what Check read from the file.
	Info  Info
	guard guard
}

// guardWait bounds the wait for a writer that is closing the database (it
// holds SQLite's exclusive lock for a moment while it checkpoints).
const guardWait = 10 * time.Second

// OpenReadOnly prepares a read-only open of the database at path. params is
// added to the URI's query (e.g. "_pragma=busy_timeout(10000)"); it must not
// ask for a write (journal_mode, _txlock=immediate).
//
// Why this is needed: SQLite's own read-only open (mode=ro) of a WAL
// database still creates the -wal and -shm files when they are missing, and
// leaves them behind owned by whoever ran it; in a folder it cannot write it
// fails with SQLITE_READONLY_DIRECTORY. A program run by an operator to look
// at a service's database must do neither.
//
// How: when the -wal file exists, a writer has the database open (or
// crashed): the -shm file exists too, and the URI is mode=ro, so SQLite
// reads through its usual locks and sees every commit; a -wal without a -shm
// is [ErrNeedsWriter]. When there is no -wal, every committed page is in the
// file itself: the URI is mode=ro&immutable=1, which reads the file and
// nothing else. Either way, while the ReadOnly is open it holds a shared
// lock on the database file as an SQLite reader does (an open-file-description
// lock, Linux only), so that a writer that opens and closes the database
// meanwhile cannot checkpoint into the file (its close needs an exclusive
// lock) nor delete the -wal under a reader.
//
// The limit, plainly: a writer that starts after OpenReadOnly and writes
// more than SQLite's auto-checkpoint threshold (1000 pages) while the
// ReadOnly is open does checkpoint into the file, which an immutable reader
// does not expect; its queries may then fail with a "malformed" error or
// mix old and new pages. Keep a ReadOnly open for a short inspection, and
// run it again if it fails. Where open-file-description locks do not exist
// (not Linux), the guard is missing and a writer's close can do the same.
//
// Errors: what [Check] returns (the file must exist and be readable, an
// empty file is [ErrNotDatabase]), [ErrNeedsWriter], and [ErrPath] when the
// -wal or -shm file cannot be read.
func OpenReadOnly(path, params string) (*ReadOnly, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{ErrPath, "cannot make the path absolute", err}
	}
	info, err := Check(abs, false)
	if err != nil {
		return nil, err
	}
	if info.Size == 0 {
		return nil, &Error{ErrNotDatabase, "the file is empty", nil}
	}
	g, err := takeGuard(abs, guardWait)
	if err != nil {
		return nil, err
	}
	r := &ReadOnly{Info: info, guard: g}
	walExists, err := readable(abs + "-wal")
	if err == nil && walExists {
		var shmExists bool
		shmExists, err = readable(abs + "-shm")
		if err == nil && !shmExists {
			err = &Error{ErrNeedsWriter, "it has a write-ahead log (-wal) but no -shm file", nil}
		}
	}
	if err != nil {
		g.release()
		return nil, err
	}
	q := "mode=ro"
	if !walExists {
		q += "&immutable=1"
		r.Immutable = true
	}
	if params != "" {
		q += "&" + params
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q}
	r.URI = u.String()
	return r, nil
}

// Close lets go of the shared lock. Close the sql.DB opened on URI first.
func (r *ReadOnly) Close() error {
	return r.guard.release()
}

// readable reports whether name exists, and refuses one that exists but
// cannot be read.
func readable(name string) (bool, error) {
	f, err := os.Open(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return true, &Error{ErrPath, fmt.Sprintf("cannot read %s", filepath.Base(name)), cause(err)}
	}
	return true, f.Close()
}
