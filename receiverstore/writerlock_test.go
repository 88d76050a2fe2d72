//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package receiverstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Two writer locks on one path stand for two processes (a flock belongs to
// the open file). They exclude each other; a wait given up on is handed back
// once granted, so nobody is left blocked. Cross-process fairness is measured
// in the bench module (docs/performance.md), not asserted here.
func TestWriterLockTakesTurnsAcrossOpenFiles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "receiver.db")
	a, err := openWriterLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	b, err := openWriterLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	ctx := context.Background()
	if err := a.lock(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b.lock() while a holds the turn: err = %v, want context.DeadlineExceeded", err)
	}
	a.unlock()
	if err := b.lock(ctx); err != nil { // after its abandoned wait was handed back
		t.Fatalf("b.lock() after a let go: %v", err)
	}
	b.unlock()
	if err := a.lock(ctx); err != nil {
		t.Fatalf("a.lock() after b let go: %v", err)
	}
	a.unlock()
}
