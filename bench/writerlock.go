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
	// gate, when set, is a second lock file taken around the wait for f:
	// whoever holds the gate is the next writer, and a writer that just let
	// go of f queues for the gate behind the others instead of barging back
	// into f before the woken waiter has run.
	gate   *os.File
	gateFd int
	bg     sync.WaitGroup // abandoned turns still waiting for the kernel
}

// OpenWriterLock opens (creating it if needed) the sidecar lock file path.
func OpenWriterLock(path string, max time.Duration) (*WriterLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("writer lock: %w", err)
	}
	return &WriterLock{sem: make(chan struct{}, 1), f: f, fd: int(f.Fd()), max: max}, nil
}

// OpenQueuedWriterLock is [OpenWriterLock] with a gate file, path+"-gate":
// turns are handed over without barging (see WriterLock.gate).
func OpenQueuedWriterLock(path string, max time.Duration) (*WriterLock, error) {
	l, err := OpenWriterLock(path, max)
	if err != nil {
		return nil, err
	}
	g, err := os.OpenFile(path+"-gate", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("writer lock gate: %w", err)
	}
	l.gate, l.gateFd = g, int(g.Fd())
	return l, nil
}

// Close closes the sidecar file, after any abandoned wait has been granted
// and handed back.
func (l *WriterLock) Close() error {
	l.bg.Wait()
	if l.gate != nil {
		l.gate.Close()
	}
	return l.f.Close()
}

// acquire blocks until this open file holds the writer lock: with a gate,
// it queues at the gate (unless gateHeld), takes the turn, and opens the gate.
func (l *WriterLock) acquire(gateHeld bool) error {
	if l.gate == nil {
		return flock(l.fd, syscall.LOCK_EX)
	}
	if !gateHeld {
		if err := flock(l.gateFd, syscall.LOCK_EX); err != nil {
			return err
		}
	}
	err := flock(l.fd, syscall.LOCK_EX)
	if uerr := flock(l.gateFd, syscall.LOCK_UN); err == nil && uerr != nil {
		flock(l.fd, syscall.LOCK_UN)
		return uerr
	}
	return err
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
	got, gateHeld, err := l.try()
	if err != nil {
		<-l.sem
		return fmt.Errorf("writer lock: %w", err)
	}
	if got {
		return nil
	}
	if t == nil {
		t = time.NewTimer(l.max)
		defer t.Stop()
	}
	done := make(chan error, 1)
	go func() { done <- l.acquire(gateHeld) }()
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

// try takes the turn if it is free and nobody queues for it, without
// blocking. gateHeld reports that the gate was taken but the turn was not:
// this writer is next, and acquire must not take the gate again.
func (l *WriterLock) try() (got, gateHeld bool, err error) {
	if l.gate != nil {
		if err := syscall.Flock(l.gateFd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return false, false, nil
			}
			return false, false, err
		}
	}
	err = syscall.Flock(l.fd, syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		if l.gate != nil {
			if err := flock(l.gateFd, syscall.LOCK_UN); err != nil {
				flock(l.fd, syscall.LOCK_UN)
				return false, false, err
			}
		}
		return true, false, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, l.gate != nil, nil
	default:
		if l.gate != nil {
			flock(l.gateFd, syscall.LOCK_UN)
		}
		return false, false, err
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
func (l *WriterLock) Unlock() error {
	err := flock(l.fd, syscall.LOCK_UN)
	<-l.sem
	if err != nil {
		return fmt.Errorf("writer unlock: %w", err)
	}
	return nil
}

func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
