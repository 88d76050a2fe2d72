//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package writerlock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func open(t *testing.T, path string, timeout time.Duration) *Lock {
	t.Helper()
	l, err := Open(path, timeout)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func TestOpenRefusesNonPositiveTimeout(t *testing.T) {
	t.Parallel()
	if _, err := Open(filepath.Join(t.TempDir(), "db"), 0); err == nil {
		t.Fatal("Open(timeout 0) error = nil, want an error")
	}
}

func TestOpenCreatesBothLockFiles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	open(t, path, time.Second)
	for _, name := range []string{path + "-writer", path + "-writer-gate"} {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("lock file %s: %v", name, err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open created the database file itself: %v", err)
	}
}

// Two Locks on one path stand for two processes (a flock belongs to the open
// file). They exclude each other; a wait given up on is handed back once
// granted, so nobody is left blocked.
func TestTurnsAcrossOpenFiles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	a, b := open(t, path, time.Minute), open(t, path, time.Minute)
	ctx := context.Background()
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b.Lock() while a holds the turn: err = %v, want context.DeadlineExceeded", err)
	}
	a.Unlock()
	if err := b.Lock(ctx); err != nil { // after its abandoned wait was handed back
		t.Fatalf("b.Lock() after a let go: %v", err)
	}
	b.Unlock()
	if err := a.Lock(ctx); err != nil {
		t.Fatalf("a.Lock() after b let go: %v", err)
	}
	a.Unlock()
}

func TestWaitIsBoundedByTimeout(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	a, b := open(t, path, time.Minute), open(t, path, 20*time.Millisecond)
	if err := a.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(context.Background()); !errors.Is(err, ErrTimeout) {
		t.Fatalf("b.Lock() while a holds the turn: err = %v, want ErrTimeout", err)
	}
	a.Unlock()
	if err := b.Lock(context.Background()); err != nil {
		t.Fatalf("b.Lock() after a let go: %v", err)
	}
	b.Unlock()
}

// TestMutualExclusion has goroutines on two Locks of one file (two open
// files, as two processes would have) count the holders of the turn; any
// overlap of two holders is seen. Atomics, because a flock hand-over is
// invisible to the race detector.
func TestMutualExclusion(t *testing.T) {
	t.Parallel()
	for name, keep := range map[string]Keep{"DefaultKeep": DefaultKeep, "no keep": {}, "long runs": {MaxRun: 50, MaxHold: time.Hour, Linger: time.Millisecond}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testMutualExclusion(t, keep)
		})
	}
}

func testMutualExclusion(t *testing.T, keep Keep) {
	path := filepath.Join(t.TempDir(), "queue.db")
	locks := []*Lock{openKeep(t, path, keep), openKeep(t, path, keep)}
	const workers, rounds = 6, 50
	var holders, overlaps, turns atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(l *Lock) {
			defer wg.Done()
			for range rounds {
				if err := l.Lock(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(10 * time.Microsecond)
				turns.Add(1)
				holders.Add(-1)
				l.Unlock()
			}
		}(locks[w%2])
	}
	wg.Wait()
	if overlaps.Load() != 0 || turns.Load() != workers*rounds {
		t.Fatalf("overlaps = %d, turns = %d; want 0, %d", overlaps.Load(), turns.Load(), workers*rounds)
	}
}

// TestHolderDiesWithItsProcess: a real child process takes the turn and exits
// without letting go; the kernel drops its flock, so the next writer gets in.
func TestHolderDiesWithItsProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldAndExit$")
	cmd.Env = append(os.Environ(), "WRITERLOCK_HELPER_PATH="+path)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("helper: err = %v, want exit status 7; output:\n%s", err, out)
	}
	l := open(t, path, 10*time.Second)
	if err := l.Lock(context.Background()); err != nil {
		t.Fatalf("Lock after the holder died: %v", err)
	}
	l.Unlock()
}

func TestHelperHoldAndExit(t *testing.T) {
	path := os.Getenv("WRITERLOCK_HELPER_PATH")
	if path == "" {
		t.Skip("helper process for TestHolderDiesWithItsProcess")
	}
	l, err := Open(path, time.Minute)
	if err != nil {
		os.Exit(2)
	}
	if err := l.Lock(context.Background()); err != nil {
		os.Exit(3)
	}
	os.Exit(7) // still holding the turn
}

// BenchmarkUncontended is what a write pays for its turn when nobody else
// writes.
func BenchmarkUncontended(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "queue.db"), time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for b.Loop() {
		if err := l.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		l.Unlock()
	}
}

// TestUseAfterClose: a Lock called after Close is ErrClosed, and an Unlock
// after Close (a store closed while a write ran) touches no descriptor:
// the numbers Close freed may belong to another Lock's files by then.
func TestUseAfterClose(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	l, err := OpenKeep(filepath.Join(dir, "a"), time.Second, Keep{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "b")
	l2, err := OpenKeep(other, time.Second, Keep{}) // likely takes the freed numbers
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := l2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	l3, err := OpenKeep(other, 100*time.Millisecond, Keep{})
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	if err := l3.Lock(ctx); !errors.Is(err, ErrTimeout) {
		if err == nil {
			l3.Unlock()
		}
		t.Fatalf("Lock beside a held turn after a stale Unlock = %v, want ErrTimeout", err)
	}
	if err := l.Lock(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lock after Close = %v, want ErrClosed", err)
	}
	l2.Unlock()
}
