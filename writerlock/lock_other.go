//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package writerlock

import (
	"context"
	"fmt"
	"time"
)

// Lock takes no turns where flock(2) is missing: writers wait under
// SQLite's busy timeout alone, safe but not fair.
type Lock struct{}

// Open returns a Lock that takes no turns. timeout must be positive.
func Open(path string, timeout time.Duration) (*Lock, error) {
	return OpenKeep(path, timeout, DefaultKeep)
}

// OpenKeep returns a Lock that takes no turns; keep is checked and unused.
func OpenKeep(path string, timeout time.Duration, keep Keep) (*Lock, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("writerlock: timeout %v is not positive", timeout)
	}
	if err := keep.check(); err != nil {
		return nil, err
	}
	return &Lock{}, nil
}

// Lock returns ctx's error if ctx has ended, else nil.
func (*Lock) Lock(ctx context.Context) error { return ctx.Err() }

// Unlock does nothing.
func (*Lock) Unlock() {}

// Close does nothing.
func (*Lock) Close() error { return nil }

// Remove does nothing: there are no lock files.
func (*Lock) Remove() error { return nil }
