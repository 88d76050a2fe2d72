//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// openers are the kinds of writer lock the prototype has (the queued one
// with a gate moved to the writerlock module, which tests it).
var openers = []struct {
	name string
	open func(string, time.Duration) (*WriterLock, error)
}{
	{"plain", OpenWriterLock},
}

func forEachOpener(t *testing.T, test func(t *testing.T, open func(path string, max time.Duration) *WriterLock)) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			test(t, func(path string, max time.Duration) *WriterLock {
				t.Helper()
				l, err := o.open(path, max)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			})
		})
	}
}

// Two WriterLocks on one file stand for two processes: flock(2) locks belong to
// the open file, so they exclude each other as processes do.
func TestWriterLockExcludesAnotherHolder(t *testing.T) {
	t.Parallel()
	forEachOpener(t, func(t *testing.T, open func(string, time.Duration) *WriterLock) {
		path := filepath.Join(t.TempDir(), "w.lock")
		a, b := open(path, time.Minute), open(path, time.Minute)
		ctx := context.Background()
		if err := a.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := b.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("b.Lock while a holds it: err = %v, want context.DeadlineExceeded", err)
		}
		a.Unlock()
		// b's abandoned turn is handed back as soon as the kernel grants it, so
		// a third holder, and b itself, get their turns.
		c := open(path, time.Minute)
		if err := c.Lock(ctx); err != nil {
			t.Fatalf("c.Lock after a let go: %v", err)
		}
		c.Unlock()
		if err := b.Lock(ctx); err != nil {
			t.Fatalf("b.Lock after its abandoned turn: %v", err)
		}
		b.Unlock()
	})
}

func TestWriterLockWaitIsBounded(t *testing.T) {
	t.Parallel()
	forEachOpener(t, func(t *testing.T, open func(string, time.Duration) *WriterLock) {
		path := filepath.Join(t.TempDir(), "w.lock")
		a, b := open(path, time.Minute), open(path, 20*time.Millisecond)
		if err := a.Lock(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer a.Unlock()
		if err := b.Lock(context.Background()); !errors.Is(err, ErrWriterWait) {
			t.Fatalf("b.Lock past its bound: err = %v, want ErrWriterWait", err)
		}
	})
}

func TestWriterLockSerializesGoroutinesAndHolders(t *testing.T) {
	t.Parallel()
	forEachOpener(t, func(t *testing.T, open func(string, time.Duration) *WriterLock) {
		path := filepath.Join(t.TempDir(), "w.lock")
		locks := []*WriterLock{open(path, time.Minute), open(path, time.Minute)}
		const n, each = 8, 50
		// Atomics: the race detector cannot see the kernel's flock ordering
		// between the two open files, so plain counters would be reported.
		var inside, total atomic.Int32
		done := make(chan error, n)
		for i := range n {
			l := locks[i%len(locks)] // goroutines of two "processes"
			go func() {
				for range each {
					if err := l.Lock(context.Background()); err != nil {
						done <- err
						return
					}
					if inside.Add(1) != 1 {
						done <- errors.New("two holders at once")
						return
					}
					runtime.Gosched() // give another holder the chance to break in
					total.Add(1)
					inside.Add(-1)
					l.Unlock()
				}
				done <- nil
			}()
		}
		for range n {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if total.Load() != n*each {
			t.Fatalf("total = %d, want %d", total.Load(), n*each)
		}
	})
}

// A holder that dies without unlocking does not block anyone: the kernel drops
// its flock when the process exits.
func TestWriterLockDiesWithItsProcess(t *testing.T) {
	t.Parallel()
	forEachOpener(t, func(t *testing.T, open func(string, time.Duration) *WriterLock) {
		path := filepath.Join(t.TempDir(), "w.lock")
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLockAndExit$")
		cmd.Env = append(os.Environ(), "BENCH_HELPER_LOCK="+path)
		if out, err := cmd.CombinedOutput(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Fatalf("helper: %v: %s", err, out)
			}
		} else {
			t.Fatalf("helper exited 0, want 7: %s", out)
		}
		l := open(path, time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Lock(ctx); err != nil {
			t.Fatalf("Lock after the holder died: %v", err)
		}
		l.Unlock()
	})
}

func TestHelperLockAndExit(t *testing.T) {
	path := os.Getenv("BENCH_HELPER_LOCK")
	if path == "" {
		t.Skip("helper process")
	}
	l, err := OpenWriterLock(path, time.Minute)
	if err != nil {
		os.Exit(2)
	}
	if err := l.Lock(context.Background()); err != nil {
		os.Exit(3)
	}
	os.Exit(7) // still holding
}

// BenchmarkWriterLockUncontended is the cost a write pays for its turn when
// nobody else writes.
func BenchmarkWriterLockUncontended(b *testing.B) {
	for _, o := range openers {
		b.Run(o.name, func(b *testing.B) {
			l, err := o.open(filepath.Join(b.TempDir(), "w.lock"), time.Minute)
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
		})
	}
}
