package conformance

import (
	"context"
	"encoding/json"
	"github.com/fairrelay/fairrelay/queue"
	"reflect"
	"strings"
	"testing"
)

// docs/contract.md §2.7: enqueue is atomic: when its second write (the event insert)
// fails, the first (the flow's sequence counter and head) is undone, and so
// is the clock mark.
func queueStorage_2_7_EnqueueIsAtomic(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, loc := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 1)
	c := mustClaim(t, s, 1)
	settle(t, s, "a1", c.Generation, success, 1) // flow a now has no head
	bk.failWrites(t, loc, FailEventInsert)
	for _, e := range []queue.Event{{ID: "a2", Flow: "a", Body: []byte("x")}, {ID: "b1", Flow: "b", Body: []byte("x")}} {
		before := snap(t, s)
		_, err := s.Enqueue(ctx, e, 5)
		if err == nil || !strings.Contains(err.Error(), "injected: event insert fails") {
			t.Fatalf("Enqueue(%s) error = %v, want the trigger's error", e.ID, err)
		}
		assertUnchanged(t, "failed enqueue of "+e.ID, before, snap(t, s))
		_, err = s.EnqueueBatch(ctx, []queue.Event{{ID: "c1", Flow: "c", Body: []byte("x")}, e}, 5)
		if err == nil {
			t.Fatalf("EnqueueBatch error = nil, want the trigger's error")
		}
		assertUnchanged(t, "failed enqueue batch", before, snap(t, s))
	}
}

// docs/contract.md §2.7: redrive and its audit row are atomic: when the audit insert
// fails, the event update is undone (generation, attempts, state, reason),
// and so is the clock mark.
func queueStorage_2_7_RedriveIsAtomic(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, loc := bk.openTest(t)
	enqueue(t, s, "q1", "q", "x", 0)
	q, now := quarantineHead(t, s, 0)
	bk.failWrites(t, loc, FailAuditInsert)
	before := snap(t, s)
	err := s.Redrive(ctx, "q1", q.Generation, "operator", now+3)
	if err == nil || !strings.Contains(err.Error(), "injected: audit insert fails") {
		t.Fatalf("Redrive() error = %v, want the trigger's error", err)
	}
	assertUnchanged(t, "failed redrive", before, snap(t, s))
	if e := event(t, s, "q1"); e.State != queue.StateQuarantined || e.Generation != q.Generation {
		t.Fatalf("q1 = %s, want still quarantined at generation %d", jsonOf(e), q.Generation)
	}
}

// docs/contract.md §2.3 with §2.7: a claim is one transaction: when its last write fails
// the ticket, the event and the flow are all as they were.
func queueStorage_2_7_ClaimIsAtomic(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, loc := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	bk.failWrites(t, loc, FailServe)
	before := snap(t, s)
	if _, _, err := s.Claim(ctx, 3); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Claim() error = %v, want the trigger's error", err)
	}
	assertUnchanged(t, "failed claim", before, snap(t, s))
}

// docs/contract.md §2.7: queue.Snapshot reads every table in one read transaction, in a stable
// order, and encodes to JSON that decodes back to the same snapshot
// (non-UTF-8 bodies included).
func queueSnapshot_2_7_StableAndJSONFriendly(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s, _ := bk.openTest(t)
	enqueue(t, s, "z1", "z", "{\"delta\": 1}", 0)
	enqueue(t, s, "b2", "b", "\xff\x00raw", 0)
	enqueue(t, s, "b1", "a", "é", 0)
	enqueue(t, s, "a9", "b", "second", 1)
	sn := snap(t, s)
	var order []string
	for _, e := range sn.Events {
		order = append(order, e.ID)
	}
	if got, want := strings.Join(order, ","), "b1,b2,a9,z1"; got != want {
		t.Fatalf("event order = %s, want %s (by flow, then seq)", got, want)
	}
	b, err := json.Marshal(sn)
	if err != nil {
		t.Fatalf("Marshal error = %v", err)
	}
	for _, want := range []string{`"body":"{\"delta\": 1}"`, `"body":{"base64":"/wByYXc="}`, `"body":"é"`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("snapshot JSON lacks %s:\n%s", want, b)
		}
	}
	var back queue.Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal error = %v", err)
	}
	if !reflect.DeepEqual(back, sn) {
		t.Fatalf("JSON round trip changed the snapshot:\n%s\n%s", jsonOf(sn), jsonOf(back))
	}
	if again := snap(t, s); !reflect.DeepEqual(again, sn) {
		t.Fatalf("second queue.Snapshot differs from the first")
	}
}
