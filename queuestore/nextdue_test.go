package queuestore

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

func nextDue(t *testing.T, s *Store) (clock.Tick, bool) {
	t.Helper()
	due, ok, err := s.NextDue(context.Background())
	if err != nil {
		t.Fatalf("NextDue() error = %v", err)
	}
	return due, ok
}

// NextDue is the earliest tick at which a head becomes dispatchable: the
// mark (or earlier) when one is dispatchable already, else the earliest
// backoff end or lease end; ok=false when nothing waits. It writes nothing.
func TestNextDue_EarliestDispatchableTick(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	if _, ok := nextDue(t, s); ok {
		t.Fatalf("empty store: ok = true")
	}
	enqueue(t, s, "a1", "a", "x", 10)
	if due, ok := nextDue(t, s); !ok || due > 10 {
		t.Fatalf("ready head: NextDue = %d, %v; want <= mark 10", due, ok)
	}
	c := mustClaim(t, s, 10) // lease 15
	before := snap(t, s)
	if due, ok := nextDue(t, s); !ok || due != 15 {
		t.Fatalf("in flight: NextDue = %d, %v; want the lease end 15", due, ok)
	}
	assertUnchanged(t, "NextDue", before, snap(t, s))
	enqueue(t, s, "b1", "b", "x", 11)
	cb := mustClaim(t, s, 11) // lease 16
	settle(t, s, "b1", cb.Generation, failure("x"), 12)
	settle(t, s, "a1", c.Generation, failure("x"), 13) // retry at 15
	if due, ok := nextDue(t, s); !ok || due != 14 {
		t.Fatalf("two retries (14, 15): NextDue = %d, %v; want 14", due, ok)
	}
	// Once the tick passes, something is dispatchable: a tick <= the mark.
	if _, err := s.ExtendBatch(context.Background(), nil, 20); err != nil {
		t.Fatalf("ExtendBatch: %v", err)
	}
	if due, ok := nextDue(t, s); !ok || due > 20 {
		t.Fatalf("after the backoffs: NextDue = %d, %v; want <= 20", due, ok)
	}
	// A quarantined head waits for nobody's tick.
	s2, _ := openTest(t)
	enqueue(t, s2, "q1", "q", "x", 0)
	quarantineHead(t, s2, 0)
	if due, ok := nextDue(t, s2); ok {
		t.Fatalf("only a quarantined head: NextDue = %d, true; want ok = false", due)
	}
	// All acked: nothing.
	s3, _ := openTest(t)
	enqueue(t, s3, "z1", "z", "x", 0)
	z := mustClaim(t, s3, 0)
	settle(t, s3, "z1", z.Generation, success, 1)
	if _, ok := nextDue(t, s3); ok {
		t.Fatalf("all acked: ok = true")
	}
}

// NextDue follows an extended lease.
func TestNextDue_FollowsExtend(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	c := mustClaim(t, s, 0)
	if _, err := s.Extend(context.Background(), "a1", c.Generation, 3); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if due, ok := nextDue(t, s); !ok || due != 3+Lease {
		t.Fatalf("NextDue = %d, %v; want %d", due, ok, 3+Lease)
	}
}
