package conformance

import (
	"context"
	"github.com/fairrelay/fairrelay/queue"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

func nextDue(t *testing.T, s Queue) (clock.Tick, bool) {
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
func queueNextDue_EarliestDispatchableTick(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s, _ := bk.openTest(t)
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
	s2, _ := bk.openTest(t)
	enqueue(t, s2, "q1", "q", "x", 0)
	quarantineHead(t, s2, 0)
	if due, ok := nextDue(t, s2); ok {
		t.Fatalf("only a quarantined head: NextDue = %d, true; want ok = false", due)
	}
	// All acked: nothing.
	s3, _ := bk.openTest(t)
	enqueue(t, s3, "z1", "z", "x", 0)
	z := mustClaim(t, s3, 0)
	settle(t, s3, "z1", z.Generation, success, 1)
	if _, ok := nextDue(t, s3); ok {
		t.Fatalf("all acked: ok = true")
	}
}

// NextDue follows an extended lease.
func queueNextDue_FollowsExtend(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	c := mustClaim(t, s, 0)
	if _, err := s.Extend(context.Background(), "a1", c.Generation, 3); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if due, ok := nextDue(t, s); !ok || due != 3+queue.Lease {
		t.Fatalf("NextDue = %d, %v; want %d", due, ok, 3+queue.Lease)
	}
}

func oldestDue(t *testing.T, s Queue, now clock.Tick) (clock.Tick, bool) {
	t.Helper()
	due, ok, err := s.OldestDue(context.Background(), now)
	if err != nil {
		t.Fatalf("OldestDue(%d) error = %v", now, err)
	}
	return due, ok
}

// OldestDue is the due tick of the longest-waiting dispatchable head at now:
// the smallest ready_at at or below now, whether a claim has marked the flow
// ready or not; ok=false when nothing is dispatchable at now. It writes
// nothing.
func queueOldestDue_LongestWaitingDispatchableHead(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s, _ := bk.openTest(t)
	if _, ok := oldestDue(t, s, 100); ok {
		t.Fatalf("empty store: ok = true")
	}
	enqueue(t, s, "a1", "a", "x", 10)
	enqueue(t, s, "b1", "b", "x", 12)
	before := snap(t, s)
	if due, ok := oldestDue(t, s, 12); !ok || due != 10 {
		t.Fatalf("two new heads (10, 12): OldestDue = %d, %v; want 10", due, ok)
	}
	assertUnchanged(t, "OldestDue", before, snap(t, s))
	if due, ok := oldestDue(t, s, 9); ok {
		t.Fatalf("before either was due: OldestDue(9) = %d, true; want ok = false", due)
	}
	ca := mustClaim(t, s, 13) // a1 in flight until 18; b becomes the oldest
	if due, ok := oldestDue(t, s, 13); !ok || due != 12 {
		t.Fatalf("a in flight: OldestDue = %d, %v; want b's 12", due, ok)
	}
	cb := mustClaim(t, s, 14) // b1 in flight until 19
	if due, ok := oldestDue(t, s, 14); ok {
		t.Fatalf("both in flight: OldestDue = %d, true; want ok = false", due)
	}
	// A lease that ran out is due from its end: a take-over waits.
	if due, ok := oldestDue(t, s, 20); !ok || due != 18 {
		t.Fatalf("both leases over (18, 19): OldestDue(20) = %d, %v; want 18", due, ok)
	}
	settle(t, s, "a1", ca.Generation, success, 15)
	settle(t, s, "b1", cb.Generation, failure("x"), 16) // retry due at 18
	if due, ok := oldestDue(t, s, 17); ok {
		t.Fatalf("a acked, b backing off: OldestDue(17) = %d, true; want ok = false", due)
	}
	if due, ok := oldestDue(t, s, 30); !ok || due != 18 {
		t.Fatalf("b's backoff over: OldestDue(30) = %d, %v; want 18", due, ok)
	}
	// A quarantined head waits for nobody's tick.
	s2, _ := bk.openTest(t)
	enqueue(t, s2, "q1", "q", "x", 0)
	quarantineHead(t, s2, 0)
	if due, ok := oldestDue(t, s2, 1000); ok {
		t.Fatalf("only a quarantined head: OldestDue = %d, true; want ok = false", due)
	}
}
