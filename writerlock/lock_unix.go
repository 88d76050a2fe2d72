//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package writerlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// Lock makes the write transactions of every process that opens the same
// file take turns.
//
// Why: SQLite never queues writers. A BEGIN IMMEDIATE that finds the write
// lock taken polls: its busy handler sleeps 1, 2, 5, … then 100 ms between
// tries, while the writer that just committed starts its next transaction
// within microseconds and nearly always wins. With 8 claimant processes one
// took most turns, others waited seconds, and a wait past busy_timeout came
// back as SQLITE_BUSY. See docs/performance.md, "Fair writers".
//
// How: two sidecar files, path+"-writer" (the turn) and path+"-writer-gate".
// A writer takes flock(2) LOCK_EX on the gate, then on the turn, lets go of
// the gate, runs BEGIN IMMEDIATE … COMMIT, and lets go of the turn. A waiter
// sleeps in the kernel and is woken as soon as the lock it waits for is let
// go, instead of polling. The gate stops barging: the writer that just let go
// of the turn queues at the gate behind the others, while the one holding
// the gate takes the turn next. A process keeps the turn for a short run of
// consecutive writes (see [Keep]) before it hands it over, because every
// hand-over costs the next process a cold page cache and a slower first
// commit. Within the process a one-slot semaphore takes
// turns first (a flock belongs to the open file, which the store's
// connections share). The wait is bounded by the context and by the
// timeout given to Open, then ErrTimeout. SQLite's own locking is unchanged:
// a program that writes the file without these locks is still safe, only not
// fair. The kernel drops a flock when its process exits, so a crashed writer
// blocks nobody. A Lock is safe for concurrent use.
type Lock struct {
	timeout    time.Duration // longest wait for a turn
	keep       Keep
	sem        chan struct{} // one writer at a time in this process
	files      [2]*os.File
	created    [2]bool // this Open created the file (Remove deletes it)
	turn, gate int     // their descriptors
	closeOnce  sync.Once

	mu        sync.Mutex  // guards the fields below
	kept      bool        // the turn is held between two writes
	closed    bool        // Close has been called
	abandoned int         // given-up waits still blocked in the kernel
	run       int         // writes in the current run of turns
	runFrom   time.Time   // when the run's first write took the turn
	linger    *time.Timer // lets go of a kept turn; nil until first kept
}

// Open opens (creating them if needed) the two lock files of the database at
// path: path+"-writer" and path+"-writer-gate". timeout bounds every wait for
// a turn; it must be positive.
//
// When the database file exists, the lock files get its permission bits
// (without execute) and its group, where this process owns them and the
// system allows it (the process's user is in the group, or is root), so
// that a service user and an operator who share the database's group share
// its lock files too; a lock file of another owner is used as it is. A new
// database's lock files are made 0644 less the umask, as SQLite makes the
// database itself.
func Open(path string, timeout time.Duration) (*Lock, error) {
	return OpenKeep(path, timeout, DefaultKeep)
}

// OpenKeep is [Open] with the given [Keep] instead of [DefaultKeep]; the
// zero Keep hands the turn over after every write.
func OpenKeep(path string, timeout time.Duration, keep Keep) (*Lock, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("writerlock: timeout %v is not positive", timeout)
	}
	if err := keep.check(); err != nil {
		return nil, err
	}
	l := &Lock{timeout: timeout, keep: keep, sem: make(chan struct{}, 1)}
	db, dbErr := os.Stat(path)
	for i, name := range []string{path + "-writer", path + "-writer-gate"} {
		f, created, err := openFile(name)
		if err != nil {
			l.Remove()
			return nil, fmt.Errorf("writerlock: %w", err)
		}
		l.files[i] = f
		l.created[i] = created
		if dbErr == nil {
			share(f, db)
		}
	}
	l.turn, l.gate = int(l.files[0].Fd()), int(l.files[1].Fd())
	return l, nil
}

// Lock waits for this process's turn, then the file's, in arrival order.
// When nobody waits it takes the turn without a timer or a goroutine. It
// returns ctx's error when ctx ends first, [ErrTimeout] when the Lock's
// timeout runs out and [ErrClosed] after Close; each way the caller holds
// nothing and must not call Unlock. A wait given up on is handed back as
// soon as the kernel grants it.
func (l *Lock) Lock(ctx context.Context) error {
	var t *time.Timer
	select {
	case l.sem <- struct{}{}:
	default:
		t = time.NewTimer(l.timeout)
		defer t.Stop()
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return ErrTimeout
		}
	}
	if l.isClosed() {
		// Its descriptors are closed, and their numbers may be another
		// file's now: never flock them.
		<-l.sem
		return ErrClosed
	}
	if l.takeKept() {
		return nil
	}
	got, gateHeld, err := l.try()
	if err != nil {
		<-l.sem
		return fmt.Errorf("writerlock: %w", err)
	}
	if got {
		l.startRun()
		return nil
	}
	if t == nil {
		t = time.NewTimer(l.timeout)
		defer t.Stop()
	}
	done := make(chan error, 1)
	go func() { done <- l.acquire(gateHeld) }()
	select {
	case err = <-done:
		if err != nil {
			<-l.sem
			return fmt.Errorf("writerlock: %w", err)
		}
		l.startRun()
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = ErrTimeout
	}
	l.mu.Lock()
	l.abandoned++
	l.mu.Unlock()
	go func() { // nobody waits any more: hand the turn back once granted
		if <-done == nil {
			flock(l.turn, syscall.LOCK_UN)
		}
		<-l.sem
		l.mu.Lock()
		defer l.mu.Unlock()
		l.abandoned--
		if l.closed && l.abandoned == 0 {
			l.closeFiles() // Close left them open for this wait
		}
	}()
	return err
}

// try takes the turn without blocking if nobody queues for it. gateHeld
// reports that it got the gate but not the turn: this writer is next.
func (l *Lock) try() (got, gateHeld bool, err error) {
	if err := syscall.Flock(l.gate, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, false, nil
		}
		return false, false, err
	}
	switch err := syscall.Flock(l.turn, syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		if err := flock(l.gate, syscall.LOCK_UN); err != nil {
			flock(l.turn, syscall.LOCK_UN)
			return false, false, err
		}
		return true, false, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, true, nil
	default:
		flock(l.gate, syscall.LOCK_UN)
		return false, false, err
	}
}

// acquire queues at the gate (unless gateHeld), takes the turn, and opens
// the gate for the next writer.
func (l *Lock) acquire(gateHeld bool) error {
	if !gateHeld {
		if err := flock(l.gate, syscall.LOCK_EX); err != nil {
			return err
		}
	}
	err := flock(l.turn, syscall.LOCK_EX)
	if uerr := flock(l.gate, syscall.LOCK_UN); err == nil && uerr != nil {
		flock(l.turn, syscall.LOCK_UN)
		return uerr
	}
	return err
}

// takeKept takes the turn this process kept after its last write, if it
// still holds it. The caller holds the process's semaphore.
func (l *Lock) takeKept() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.kept {
		return false
	}
	l.kept = false
	l.run++
	return true
}

// startRun records a turn taken from the kernel: the first of a run.
func (l *Lock) startRun() {
	l.mu.Lock()
	l.run, l.runFrom = 1, time.Now()
	l.mu.Unlock()
}

// Unlock ends the write. Call it once after each successful Lock. Within
// the Lock's [Keep] the process keeps the file's turn for its next write,
// and lets go of it once Keep.Linger passes without one; otherwise the turn
// goes to the next writer at once.
func (l *Lock) Unlock() {
	l.mu.Lock()
	if !l.closed && l.keep.keeps(l.run, time.Since(l.runFrom)) {
		l.kept = true
		if l.linger == nil {
			l.linger = time.AfterFunc(l.keep.Linger, l.letGo)
		} else {
			l.linger.Reset(l.keep.Linger)
		}
	} else {
		l.run = 0
		if !l.closed || l.abandoned > 0 {
			// Once Close closed the files the turn went with them, and the
			// descriptor's number may be another file's now.
			flock(l.turn, syscall.LOCK_UN) // fails only on a bad descriptor
		}
	}
	l.mu.Unlock()
	<-l.sem
}

// isClosed reports whether Close has been called.
func (l *Lock) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// letGo hands a kept turn over when no write came within Keep.Linger. A
// late call (the timer fired as a write took the kept turn) finds kept
// false, or ends a later linger early: a kept turn has no write running, so
// letting go of it is always safe.
func (l *Lock) letGo() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kept && !l.closed {
		l.kept = false
		l.run = 0
		flock(l.turn, syscall.LOCK_UN)
	}
}

// Close hands over a kept turn and closes the lock files. It does not wait
// for another process: a wait given up on that the kernel has not granted
// yet keeps the files open until it is granted and handed back, then closes
// them. Later calls return nil, as sql.DB.Close does.
func (l *Lock) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.linger != nil {
			l.linger.Stop()
		}
		if l.kept {
			l.kept = false
			flock(l.turn, syscall.LOCK_UN)
		}
		l.closed = true
		if l.abandoned == 0 {
			err = l.closeFiles()
		}
		// else the last given-up wait closes them once the kernel grants
		// it: Close does not wait for another process to let go.
	})
	return err
}

// Remove closes the Lock and deletes the lock files that its Open created
// (not those that existed already). It is for a store whose Open fails
// after the Lock is opened, for instance on a file that is not a database,
// so that a refused open leaves nothing behind. Call it only where no other
// process can be using the same lock files yet: one that had opened a lock
// file before Remove deletes it would take turns on a file nobody else sees.
func (l *Lock) Remove() error {
	err := l.Close()
	for i, f := range l.files {
		if f != nil && l.created[i] {
			if rerr := os.Remove(f.Name()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
	}
	return err
}

// closeFiles closes the lock files. The caller holds l.mu.
func (l *Lock) closeFiles() error {
	var errs []error
	for _, f := range l.files {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

func flock(fd, how int) error {
	for {
		if err := syscall.Flock(fd, how); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// openFile opens the lock file name for reading and writing, creating it if
// needed, and reports whether it did.
func openFile(name string) (*os.File, bool, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return nil, false, err
	}
	f, err = os.OpenFile(name, os.O_RDWR, 0)
	return f, false, err
}

// share gives the lock file f the database's permission bits (execute bits
// dropped) and group, when this process owns f or is root. Best effort: a
// refusal leaves the file as it is.
func share(f *os.File, db os.FileInfo) {
	dst, ok := db.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	fi, err := f.Stat()
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	if uid := os.Geteuid(); uid != 0 && int(st.Uid) != uid {
		return
	}
	if perm := db.Mode().Perm() &^ 0o111; fi.Mode().Perm() != perm {
		_ = f.Chmod(perm)
	}
	if st.Gid != dst.Gid {
		_ = f.Chown(-1, int(dst.Gid))
	}
}
