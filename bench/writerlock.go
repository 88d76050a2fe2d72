//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// ErrWriterWait reports that a write waited longer than the writer lock's
// bound for its turn.
var ErrWriterWait = errors.New("bench: waited too long for the writer lock")

// WriterLock is the first prototype of the writers' turn, kept as a control
// for the writerlock module: one flock file and no gate, so the writer that
// lets go can barge back in before the woken waiter has run. The module adds
// the gate (no barging) and kept runs of turns; see docs/performance.md.
//
// WriterLock makes the write transactions of every process that opens the same
// database take turns: within a process through a one-slot semaphore, across
// processes through flock(2) LOCK_EX on a sidecar file next to the database.
// A waiter blocks in the kernel and is woken the moment the holder lets go, so
// a write waits for the transactions ahead of it, not for a sleep to end as
// SQLite's busy handler does. The wait is bounded by max and by ctx.
//
// The kernel drops a flock when the process that holds it exits, so a crashed
// writer never blocks the others.
type WriterLock struct {
	sem chan struct{}
	f   *os.File
	fd  int
	max time.Duration
	bg  sync.WaitGroup // abandoned turns still waiting for the kernel
}

// OpenWriterLock opens (creating it if needed) the sidecar lock file path.
func OpenWriterLock(path string, max time.Duration) (*WriterLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("writer lock: %w", err)
	}
	return &WriterLock{sem: make(chan struct{}, 1), f: f, fd: int(f.Fd()), max: max}, nil
}

// Close closes the sidecar file, after any abandoned wait has been granted
// and handed back.
func (l *WriterLock) Close() error {
	l.bg.Wait()
	return l.f.Close()
}

// Lock waits for this process's and then this file's writer turn. When
// nobody waits, it takes the turn without a timer or a goroutine.
func (l *WriterLock) Lock(ctx context.Context) error {
	var t *time.Timer
	select {
	case l.sem <- struct{}{}:
	default:
		t = time.NewTimer(l.max)
		defer t.Stop()
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("%w (%s, in this process)", ErrWriterWait, l.max)
		}
	}
	switch err := syscall.Flock(l.fd, syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		return nil
	case !errors.Is(err, syscall.EWOULDBLOCK):
		<-l.sem
		return fmt.Errorf("writer lock: %w", err)
	}
	if t == nil {
		t = time.NewTimer(l.max)
		defer t.Stop()
	}
	done := make(chan error, 1)
	go func() { done <- flock(l.fd, syscall.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			<-l.sem
			return fmt.Errorf("writer lock: %w", err)
		}
		return nil
	case <-ctx.Done():
		l.bg.Add(1)
		go l.abandon(done)
		return ctx.Err()
	case <-t.C:
		l.bg.Add(1)
		go l.abandon(done)
		return fmt.Errorf("%w (%s)", ErrWriterWait, l.max)
	}
}

// abandon lets go of a turn nobody waits for any more, once the kernel grants it.
func (l *WriterLock) abandon(done <-chan error) {
	defer l.bg.Done()
	if err := <-done; err == nil {
		flock(l.fd, syscall.LOCK_UN)
	}
	<-l.sem
}

// Unlock ends the turn.
func (l *WriterLock) Unlock() {
	flock(l.fd, syscall.LOCK_UN) // fails only on a bad descriptor
	<-l.sem
}

func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
