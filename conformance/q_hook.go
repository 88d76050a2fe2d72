package conformance

import (
	"context"
	"errors"
	"github.com/fairrelay/fairrelay/queue"
	"reflect"
	"testing"
)

// Hooks: the hooks run at their named points, inside or after the
// transaction as documented, and only when the operation did what the point
// names.
func queueHooks_CalledAtTheirPoints(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	path := bk.newLoc(t)
	observer, err := bk.openAt(t, path)
	if err != nil {
		t.Fatalf("bk.openAt(t, observer) error = %v", err)
	}
	defer observer.Close()

	var calls []queue.HookPoint
	// visible reports what a second Store sees of the event at the hook:
	// inside a transaction the change is not committed yet.
	var seen []string
	var watch string
	s, err := bk.openAt(t, path, withHook(func(p queue.HookPoint) {
		calls = append(calls, p)
		e, err := observer.Event(ctx, watch)
		switch {
		case errors.Is(err, queue.ErrNotFound):
			seen = append(seen, "absent")
		case err != nil:
			seen = append(seen, err.Error())
		default:
			seen = append(seen, e.State)
		}
	}))
	if err != nil {
		t.Fatalf("bk.openAt(t, ) error = %v", err)
	}
	defer s.Close()

	watch = "a1"
	enqueue(t, s, "a1", "a", "x", 0) // seq taken; the event is not visible yet
	enqueue(t, s, "a1", "a", "x", 0) // duplicate: no seq taken, no hook
	c := mustClaim(t, s, 0)          // committed: visible as inflight
	claim(t, s, 0)                   // nothing claimed: no hook
	settle(t, s, "a1", c.Generation+1, success, 0)
	settle(t, s, "a1", c.Generation, failure("unavailable"), 0) // before commit: still inflight
	c = mustClaim(t, s, 2)
	settle(t, s, "a1", c.Generation, failure("unavailable"), 2)
	c = mustClaim(t, s, 6)
	settle(t, s, "a1", c.Generation, failure("unavailable"), 6) // quarantined, before commit
	if err := s.Redrive(ctx, "a1", c.Generation, "r", 7); err != nil {
		t.Fatalf("Redrive() error = %v", err)
	}
	want := []queue.HookPoint{queue.HookEnqueueSeqTaken, queue.HookClaimCommitted, queue.HookSettleBeforeCommit,
		queue.HookClaimCommitted, queue.HookSettleBeforeCommit, queue.HookClaimCommitted, queue.HookSettleBeforeCommit, queue.HookRedriveBeforeAudit}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("hook calls = %v, want %v", calls, want)
	}
	wantSeen := []string{"absent", "inflight", "inflight", "inflight", "inflight", "inflight", "inflight", "quarantined"}
	if !reflect.DeepEqual(seen, wantSeen) {
		t.Fatalf("state seen by another store at each hook = %v, want %v", seen, wantSeen)
	}
}

// docs/contract.md §4: the batch forms pass the same points:
// EnqueueBatch once per new event, ClaimBatch once after its commit (and not
// when it claimed nothing).
func queueHooks_BatchOperations(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	var calls []queue.HookPoint
	s, _ := bk.openTest(t, withHook(func(p queue.HookPoint) { calls = append(calls, p) }))
	_, err := s.EnqueueBatch(ctx, []queue.Event{
		{ID: "a1", Flow: "a", Body: []byte("x")},
		{ID: "b1", Flow: "b", Body: []byte("x")},
		{ID: "a1", Flow: "a", Body: []byte("x")}, // duplicate: no sequence number taken
	}, 0)
	if err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	if want := []queue.HookPoint{queue.HookEnqueueSeqTaken, queue.HookEnqueueSeqTaken}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("EnqueueBatch hook calls = %v, want %v", calls, want)
	}
	calls = nil
	if cs, err := s.ClaimBatch(ctx, 0, 5); err != nil || len(cs) != 2 {
		t.Fatalf("ClaimBatch() = %d claims, %v; want 2", len(cs), err)
	}
	if want := []queue.HookPoint{queue.HookClaimCommitted}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("ClaimBatch hook calls = %v, want %v", calls, want)
	}
	calls = nil
	if cs, err := s.ClaimBatch(ctx, 0, 5); err != nil || len(cs) != 0 {
		t.Fatalf("ClaimBatch() = %d claims, %v; want 0", len(cs), err)
	}
	if len(calls) != 0 {
		t.Fatalf("ClaimBatch with nothing to claim: hook calls = %v, want none", calls)
	}
}
