//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package writerlock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

func openKeep(t *testing.T, path string, keep Keep) *Lock {
	t.Helper()
	l, err := OpenKeep(path, time.Minute, keep)
	if err != nil {
		t.Fatalf("OpenKeep(%q, %+v): %v", path, keep, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func TestOpenKeepRefusesBadKeep(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	for _, k := range []Keep{
		{MaxRun: -1},
		{MaxRun: 4, MaxHold: -time.Second, Linger: time.Millisecond},
		{MaxRun: 4, MaxHold: time.Second, Linger: -time.Millisecond},
		{MaxRun: 4, MaxHold: time.Second},     // no linger
		{MaxRun: 4, Linger: time.Millisecond}, // no hold
	} {
		if l, err := OpenKeep(path, time.Second, k); err == nil {
			l.Close()
			t.Errorf("OpenKeep(%+v) error = nil, want an error", k)
		}
	}
	for _, k := range []Keep{{}, {MaxRun: 1}, DefaultKeep} {
		l, err := OpenKeep(path, time.Second, k)
		if err != nil {
			t.Errorf("OpenKeep(%+v): %v", k, err)
			continue
		}
		l.Close()
	}
}

// waitGateTaken returns once some writer holds the gate of path, that is,
// once a waiter is queued for the turn. It polls a third open file with a
// non-blocking flock; the deadline only guards against a hang.
func waitGateTaken(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path+"-writer-gate", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	t.Fatal("nobody queued at the gate within a minute")
}

// TestRunOfKeptTurns: a process keeps the turn for MaxRun writes while
// another waits, then hands it over, and queues behind the waiter for its
// next write. The order of writes is a a a b a.
func TestRunOfKeptTurns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	a := openKeep(t, path, Keep{MaxRun: 3, MaxHold: time.Hour, Linger: time.Hour})
	b := openKeep(t, path, Keep{}) // hands over after every write
	ctx := context.Background()
	var mu sync.Mutex
	var order []string
	write := func(l *Lock, name string) {
		if err := l.Lock(ctx); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
		l.Unlock()
	}
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan struct{})
	go func() { defer close(bDone); write(b, "b") }()
	waitGateTaken(t, path) // b is queued
	mu.Lock()
	order = append(order, "a")
	mu.Unlock()
	a.Unlock()    // kept: run 1 of 3
	write(a, "a") // kept: run 2 of 3
	write(a, "a") // run 3 of 3: handed over to b
	write(a, "a") // queues behind b
	<-bDone
	if want := []string{"a", "a", "a", "b", "a"}; !slices.Equal(order, want) {
		t.Fatalf("order of writes = %v, want %v", order, want)
	}
}

// TestKeptTurnExcludesOthers: between two writes of a run nobody else
// writes, until Linger passes; then the turn is handed over.
func TestKeptTurnExcludesOthers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	const linger = 3 * time.Second // long against scheduling delays on a loaded machine
	a := openKeep(t, path, Keep{MaxRun: 8, MaxHold: time.Hour, Linger: linger})
	b := openKeep(t, path, Keep{})
	ctx := context.Background()
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	a.Unlock() // kept for linger
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			b.Unlock()
		}
		t.Fatalf("b.Lock() while a keeps its turn: err = %v, want context.DeadlineExceeded", err)
	}
	if err := b.Lock(ctx); err != nil { // once a's linger has passed
		t.Fatalf("b.Lock() after a's linger: %v", err)
	}
	b.Unlock()
}

// TestMaxHoldEndsRun: a run whose writes held the turn for MaxHold ends at
// once, however long the linger.
func TestMaxHoldEndsRun(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	a := openKeep(t, path, Keep{MaxRun: 100, MaxHold: time.Nanosecond, Linger: time.Hour})
	b := openKeep(t, path, Keep{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // past MaxHold, whatever the clock's grain
	a.Unlock()
	if err := b.Lock(ctx); err != nil {
		t.Fatalf("b.Lock() after a's run passed MaxHold: %v (a kept its turn)", err)
	}
	b.Unlock()
}

// TestCloseLetsGoOfKeptTurn: Close hands a kept turn over at once.
func TestCloseLetsGoOfKeptTurn(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	a, err := OpenKeep(path, time.Minute, Keep{MaxRun: 8, MaxHold: time.Hour, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b := openKeep(t, path, Keep{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	a.Unlock() // kept for an hour
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx); err != nil {
		t.Fatalf("b.Lock() after a closed with a kept turn: %v", err)
	}
	b.Unlock()
}

// TestKeptTurnIsSharedInProcess: another goroutine of the same process
// takes a kept turn without the kernel, and the run counts its write.
func TestKeptTurnIsSharedInProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	a := openKeep(t, path, Keep{MaxRun: 2, MaxHold: time.Hour, Linger: time.Hour})
	b := openKeep(t, path, Keep{})
	ctx := context.Background()
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	a.Unlock() // kept: run 1 of 2
	errc := make(chan error, 1)
	go func() {
		if err := a.Lock(ctx); err != nil {
			errc <- err
			return
		}
		a.Unlock() // run 2 of 2: handed over
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx); err != nil {
		t.Fatalf("b.Lock() after a's run of 2: %v", err)
	}
	b.Unlock()
}

// TestCloseDoesNotWaitForAnotherHolder: a Lock whose given-up wait is still
// blocked in the kernel (another process holds the turn) closes at once;
// the wait is handed back later, when the holder lets go, so the next
// writer is not blocked by it.
func TestCloseDoesNotWaitForAnotherHolder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	holder := openKeep(t, path, Keep{})
	ctx := context.Background()
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := OpenKeep(path, time.Minute, Keep{})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b.Lock() while holder holds the turn: %v, want context.DeadlineExceeded", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("Close blocked until another process lets go of the turn")
	}
	holder.Unlock() // b's given-up wait is granted, handed back, files closed
	c := openKeep(t, path, Keep{})
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	if err := c.Lock(cctx); err != nil {
		t.Fatalf("c.Lock() after the holder let go: %v", err)
	}
	c.Unlock()
}
