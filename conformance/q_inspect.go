package conformance

import (
	"context"
	"github.com/fairrelay/fairrelay/queue"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// The operator's read-only views: Flows, FlowEvents, queue.Stats, queue.Quarantined,
// Audit agree with the state built here, and with counts made from the
// snapshot.
func queueInspect_FlowsEventsStatsQuarantined(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "q1", "q", "x", 0)
	enqueue(t, s, "q2", "q", "x", 0)
	q, now := quarantineHead(t, s, 0) // q: head q1 quarantined, backlog 2
	enqueue(t, s, "a1", "a", "x", now)
	enqueue(t, s, "a2", "a", "x", now)
	enqueue(t, s, "a3", "a", "x", now)
	a := mustClaim(t, s, now) // a: head a1 inflight, backlog 3
	enqueue(t, s, "b1", "b", "x", now)
	b := mustClaim(t, s, now)
	settle(t, s, b.EventID, b.Generation, success, now) // b: no head, backlog 0
	enqueue(t, s, "c1", "c", "x", now)
	c := mustClaim(t, s, now)
	settle(t, s, c.EventID, c.Generation, failure("gap"), now) // c: pending head at now+2

	flows, err := s.Flows(ctx)
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	tick := func(v clock.Tick) *clock.Tick { return &v }
	want := []queue.FlowState{
		{Flow: "a", Served: 1, LastSeq: 3, HeadSeq: 1, HeadState: queue.StateInflight, ReadyAt: tick(a.LeaseUntil), Backlog: 3, Weight: 1},
		{Flow: "b", Served: 1, LastSeq: 1, HeadSeq: 0, HeadState: "", ReadyAt: nil, Backlog: 0, Weight: 1},
		{Flow: "c", Served: 1, LastSeq: 1, HeadSeq: 1, HeadState: queue.StatePending, ReadyAt: tick(now + 2), Backlog: 1, Weight: 1},
		{Flow: "q", Served: 3, LastSeq: 2, HeadSeq: 1, HeadState: queue.StateQuarantined, ReadyAt: nil, Backlog: 2, Weight: 1},
	}
	if jsonOf(flows) != jsonOf(want) {
		t.Fatalf("Flows() = %s\nwant %s", jsonOf(flows), jsonOf(want))
	}
	// Backlog equals the count of events not acked, from the snapshot.
	notAcked := map[string]int64{}
	for _, e := range snap(t, s).Events {
		if e.State != queue.StateAcked {
			notAcked[e.Flow]++
		}
	}
	for _, f := range flows {
		if f.Backlog != notAcked[f.Flow] {
			t.Fatalf("flow %s backlog = %d, events not acked = %d", f.Flow, f.Backlog, notAcked[f.Flow])
		}
	}

	evs, err := s.FlowEvents(ctx, "a")
	if err != nil || len(evs) != 3 || evs[0].ID != "a1" || evs[2].ID != "a3" || evs[0].State != queue.StateInflight {
		t.Fatalf("FlowEvents(a) = %s, %v; want a1 (inflight), a2, a3", jsonOf(evs), err)
	}
	if _, err := s.FlowEvents(ctx, "nope"); err == nil {
		t.Fatalf("FlowEvents(unknown) error = nil, want queue.ErrNotFound")
	} else {
		wantErr(t, "FlowEvents(unknown)", err, queue.ErrNotFound)
	}

	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats() error = %v", err)
	}
	wantStats := queue.Stats{SchemaVersion: bk.SchemaVersion, ClockMark: now, Ticket: 6, Flows: 4,
		Events: queue.EventCounts{Pending: 4, Inflight: 1, Acked: 1, Quarantined: 1}, Quarantined: 1}
	if st != wantStats {
		t.Fatalf("Stats() = %s\nwant %s", jsonOf(st), jsonOf(wantStats))
	}

	qs, err := s.Quarantined(ctx)
	if err != nil {
		t.Fatalf("Quarantined() error = %v", err)
	}
	wantQ := []queue.QuarantinedEvent{{EventID: "q1", Flow: "q", Seq: 1, Generation: q.Generation, LifetimeAttempts: 3, Reason: "unavailable"}}
	if jsonOf(qs) != jsonOf(wantQ) {
		t.Fatalf("Quarantined() = %s, want %s", jsonOf(qs), jsonOf(wantQ))
	}
	if err := s.Redrive(ctx, "q1", q.Generation, "fixed", now); err != nil {
		t.Fatalf("Redrive() error = %v", err)
	}
	if qs, err := s.Quarantined(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("Quarantined() after redrive = %v, %v; want none", qs, err)
	}
	if st, _ := s.Stats(ctx); st.AuditRows != 1 || st.Quarantined != 0 {
		t.Fatalf("Stats() after redrive = %s, want 1 audit row, 0 quarantined", jsonOf(st))
	}
}

// An empty store reads as empty, not as an error.
func queueInspect_EmptyStore(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	if f, err := s.Flows(ctx); err != nil || len(f) != 0 {
		t.Fatalf("Flows() = %v, %v", f, err)
	}
	if q, err := s.Quarantined(ctx); err != nil || len(q) != 0 {
		t.Fatalf("Quarantined() = %v, %v", q, err)
	}
	if a, err := s.Audit(ctx); err != nil || len(a) != 0 {
		t.Fatalf("Audit() = %v, %v", a, err)
	}
	if st, err := s.Stats(ctx); err != nil || st != (queue.Stats{SchemaVersion: bk.SchemaVersion}) {
		t.Fatalf("Stats() = %+v, %v", st, err)
	}
	if _, err := s.Event(ctx, "x"); err == nil {
		t.Fatalf("Event(unknown) error = nil")
	} else {
		wantErr(t, "Event(unknown)", err, queue.ErrNotFound)
	}
}
