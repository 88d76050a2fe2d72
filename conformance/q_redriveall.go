package conformance

import (
	"context"
	"fmt"
	"github.com/fairrelay/fairrelay/queue"
	"reflect"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// quarantineMany puts one event in each of nFlows flows in quarantine, the flows
// whose name ends in a byte that is a multiple of 3 with reason "gone", the
// others "boom", through queue.MaxAttempts failed claims. It returns the IDs.
func quarantineMany(t *testing.T, s Queue, nFlows int) []string {
	t.Helper()
	ctx := context.Background()
	var es []queue.Event
	for i := 0; i < nFlows; i++ {
		es = append(es, queue.Event{ID: fmt.Sprintf("e%04d", i), Flow: fmt.Sprintf("f%04d", i), Body: []byte("x")})
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	now := int64(0)
	for k := 1; k <= queue.MaxAttempts; k++ {
		cs, err := s.ClaimBatch(ctx, clock.Tick(now), nFlows)
		if err != nil || len(cs) != nFlows {
			t.Fatalf("ClaimBatch: %d, %v", len(cs), err)
		}
		items := make([]queue.SettleItem, len(cs))
		for i, c := range cs {
			reason := "boom"
			if c.Flow[len(c.Flow)-1]%3 == 0 {
				reason = "gone"
			}
			items[i] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: failure(reason)}
		}
		if _, err := s.SettleBatch(ctx, items, clock.Tick(now)); err != nil {
			t.Fatalf("SettleBatch: %v", err)
		}
		now += int64(queue.Backoff(k))
	}
	ids := make([]string, nFlows)
	for i := range ids {
		ids[i] = es[i].ID
	}
	return ids
}

// RedriveAll redrives every matching quarantined head exactly as Redrive
// would, with one audit row each, over several chunks; QuarantinedMatching
// is its dry run; a second run finds nothing.
func queueRedriveAll_EveryHeadWithOneAuditRowEach(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	n := queue.RedriveChunk*2 + 7
	quarantineMany(t, s, n)
	dry, err := s.QuarantinedMatching(ctx, queue.RedriveFilter{})
	if err != nil || len(dry) != n {
		t.Fatalf("QuarantinedMatching(all) = %d, %v; want %d", len(dry), err, n)
	}
	// The reference: Redrive one event on a twin store.
	twin, _ := bk.openTest(t)
	quarantineMany(t, twin, 1)
	q := event(t, twin, "e0000")
	if err := twin.Redrive(ctx, "e0000", q.Generation, "receiver fixed", 100); err != nil {
		t.Fatalf("Redrive: %v", err)
	}
	got, err := s.RedriveAll(ctx, queue.RedriveFilter{}, "receiver fixed", 100)
	if err != nil || len(got) != n {
		t.Fatalf("RedriveAll() = %d, %v; want %d", len(got), err, n)
	}
	for i, r := range got {
		if r.EventID != dry[i].EventID || r.Flow != dry[i].Flow || r.Seq != dry[i].Seq || r.Generation != dry[i].Generation+1 {
			t.Fatalf("redriven %d = %+v, dry run said %+v", i, r, dry[i])
		}
	}
	if jsonOf(event(t, s, "e0000")) != jsonOf(event(t, twin, "e0000")) || jsonOf(flowOf(t, s, "f0000")) != jsonOf(flowOf(t, twin, "f0000")) {
		t.Fatalf("RedriveAll's event %s / flow %s differ from Redrive's %s / %s",
			jsonOf(event(t, s, "e0000")), jsonOf(flowOf(t, s, "f0000")), jsonOf(event(t, twin, "e0000")), jsonOf(flowOf(t, twin, "f0000")))
	}
	audit, err := s.Audit(ctx)
	if err != nil || len(audit) != n {
		t.Fatalf("Audit() = %d rows, %v; want %d", len(audit), err, n)
	}
	for i, a := range audit {
		if a.EventID != got[i].EventID || a.Generation != got[i].Generation || a.Reason != "receiver fixed" || a.At != 100 {
			t.Fatalf("audit %d = %+v for %+v", i, a, got[i])
		}
	}
	// Everything is dispatchable again; nothing is left to redrive.
	cs, err := s.ClaimBatch(ctx, 100, n)
	if err != nil || len(cs) != n {
		t.Fatalf("ClaimBatch after RedriveAll = %d, %v", len(cs), err)
	}
	again, err := s.RedriveAll(ctx, queue.RedriveFilter{}, "receiver fixed", 100)
	if err != nil || len(again) != 0 {
		t.Fatalf("second RedriveAll = %v, %v; want none", again, err)
	}
}

// Filters: by flow, by failure reason, by both; only matching events move.
func queueRedriveAll_Filters(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	quarantineMany(t, s, 12) // flows f0000..f0011; reason "gone" when the last digit %3 == 0 (as a byte)
	gone, err := s.QuarantinedMatching(ctx, queue.RedriveFilter{Reason: "gone"})
	if err != nil {
		t.Fatalf("QuarantinedMatching: %v", err)
	}
	for _, q := range gone {
		if q.Reason != "gone" {
			t.Fatalf("reason filter returned %+v", q)
		}
	}
	if len(gone) == 0 || len(gone) == 12 {
		t.Fatalf("reason filter matched %d of 12", len(gone))
	}
	got, err := s.RedriveAll(ctx, queue.RedriveFilter{Reason: "gone"}, "dns fixed", 50)
	if err != nil || len(got) != len(gone) {
		t.Fatalf("RedriveAll(reason) = %d, %v; want %d", len(got), err, len(gone))
	}
	left, _ := s.QuarantinedMatching(ctx, queue.RedriveFilter{})
	if len(left) != 12-len(gone) {
		t.Fatalf("left quarantined = %d, want %d", len(left), 12-len(gone))
	}
	one := left[0].Flow
	got, err = s.RedriveAll(ctx, queue.RedriveFilter{Flow: one}, "just this tenant", 51)
	if err != nil || len(got) != 1 || got[0].Flow != one {
		t.Fatalf("RedriveAll(flow) = %+v, %v", got, err)
	}
	if m, _ := s.QuarantinedMatching(ctx, queue.RedriveFilter{Flow: left[1].Flow, Reason: "gone"}); len(m) != 0 {
		t.Fatalf("flow+reason filter matched %+v", m)
	}
	if m, _ := s.QuarantinedMatching(ctx, queue.RedriveFilter{Flow: left[1].Flow, Reason: "boom"}); len(m) != 1 {
		t.Fatalf("flow+reason filter matched %+v, want one", m)
	}
	if m, _ := s.QuarantinedMatching(ctx, queue.RedriveFilter{Flow: "nope"}); m != nil {
		t.Fatalf("unknown flow matched %+v", m)
	}
}

// Bad reason or filter: refused before anything is written.
func queueRedriveAll_BadInputChangesNothing(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	quarantineMany(t, s, 3)
	before := snap(t, s)
	_, err := s.RedriveAll(ctx, queue.RedriveFilter{}, "", 100)
	wantErr(t, "empty reason", err, queue.ErrInvalid, queue.ErrEmptyReason)
	_, err = s.RedriveAll(ctx, queue.RedriveFilter{}, "   ", 100)
	wantErr(t, "blank reason", err, queue.ErrInvalid, queue.ErrEmptyReason)
	_, err = s.RedriveAll(ctx, queue.RedriveFilter{Flow: " f0001"}, "r", 100)
	wantErr(t, "flow filter with a leading space", err, queue.ErrInvalid)
	_, err = s.RedriveAll(ctx, queue.RedriveFilter{Reason: "a\nb"}, "r", 100)
	wantErr(t, "reason filter with a newline", err, queue.ErrInvalid)
	_, err = s.QuarantinedMatching(ctx, queue.RedriveFilter{Flow: "  "})
	wantErr(t, "QuarantinedMatching(blank flow)", err, queue.ErrInvalid)
	_, err = s.RedriveAll(ctx, queue.RedriveFilter{}, "r", 1)
	wantErr(t, "past tick", err, queue.ErrTimeRegression)
	assertUnchanged(t, "refused RedriveAll", before, snap(t, s))
}

// A RedriveAll stopped between chunks leaves the earlier chunks done and
// the rest quarantined; running it again finishes the job and redrives no
// event twice.
func queueRedriveAll_StoppedBetweenChunksResumes(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	n := queue.RedriveChunk + 20
	cctx, cancel := context.WithCancel(ctx)
	calls := 0
	s, _ := bk.openTest(t, withHook(func(p queue.HookPoint) {
		if p == queue.HookRedriveBeforeAudit {
			calls++
			if calls == queue.RedriveChunk+5 { // inside the second chunk
				cancel()
			}
		}
	}))
	quarantineMany(t, s, n)
	before := snap(t, s)
	got, err := s.RedriveAll(cctx, queue.RedriveFilter{}, "bulk", 100)
	wantErr(t, "RedriveAll canceled in chunk 2", err, context.Canceled)
	if len(got) != queue.RedriveChunk {
		t.Fatalf("redriven before the stop = %d, want the first chunk %d", len(got), queue.RedriveChunk)
	}
	// The second chunk is atomic: its events had been updated (the hook
	// runs after its set statements) but none of them, nor their flows,
	// kept any change.
	done := map[string]bool{}
	for _, r := range got {
		done[r.EventID] = true
	}
	after := snap(t, s)
	if len(after.Events) != n || len(after.Flows) != n {
		t.Fatalf("snapshot after the stop holds %d events and %d flows, want %d of each", len(after.Events), len(after.Flows), n)
	}
	for i, e := range after.Events {
		if done[e.ID] != (e.State == queue.StatePending) {
			t.Fatalf("event %s is %s after the stop; redriven: %v", e.ID, e.State, done[e.ID])
		}
		if !done[e.ID] && (!reflect.DeepEqual(e, before.Events[i]) || !reflect.DeepEqual(after.Flows[i], before.Flows[i])) {
			t.Fatalf("event %s of the stopped chunk changed: %s / flow %s, was %s / %s",
				e.ID, jsonOf(e), jsonOf(after.Flows[i]), jsonOf(before.Events[i]), jsonOf(before.Flows[i]))
		}
	}
	if a, _ := s.Audit(ctx); len(a) != queue.RedriveChunk {
		t.Fatalf("audit rows after the stop = %d, want %d", len(a), queue.RedriveChunk)
	}
	rest, err := s.RedriveAll(ctx, queue.RedriveFilter{}, "bulk", 100)
	if err != nil || len(rest) != n-queue.RedriveChunk {
		t.Fatalf("second RedriveAll = %d, %v; want %d", len(rest), err, n-queue.RedriveChunk)
	}
	a, _ := s.Audit(ctx)
	seen := map[string]bool{}
	for _, r := range a {
		if seen[r.EventID] {
			t.Fatalf("%s redriven twice", r.EventID)
		}
		seen[r.EventID] = true
	}
	if len(seen) != n {
		t.Fatalf("audit names %d events, want %d", len(seen), n)
	}
}
