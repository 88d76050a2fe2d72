package dbfile

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// SQLite's lock bytes in a database file (os_unix.c): a reader holds a read
// lock on the shared range; a writer closing the database needs a write
// lock on it to checkpoint and delete the -wal.
const (
	pendingByte = 0x40000000
	sharedFirst = pendingByte + 2
	sharedSize  = 510
	fOFDSetLk   = 37 // F_OFD_SETLK: a lock owned by the open file, not the process
)

// guard is a read lock on SQLite's shared range, held through an open file
// description of its own: closing it drops only this lock, never a lock
// that SQLite holds through another descriptor of the same process.
type guard struct{ f *os.File }

func takeGuard(path string, wait time.Duration) (guard, error) {
	f, err := os.Open(path)
	if err != nil {
		return guard{}, &Error{ErrPath, "cannot open the file", cause(err)}
	}
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0, Start: sharedFirst, Len: sharedSize}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.FcntlFlock(f.Fd(), fOFDSetLk, &lk)
		if err == nil {
			return guard{f}, nil
		}
		if errors.Is(err, syscall.EINVAL) { // a kernel without OFD locks (before 3.15)
			return guard{f}, nil
		}
		if !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EACCES) || time.Now().After(deadline) {
			f.Close()
			return guard{}, &Error{ErrPath, "cannot take a reader's lock on the file (a writer holds it)", err}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (g guard) release() error {
	if g.f == nil {
		return nil
	}
	return g.f.Close()
}
