package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// The clauses of docs/contract.md §7.9 that the queue stores keep: scheduled
// events (Event.NotBefore), the operator's pause (queue.Pauser) and
// retention (Policy.Retention, queue.Pruner).

// enqueueNB enqueues one event scheduled at notBefore; it fails t on an
// error.
func enqueueNB(t testing.TB, s Queue, id, flow string, notBefore, now clock.Tick) queue.Enqueued {
	t.Helper()
	r, err := s.Enqueue(context.Background(), queue.Event{ID: id, Flow: flow, Body: []byte("x"), NotBefore: notBefore}, now)
	if err != nil {
		t.Fatalf("Enqueue(%q, %q, not before %d) error = %v", id, flow, notBefore, err)
	}
	return r
}

// ack claims at now, wants the claim to be id's, and acks it at now.
func ack(t testing.TB, s Queue, id string, now clock.Tick) {
	t.Helper()
	c := mustClaim(t, s, now)
	if c.EventID != id {
		t.Fatalf("Claim(%d) = %s, want %s", now, c.EventID, id)
	}
	if o := settle(t, s, c.EventID, c.Generation, success, now); o != queue.Acked {
		t.Fatalf("Settle(%s) = %q, want acked", id, o)
	}
}

// wantClaim fails t unless a claim at now is id's; it returns the claim.
func wantClaim(t testing.TB, s Queue, id string, now clock.Tick) queue.Claim {
	t.Helper()
	c := mustClaim(t, s, now)
	if c.EventID != id {
		t.Fatalf("Claim(%d) = %s, want %s", now, jsonOf(c), id)
	}
	return c
}

// wantNoClaim fails t if a claim at now finds a head.
func wantNoClaim(t testing.TB, s Queue, now clock.Tick) {
	t.Helper()
	if c, ok := claim(t, s, now); ok {
		t.Fatalf("Claim(%d) = %s, want nothing dispatchable", now, jsonOf(c))
	}
}

// wantNextDue fails t unless NextDue is at (ok false when at < 0).
func wantNextDue(t testing.TB, s Queue, at clock.Tick) {
	t.Helper()
	got, ok, err := s.NextDue(context.Background())
	if err != nil {
		t.Fatalf("NextDue() error = %v", err)
	}
	if at < 0 {
		if ok {
			t.Fatalf("NextDue() = %d, want nothing waiting", got)
		}
		return
	}
	if !ok || got != at {
		t.Fatalf("NextDue() = %d, %v; want %d", got, ok, at)
	}
}

// flowState is Flows()'s row of flow.
func flowState(t testing.TB, s Queue, flow string) queue.FlowState {
	t.Helper()
	fs, err := s.Flows(context.Background())
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	for _, f := range fs {
		if f.Flow == flow {
			return f
		}
	}
	t.Fatalf("flow %q not in Flows()", flow)
	return queue.FlowState{}
}

func pauser(t *testing.T, s Queue) queue.Pauser { return capability[queue.Pauser](t, s, "PauseFlow") }

func pruner(t *testing.T, s Queue) queue.Pruner { return capability[queue.Pruner](t, s, "Prune") }

func pause(t testing.TB, p queue.Pauser, flow, reason string, now clock.Tick) {
	t.Helper()
	if err := p.PauseFlow(context.Background(), flow, reason, now); err != nil {
		t.Fatalf("PauseFlow(%q) error = %v", flow, err)
	}
}

func resume(t testing.TB, p queue.Pauser, flow, reason string, now clock.Tick) {
	t.Helper()
	if err := p.ResumeFlow(context.Background(), flow, reason, now); err != nil {
		t.Fatalf("ResumeFlow(%q) error = %v", flow, err)
	}
}

func prune(t testing.TB, p queue.Pruner, now clock.Tick, limit int) queue.PruneResult {
	t.Helper()
	r, err := p.Prune(context.Background(), now, limit)
	if err != nil {
		t.Fatalf("Prune(%d, %d) error = %v", now, limit, err)
	}
	return r
}

func prunable(t testing.TB, p queue.Pruner, now clock.Tick) queue.PruneResult {
	t.Helper()
	r, err := p.Prunable(context.Background(), now)
	if err != nil {
		t.Fatalf("Prunable(%d) error = %v", now, err)
	}
	return r
}

// retention is the default policy with a retention window of r ticks.
func retention(r clock.Tick) queue.Policy {
	p := queue.DefaultPolicy()
	p.Retention = r
	return p
}

// docs/contract.md §7.9: a head scheduled past the enqueue's tick is not
// dispatchable before its NotBefore and blocks only its own flow, as a
// backoff does; NextDue and OldestDue see it; a NotBefore at or below the
// enqueue's tick (or 0) means at once. EnqueueBatch schedules the same way.
func queueLife_7_9_ScheduledHeadBlocksOnlyItsFlow(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	enqueueNB(t, s, "a1", "a", 20, 1)
	enqueueNB(t, s, "b1", "b", 1, 2) // at or below the enqueue's tick: at once
	if e := event(t, s, "a1"); e.State != queue.StatePending || e.AvailableAt != 20 {
		t.Fatalf("scheduled event = %s, want pending, available at 20", jsonOf(e))
	}
	if e := event(t, s, "b1"); e.AvailableAt != 2 {
		t.Fatalf("event not before 1 enqueued at 2 = %s, want available at 2", jsonOf(e))
	}
	ack(t, s, "b1", 3)
	wantNoClaim(t, s, 4)
	wantNextDue(t, s, 20)
	if _, ok, err := s.OldestDue(ctx, 19); err != nil || ok {
		t.Fatalf("OldestDue(19) ok = %v, %v; want no head due", ok, err)
	}
	if at, ok, err := s.OldestDue(ctx, 25); err != nil || !ok || at != 20 {
		t.Fatalf("OldestDue(25) = %d, %v, %v; want 20", at, ok, err)
	}
	enqueue(t, s, "c1", "c", "x", 5) // another flow goes on
	ack(t, s, "c1", 6)
	wantNoClaim(t, s, 19)
	ack(t, s, "a1", 20)

	rs, err := s.EnqueueBatch(ctx, []queue.Event{
		{ID: "d1", Flow: "d", Body: []byte("x"), NotBefore: 40},
		{ID: "e1", Flow: "e", Body: []byte("x")},
	}, 30)
	if err != nil || len(rs) != 2 {
		t.Fatalf("EnqueueBatch() = %v, %v", rs, err)
	}
	if e := event(t, s, "d1"); e.AvailableAt != 40 {
		t.Fatalf("batch-scheduled event = %s, want available at 40", jsonOf(e))
	}
	ack(t, s, "e1", 31)
	wantNoClaim(t, s, 39)
	wantNextDue(t, s, 40)
	wantClaim(t, s, "d1", 40)
}

// docs/contract.md §7.9: a scheduled event behind its flow's head becomes
// dispatchable at max(the ack of the head, its NotBefore).
func queueLife_7_9_ScheduledBehindHeadDispatchableAtMaxAckNotBefore(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s := bk.open(t)
	enqueue(t, s, "a1", "a", "x", 1)
	enqueueNB(t, s, "a2", "a", 30, 1) // the head is acked before 30
	enqueue(t, s, "b1", "b", "x", 1)
	enqueueNB(t, s, "b2", "b", 4, 1) // the head is acked after 4
	ack(t, s, "a1", 2)
	ack(t, s, "b1", 10)
	ack(t, s, "b2", 10) // max(10, 4)
	wantNoClaim(t, s, 29)
	wantNextDue(t, s, 30)
	wantClaim(t, s, "a2", 30) // max(2, 30)
}

// docs/contract.md §7.9: NotBefore is not part of an event's identity: the
// same event again with another NotBefore (or none) is a Duplicate that
// changes nothing but the clock mark.
func queueLife_7_9_NotBeforeNotPartOfIdentity(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	first := enqueueNB(t, s, "a1", "a", 20, 1)
	enqueue(t, s, "b1", "b", "x", 1)
	for i, nb := range []clock.Tick{0, 50, 3} {
		before := snap(t, s)
		now := clock.Tick(2 + i)
		r, err := s.Enqueue(ctx, queue.Event{ID: "a1", Flow: "a", Body: []byte("x"), NotBefore: nb}, now)
		if err != nil || !r.Duplicate || r.Seq != first.Seq {
			t.Fatalf("Enqueue(a1 again, not before %d) = %+v, %v; want the duplicate of seq %d", nb, r, err, first.Seq)
		}
		assertOnlyMark(t, "a duplicate with another NotBefore", before, snap(t, s), now)
		r, err = s.Enqueue(ctx, queue.Event{ID: "b1", Flow: "b", Body: []byte("x"), NotBefore: nb + 100}, now)
		if err != nil || !r.Duplicate {
			t.Fatalf("Enqueue(b1 again, not before %d) = %+v, %v; want a duplicate", nb+100, r, err)
		}
	}
	if e := event(t, s, "a1"); e.AvailableAt != 20 {
		t.Fatalf("a1 after its duplicates = %s, want available at 20 still", jsonOf(e))
	}
	wantClaim(t, s, "b1", 10)
}

// docs/contract.md §7.9: a negative NotBefore is ErrInvalid, and one the
// policy's lease would push past math.MaxInt64 ErrTickOverflow, checked
// before the event's ID is looked up; in Enqueue and in EnqueueBatch
// nothing changes.
func queueLife_7_9_NegativeNotBeforeInvalid(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	enqueue(t, s, "a1", "a", "x", 1)
	before := snap(t, s)
	_, err := s.Enqueue(ctx, queue.Event{ID: "a2", Flow: "a", Body: []byte("x"), NotBefore: -1}, 2)
	wantErr(t, "Enqueue(not before -1)", err, queue.ErrInvalid)
	_, err = s.EnqueueBatch(ctx, []queue.Event{
		{ID: "b1", Flow: "b", Body: []byte("x")},
		{ID: "b2", Flow: "b", Body: []byte("x"), NotBefore: -5},
	}, 2)
	wantErr(t, "EnqueueBatch(not before -5)", err, queue.ErrInvalid)
	_, err = s.Enqueue(ctx, queue.Event{ID: "a2", Flow: "a", Body: []byte("x"), NotBefore: math.MaxInt64 - 1}, 2)
	wantErr(t, "Enqueue(not before MaxInt64-1)", err, queue.ErrTickOverflow)
	_, err = s.EnqueueBatch(ctx, []queue.Event{
		{ID: "b1", Flow: "b", Body: []byte("x")},
		{ID: "b2", Flow: "b", Body: []byte("x"), NotBefore: math.MaxInt64},
	}, 2)
	wantErr(t, "EnqueueBatch(not before MaxInt64)", err, queue.ErrTickOverflow)
	// The NotBefore is checked before the stored event: the same event
	// again, or another event with a stored ID, with a NotBefore past the
	// limit is the same ErrTickOverflow, never Duplicate or ErrConflict.
	for _, e := range []queue.Event{
		{ID: "a1", Flow: "a", Body: []byte("x"), NotBefore: math.MaxInt64},
		{ID: "a1", Flow: "a", Body: []byte("y"), NotBefore: math.MaxInt64},
		{ID: "a1", Flow: "b", Body: []byte("x"), NotBefore: math.MaxInt64},
	} {
		_, err = s.Enqueue(ctx, e, 2)
		wantErr(t, fmt.Sprintf("Enqueue(stored ID, %s, %s, not before MaxInt64)", e.Flow, e.Body), err, queue.ErrTickOverflow)
		_, err = s.EnqueueBatch(ctx, []queue.Event{{ID: "b1", Flow: "b", Body: []byte("x")}, e}, 2)
		wantErr(t, fmt.Sprintf("EnqueueBatch(stored ID, %s, %s, not before MaxInt64)", e.Flow, e.Body), err, queue.ErrTickOverflow)
	}
	assertUnchanged(t, "refused NotBefore", before, snap(t, s))
}

// docs/contract.md §7.9: a paused flow's head is not dispatchable, every
// other flow is untouched; Flows, FlowsPage, Stats and Snapshot show the
// pause while it lasts; NextDue does not count the paused head; a resume
// makes it dispatchable again.
func queuePause_7_9_BlocksClaimsOfThatFlowOnly(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	p := pauser(t, s)
	enqueue(t, s, "a1", "a", "x", 1)
	enqueue(t, s, "b1", "b", "x", 1)
	enqueue(t, s, "b2", "b", "x", 1)
	pause(t, p, "a", "receiver a is down", 2)
	if f := flowState(t, s, "a"); !f.Paused || f.PauseReason != "receiver a is down" || f.HeadSeq != 1 || f.Backlog != 1 || f.ReadyAt != nil {
		t.Fatalf("Flows() row of the paused flow = %s, want paused with the reason and no ready_at", jsonOf(f))
	}
	if f := flowState(t, s, "b"); f.Paused || f.PauseReason != "" {
		t.Fatalf("Flows() row of another flow = %s, want not paused", jsonOf(f))
	}
	if st, err := s.Stats(ctx); err != nil || st.PausedFlows != 1 {
		t.Fatalf("Stats() = %+v, %v; want one paused flow", st, err)
	}
	if sf := flowOf(t, s, "a"); sf.Paused != "receiver a is down" || sf.ReadyAt != nil || sf.Ready {
		t.Fatalf("Snapshot flow a = %s, want paused with the reason, no ready_at, not ready", jsonOf(sf))
	}
	if b, _ := json.Marshal(flowOf(t, s, "b")); strings.Contains(string(b), "paused") {
		t.Fatalf("Snapshot flow b = %s, want no paused field", b)
	}
	if pg, ok := s.(queue.Pager); ok {
		page, err := pg.FlowsPage(ctx, queue.FlowQuery{Sort: queue.SortByBlocked})
		if err != nil || len(page.Flows) != 2 || page.Flows[0].Flow != "a" || !page.Flows[0].Paused {
			t.Fatalf("FlowsPage(blocked first) = %s, %v; want the paused flow a first", jsonOf(page.Flows), err)
		}
	}
	wantClaim(t, s, "b1", 3)
	wantNextDue(t, s, 3+queue.Lease) // b1's lease, not a's paused head
	settle(t, s, "b1", 1, success, 4)
	wantClaim(t, s, "b2", 5)
	wantNoClaim(t, s, 6)
	resume(t, p, "a", "receiver a is back", 7)
	if f := flowState(t, s, "a"); f.Paused || f.PauseReason != "" {
		t.Fatalf("Flows() row after the resume = %s, want not paused", jsonOf(f))
	}
	if st, err := s.Stats(ctx); err != nil || st.PausedFlows != 0 {
		t.Fatalf("Stats() after the resume = %+v, %v; want no paused flow", st, err)
	}
	if sf := flowOf(t, s, "a"); sf.Paused != "" {
		t.Fatalf("Snapshot flow a after the resume = %s", jsonOf(sf))
	}
	wantClaim(t, s, "a1", 7)
}

// docs/contract.md §7.9: a pause of a paused flow (ErrFlowPaused), a resume
// of a flow not paused (ErrFlowNotPaused), an unknown flow (ErrNotFound), an
// empty reason (ErrEmptyReason) and a tick below the mark
// (ErrTimeRegression) change nothing.
func queuePause_7_9_RefusalsChangeNothing(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	p := pauser(t, s)
	enqueue(t, s, "a1", "a", "x", 1)
	enqueue(t, s, "b1", "b", "x", 1)
	pause(t, p, "b", "maintenance", 2)
	before := snap(t, s)
	wantErr(t, "ResumeFlow(not paused)", p.ResumeFlow(ctx, "a", "r", 3), queue.ErrFlowNotPaused)
	wantErr(t, "PauseFlow(paused)", p.PauseFlow(ctx, "b", "again", 3), queue.ErrFlowPaused)
	wantErr(t, "PauseFlow(unknown)", p.PauseFlow(ctx, "zz", "r", 3), queue.ErrNotFound)
	wantErr(t, "ResumeFlow(unknown)", p.ResumeFlow(ctx, "zz", "r", 3), queue.ErrNotFound)
	for _, r := range []string{"", "   "} {
		wantErr(t, "PauseFlow(empty reason)", p.PauseFlow(ctx, "a", r, 3), queue.ErrEmptyReason)
		wantErr(t, "ResumeFlow(empty reason)", p.ResumeFlow(ctx, "b", r, 3), queue.ErrEmptyReason)
	}
	wantErr(t, "PauseFlow(bad flow name)", p.PauseFlow(ctx, "", "r", 3), queue.ErrInvalid)
	wantErr(t, "PauseFlow(past tick)", p.PauseFlow(ctx, "a", "r", 1), queue.ErrTimeRegression)
	wantErr(t, "ResumeFlow(past tick)", p.ResumeFlow(ctx, "b", "r", 1), queue.ErrTimeRegression)
	assertUnchanged(t, "refused PauseFlow/ResumeFlow", before, snap(t, s))
	if all, err := s.AuditAll(ctx); err != nil || len(all) != 1 {
		t.Fatalf("AuditAll() = %s, %v; want the one pause", jsonOf(all), err)
	}
}

// docs/contract.md §7.9: a claim in flight when its flow is paused settles
// as usual (an ack moves the head, a failure schedules the retry), and the
// new head waits for the resume.
func queuePause_7_9_InflightClaimSettles(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s := bk.open(t)
	p := pauser(t, s)
	enqueue(t, s, "a1", "a", "x", 1)
	enqueue(t, s, "a2", "a", "x", 1)
	enqueue(t, s, "b1", "b", "x", 1)
	enqueue(t, s, "b2", "b", "x", 1)
	a1 := wantClaim(t, s, "a1", 2)
	b1 := wantClaim(t, s, "b1", 2)
	pause(t, p, "a", "r", 3)
	pause(t, p, "b", "r", 3)
	if o := settle(t, s, "a1", a1.Generation, success, 4); o != queue.Acked {
		t.Fatalf("Settle(a1) in a paused flow = %q, want acked", o)
	}
	if o := settle(t, s, "b1", b1.Generation, failure("unavailable"), 4); o != queue.RetryScheduled {
		t.Fatalf("Settle(b1 failed) in a paused flow = %q, want retry_scheduled", o)
	}
	if e := event(t, s, "b1"); e.State != queue.StatePending || e.AvailableAt != 4+queue.Backoff(1) {
		t.Fatalf("b1 after its failure = %s", jsonOf(e))
	}
	if f := flowState(t, s, "a"); f.HeadSeq != 2 || !f.Paused {
		t.Fatalf("flow a after the ack = %s, want head 2, paused", jsonOf(f))
	}
	wantNoClaim(t, s, 100)
	wantNextDue(t, s, -1)
	resume(t, p, "b", "r", 101)
	wantClaim(t, s, "b1", 101)
	wantNoClaim(t, s, 101)
	resume(t, p, "a", "r", 102)
	wantClaim(t, s, "a2", 102)
}

// docs/contract.md §7.9: a claim of a paused flow whose lease runs out is not
// claimed again while the flow is paused; its settle is Expired; after the
// resume it is taken over as usual.
func queuePause_7_9_ExpiredClaimNotReclaimedWhilePaused(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s := bk.open(t)
	p := pauser(t, s)
	enqueue(t, s, "a1", "a", "x", 1)
	c := wantClaim(t, s, "a1", 1)
	pause(t, p, "a", "r", 2)
	wantNoClaim(t, s, c.LeaseUntil)
	wantNoClaim(t, s, 50)
	if o := settle(t, s, "a1", c.Generation, success, 50); o != queue.Expired {
		t.Fatalf("Settle(expired claim) = %q, want expired", o)
	}
	if e := event(t, s, "a1"); e.State != queue.StateInflight || e.Generation != c.Generation {
		t.Fatalf("a1 while paused = %s, want still in flight at generation %d", jsonOf(e), c.Generation)
	}
	resume(t, p, "a", "r", 60)
	again := wantClaim(t, s, "a1", 60)
	if again.Generation != c.Generation+1 || again.Attempts != 2 {
		t.Fatalf("take-over after the resume = %s, want generation %d, attempt 2", jsonOf(again), c.Generation+1)
	}
}

// docs/contract.md §7.9: enqueues into a paused flow go on (the sequence
// goes on, a flow whose events were all acked gets a head), and its events
// wait for the resume.
func queuePause_7_9_EnqueueIntoPausedFlow(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s := bk.open(t)
	p := pauser(t, s)
	enqueue(t, s, "a1", "a", "x", 1)
	enqueue(t, s, "b1", "b", "x", 1)
	ack(t, s, "a1", 2)
	pause(t, p, "a", "r", 3) // a has no head now
	pause(t, p, "b", "r", 3)
	if r := enqueue(t, s, "a2", "a", "x", 4); r.Seq != 2 || r.Duplicate {
		t.Fatalf("Enqueue(a2) into a paused flow = %+v, want seq 2", r)
	}
	if r := enqueue(t, s, "b2", "b", "x", 4); r.Seq != 2 {
		t.Fatalf("Enqueue(b2) into a paused flow = %+v, want seq 2", r)
	}
	enqueueNB(t, s, "a3", "a", 6, 4)
	if f := flowState(t, s, "a"); f.HeadSeq != 2 || f.Backlog != 2 || !f.Paused {
		t.Fatalf("flow a = %s, want head 2, backlog 2, paused", jsonOf(f))
	}
	wantNoClaim(t, s, 10)
	resume(t, p, "a", "r", 11)
	ack(t, s, "a2", 11)
	ack(t, s, "a3", 12)
	wantNoClaim(t, s, 13)
	resume(t, p, "b", "r", 14)
	ack(t, s, "b1", 14)
	ack(t, s, "b2", 15)
}

// docs/contract.md §7.9: a pause keeps the flow's served count and weight,
// and its fairness goes on after the resume (under FairRotation too, when
// the backend has it).
func queuePause_7_9_ServedAndWeightKept(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	pols := []queue.Policy{queue.DefaultPolicy()}
	if bk.Rotation {
		rot := queue.DefaultPolicy()
		rot.Fairness = queue.FairRotation
		pols = append(pols, rot)
	}
	for _, pol := range pols {
		s := bk.openPolicy(t, pol)
		p := pauser(t, s)
		for i := 1; i <= 6; i++ {
			enqueue(t, s, "a"+itoa(i), "a", "x", 1)
			enqueue(t, s, "b"+itoa(i), "b", "x", 1)
		}
		if w, ok := s.(queue.Weighter); ok {
			if err := w.SetWeight(ctx, "a", 3, "bigger", 1); err != nil {
				t.Fatalf("SetWeight() error = %v", err)
			}
		}
		// claimFlow claims and acks at now; it returns the claim's flow.
		claimFlow := func(now clock.Tick) string {
			c := mustClaim(t, s, now)
			settle(t, s, c.EventID, c.Generation, success, now)
			return c.Flow
		}
		for claimFlow(2) != "a" {
		}
		before := flowState(t, s, "a")
		pause(t, p, "a", "r", 3)
		for range 3 {
			if f := claimFlow(3); f != "b" {
				t.Fatalf("%s: claim while a is paused picked %s", pol.Fairness, f)
			}
		}
		resume(t, p, "a", "r", 4)
		after := flowState(t, s, "a")
		if after.Served != before.Served || after.Weight != before.Weight || after.LastSeq != before.LastSeq || after.HeadSeq != before.HeadSeq {
			t.Fatalf("%s: flow a before the pause %s, after the resume %s; want served, weight, seq and head kept", pol.Fairness, jsonOf(before), jsonOf(after))
		}
		if pol.Fairness != queue.FairRotation {
			// a has been served less than b since: it is picked next.
			wantClaim(t, s, "a"+itoa(int(before.HeadSeq)), 4)
			continue
		}
		got := false
		for range 2 {
			got = got || claimFlow(4) == "a"
		}
		if !got {
			t.Fatalf("rotation: the resumed flow a was not picked in the two claims after its resume")
		}
	}
}

// docs/contract.md §7.9: PauseFlow and ResumeFlow each write an audit row of
// their kind, with the reason, the tick and FlowChange as the detail; they
// are no redrive rows.
func queuePause_7_9_AuditRows(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	p := pauser(t, s)
	enqueue(t, s, "a1", "a", "x", 1)
	pause(t, p, "a", "receiver down", 2)
	resume(t, p, "a", "receiver up", 5)
	all, err := s.AuditAll(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("AuditAll() = %s, %v; want two rows", jsonOf(all), err)
	}
	detail, _ := json.Marshal(queue.FlowChange{Flow: "a"})
	want := []queue.AuditRecord{
		{ID: all[0].ID, Kind: queue.AuditPause, Reason: "receiver down", Detail: string(detail), At: 2},
		{ID: all[1].ID, Kind: queue.AuditResume, Reason: "receiver up", Detail: string(detail), At: 5},
	}
	if jsonOf(all) != jsonOf(want) || all[0].ID >= all[1].ID {
		t.Fatalf("AuditAll() = %s\nwant %s", jsonOf(all), jsonOf(want))
	}
	if a, err := s.Audit(ctx); err != nil || len(a) != 0 {
		t.Fatalf("Audit() = %s, %v; want no redrive rows", jsonOf(a), err)
	}
	if sn := snap(t, s); jsonOf(sn.OperatorAudit) != jsonOf(all) {
		t.Fatalf("Snapshot().OperatorAudit = %s, want %s", jsonOf(sn.OperatorAudit), jsonOf(all))
	}
	if st, err := s.Stats(ctx); err != nil || st.AuditRows != 2 {
		t.Fatalf("Stats() = %+v, %v; want 2 audit rows", st, err)
	}
}

// docs/contract.md §7.9: Policy.Retention is recorded with the policy
// (reopening keeps it, another one is ErrPolicyMismatch), SetPolicy's audit
// row carries it, a negative one is ErrInvalid, and a policy without one
// writes the bytes it always did.
func queuePolicy_7_9_RetentionRecorded(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	p := retention(100)
	s, loc := bk.openTest(t, withPolicy(p))
	if got, err := s.Policy(ctx); err != nil || got.Retention != 100 {
		t.Fatalf("Policy() = %+v, %v; want retention 100", got, err)
	}
	again, err := bk.openAt(t, loc)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if got, err := again.Policy(ctx); err != nil || !got.Equal(p) {
		t.Fatalf("reopened Policy() = %+v, %v; want %+v", got, err, p)
	}
	if _, err := bk.openAt(t, loc, withPolicy(retention(101))); err == nil {
		t.Fatal("reopen with another retention: no error, want ErrPolicyMismatch")
	} else {
		wantErr(t, "reopen with another retention", err, queue.ErrPolicyMismatch)
	}
	before := snap(t, s)
	wantErr(t, "SetPolicy(negative retention)", s.SetPolicy(ctx, retention(-1), "r", 2), queue.ErrInvalid)
	assertUnchanged(t, "refused SetPolicy", before, snap(t, s))
	if err := s.SetPolicy(ctx, retention(0), "keep everything", 3); err != nil {
		t.Fatalf("SetPolicy(retention 0) error = %v", err)
	}
	if err := s.SetPolicy(ctx, retention(7), "keep a week", 4); err != nil {
		t.Fatalf("SetPolicy(retention 7) error = %v", err)
	}
	all, err := s.AuditAll(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("AuditAll() = %s, %v", jsonOf(all), err)
	}
	var ch queue.PolicyChange
	if err := json.Unmarshal([]byte(all[0].Detail), &ch); err != nil || ch.Old.Retention != 100 || ch.New.Retention != 0 {
		t.Fatalf("first policy audit detail = %s (%v), want retention 100 -> 0", all[0].Detail, err)
	}
	if strings.Count(all[0].Detail, "retention") != 1 {
		t.Fatalf("first policy audit detail = %s, want retention named once (omitted when 0)", all[0].Detail)
	}
	ch = queue.PolicyChange{}
	if err := json.Unmarshal([]byte(all[1].Detail), &ch); err != nil || ch.Old.Retention != 0 || ch.New.Retention != 7 {
		t.Fatalf("second policy audit detail = %s (%v), want retention 0 -> 7", all[1].Detail, err)
	}
	if sn := snap(t, s); sn.Policy == nil || sn.Policy.Retention != 7 {
		t.Fatalf("Snapshot().Policy = %+v, want retention 7", sn.Policy)
	}
}

// docs/contract.md §7.9: with Retention 0 Prune deletes nothing, whatever
// the tick, and Prunable counts nothing; Prune records its tick.
func queuePrune_7_9_RetentionZeroDeletesNothing(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	pr := pruner(t, s)
	enqueue(t, s, "a1", "a", "x", 1)
	ack(t, s, "a1", 2)
	if err := s.SetPolicy(ctx, queue.DefaultPolicy().WithSchedule(1), "r", 3); err != nil {
		t.Fatal(err)
	}
	before := snap(t, s)
	if r := prunable(t, pr, math.MaxInt64/2); r != (queue.PruneResult{}) {
		t.Fatalf("Prunable() = %+v, want nothing", r)
	}
	assertUnchanged(t, "Prunable", before, snap(t, s))
	if r := prune(t, pr, 1_000_000, queue.MaxPruneBatch); r != (queue.PruneResult{}) {
		t.Fatalf("Prune() = %+v, want nothing", r)
	}
	assertOnlyMark(t, "Prune with Retention 0", before, snap(t, s), 1_000_000)
}

// lifePolicy is the policy of the clauses that use lifeSeed: a retention
// window of 10 ticks and a lease long enough that no claim below expires
// while they run.
func lifePolicy() queue.Policy {
	p := retention(10)
	p.Lease = 100_000
	return p
}

// lifeSeed makes, under lifePolicy, an event in each state Prune must tell
// apart: a1 acked at 5 after a failure (a history row), c1 quarantined, b1
// quarantined, redriven at 18 (an audit row) and acked at 25, a2 acked at
// 20, d0 pending and scheduled at 1000 with d1 behind it, e1 in flight. It
// returns the tick after.
func lifeSeed(t *testing.T, s Queue) clock.Tick {
	t.Helper()
	ctx := context.Background()
	enqueue(t, s, "a1", "a", "x", 1)
	if c, o := failAt(t, s, failure("unavailable"), 1); c.EventID != "a1" || o != queue.RetryScheduled {
		t.Fatalf("first claim = %s, %q; want a1 retried", c.EventID, o)
	}
	ack(t, s, "a1", 5)
	enqueue(t, s, "c1", "c", "x", 5)
	quarantineHeadOf(t, s, "c1", 5)
	enqueue(t, s, "b1", "b", "x", 11)
	c, _ := quarantineHeadOf(t, s, "b1", 11)
	if err := s.Redrive(ctx, "b1", c.Generation, "fixed", 18); err != nil {
		t.Fatalf("Redrive(b1) error = %v", err)
	}
	enqueue(t, s, "a2", "a", "x", 18)
	ack(t, s, "a2", 20) // a has been served less than b
	ack(t, s, "b1", 25)
	enqueueNB(t, s, "d0", "d", 1000, 26)
	enqueue(t, s, "d1", "d", "x", 26)
	enqueue(t, s, "e1", "e", "x", 26)
	wantClaim(t, s, "e1", 27)
	return 28
}

// quarantineHeadOf drives id, the only dispatchable head, through its round
// of failures from now, and returns its last claim and the tick after.
func quarantineHeadOf(t testing.TB, s Queue, id string, now clock.Tick) (queue.Claim, clock.Tick) {
	t.Helper()
	var c queue.Claim
	for i := 1; i <= queue.MaxAttempts; i++ {
		c = wantClaim(t, s, id, now)
		settle(t, s, id, c.Generation, failure("broken"), now)
		if i < queue.MaxAttempts {
			now += queue.Backoff(i)
		}
	}
	if e := event(t, s, id); e.State != queue.StateQuarantined {
		t.Fatalf("%s = %s, want quarantined", id, jsonOf(e))
	}
	return c, now
}

// docs/contract.md §7.9: Prune deletes the acked events whose AckedAt is at
// or below now - Retention (with their history) and the audit rows whose
// tick is, and nothing else: never a pending, in-flight or quarantined
// event, nor a younger one.
func queuePrune_7_9_DeletesOnlyAckedOlderThanWindow(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.openPolicy(t, lifePolicy())
	pr := pruner(t, s)
	now := lifeSeed(t, s)
	for id, at := range map[string]clock.Tick{"a1": 5, "a2": 20, "b1": 25} {
		if e := event(t, s, id); e.State != queue.StateAcked || e.AckedAt != at {
			t.Fatalf("%s = %s, want acked at %d", id, jsonOf(e), at)
		}
	}
	for _, id := range []string{"c1", "d0", "d1", "e1"} {
		if e := event(t, s, id); e.AckedAt != 0 {
			t.Fatalf("%s = %s, want AckedAt 0 (not acked)", id, jsonOf(e))
		}
	}
	// At 29 the cut is 19: a1 (acked at 5) only; the redrive row (18) too.
	r := prune(t, pr, now+1, queue.MaxPruneBatch)
	if r != (queue.PruneResult{Events: 1, Audit: 1}) {
		t.Fatalf("Prune(29) = %+v, want 1 event, 1 audit row", r)
	}
	_, err := s.Event(ctx, "a1")
	wantErr(t, "Event(pruned a1)", err, queue.ErrNotFound)
	for _, id := range []string{"a2", "b1", "c1", "d0", "d1", "e1"} {
		event(t, s, id)
	}
	sn := snap(t, s)
	for _, f := range sn.Failures {
		if f.EventID == "a1" {
			t.Fatalf("history of the pruned a1 kept: %s", jsonOf(sn.Failures))
		}
	}
	if len(sn.Audit) != 0 {
		t.Fatalf("redrive audit rows after the prune = %s, want none", jsonOf(sn.Audit))
	}
	// At 30 the cut is 20: a2 (acked at 20, at the cut) goes, b1 (25) stays.
	if r := prune(t, pr, 30, queue.MaxPruneBatch); r != (queue.PruneResult{Events: 1}) {
		t.Fatalf("Prune(30) = %+v, want 1 event", r)
	}
	_, err = s.Event(ctx, "a2")
	wantErr(t, "Event(pruned a2)", err, queue.ErrNotFound)
	if r := prune(t, pr, 1000, queue.MaxPruneBatch); r != (queue.PruneResult{Events: 1}) {
		t.Fatalf("Prune(1000) = %+v, want b1", r)
	}
	want := map[string]string{"c1": queue.StateQuarantined, "d0": queue.StatePending, "d1": queue.StatePending, "e1": queue.StateInflight}
	for id, st := range want {
		if e := event(t, s, id); e.State != st {
			t.Fatalf("%s after every prune = %s, want %s", id, jsonOf(e), st)
		}
	}
	if st, err := s.Stats(ctx); err != nil || st.Events.Acked != 0 || st.Events.Pending != 2 || st.Events.Inflight != 1 || st.Events.Quarantined != 1 {
		t.Fatalf("Stats() after every prune = %+v, %v", st, err)
	}
}

// docs/contract.md §7.9: a Prune deletes at most limit rows of each kind and
// says More when a kind filled its limit; the next batches go on.
func queuePrune_7_9_LimitAndMore(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.openPolicy(t, retention(5))
	pr := pruner(t, s)
	p := pauser(t, s)
	for i := 1; i <= 5; i++ {
		enqueue(t, s, "e"+itoa(i), "f"+itoa(i), "x", 1)
	}
	for i := 1; i <= 5; i++ {
		ack(t, s, "e"+itoa(i), 2)
	}
	pause(t, p, "f1", "r", 3)
	resume(t, p, "f1", "r", 3)
	pause(t, p, "f2", "r", 3)
	before := snap(t, s)
	for _, bad := range []int{0, -1, queue.MaxPruneBatch + 1} {
		_, err := pr.Prune(ctx, 100, bad)
		wantErr(t, "Prune(limit "+itoa(bad)+")", err, queue.ErrInvalid)
	}
	assertUnchanged(t, "refused Prune", before, snap(t, s))
	steps := []queue.PruneResult{
		{Events: 2, Audit: 2, More: true},
		{Events: 2, Audit: 1, More: true},
		{Events: 1},
	}
	for i, want := range steps {
		if got := prune(t, pr, 100, 2); got != want {
			t.Fatalf("Prune(100, 2) #%d = %+v, want %+v", i+1, got, want)
		}
	}
	if got := prune(t, pr, 100, 2); got != (queue.PruneResult{}) {
		t.Fatalf("Prune(100, 2) after all = %+v, want nothing", got)
	}
	if got := prunable(t, pr, 100); got != (queue.PruneResult{}) {
		t.Fatalf("Prunable(100) after all = %+v, want nothing", got)
	}
	if got := flowState(t, s, "f2"); !got.Paused {
		t.Fatalf("flow f2 after its audit row was pruned = %s, want still paused", jsonOf(got))
	}
	// Exactly the limit left: More, then nothing.
	enqueue(t, s, "g1", "g", "x", 101)
	enqueue(t, s, "g2", "g", "x", 101)
	ack(t, s, "g1", 101)
	ack(t, s, "g2", 101)
	if got := prune(t, pr, 200, 2); got != (queue.PruneResult{Events: 2, More: true}) {
		t.Fatalf("Prune(200, 2) of exactly 2 = %+v, want 2 events and More", got)
	}
	if got := prune(t, pr, 200, 2); got != (queue.PruneResult{}) {
		t.Fatalf("Prune(200, 2) after = %+v, want nothing", got)
	}
}

// docs/contract.md §7.9: events acked at the same tick go in byte order of
// their IDs, whatever their enqueue or ack order, so a batch that cuts
// through them deletes the same events on every backend.
func queuePrune_7_9_SameTickInIDOrder(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.openPolicy(t, retention(5))
	pr := pruner(t, s)
	// Enqueued in the reverse of ID order, each the head of its flow.
	for _, id := range []string{"z1", "m1", "a1"} {
		enqueue(t, s, id, "flow-"+id, "x", 1)
	}
	for range 3 {
		c := mustClaim(t, s, 2)
		if o := settle(t, s, c.EventID, c.Generation, success, 2); o != queue.Acked {
			t.Fatalf("Settle(%s) = %q, want acked", c.EventID, o)
		}
	}
	for i, want := range []string{"a1", "m1", "z1"} {
		if got := prune(t, pr, 100, 1); got != (queue.PruneResult{Events: 1, More: true}) {
			t.Fatalf("Prune(100, 1) #%d = %+v, want one event and More", i+1, got)
		}
		_, err := s.Event(ctx, want)
		wantErr(t, "after Prune(100, 1) #"+itoa(i+1)+", pruned in ID order: Event("+want+")", err, queue.ErrNotFound)
	}
}

// docs/contract.md §7.9: an acked event whose redrive audit row is still
// there waits for the batch that deletes that row, so one batch deletes
// the same rows on every backend; the audit rows go oldest first.
func queuePrune_7_9_EventWaitsForItsAuditRow(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.openPolicy(t, retention(5))
	pr := pruner(t, s)
	enqueue(t, s, "p1", "p", "x", 1)
	pause(t, pauser(t, s), "p", "older row", 1)
	enqueue(t, s, "b1", "b", "x", 1)
	c, now := quarantineHeadOf(t, s, "b1", 2)
	if err := s.Redrive(ctx, "b1", c.Generation, "fixed", now); err != nil {
		t.Fatalf("Redrive(b1) error = %v", err)
	}
	ack(t, s, "b1", now)
	at := now + 100
	if got := prunable(t, pr, at); got != (queue.PruneResult{Events: 1, Audit: 2}) {
		t.Fatalf("Prunable(%d) = %+v, want 1 event and 2 audit rows", at, got)
	}
	steps := []queue.PruneResult{
		{Audit: 1, More: true},            // the pause row; b1 waits for its redrive row
		{Events: 1, Audit: 1, More: true}, // the redrive row, then b1
		{},
	}
	for i, want := range steps {
		if got := prune(t, pr, at, 1); got != want {
			t.Fatalf("Prune(%d, 1) #%d = %+v, want %+v", at, i+1, got, want)
		}
		if i == 0 {
			if e := event(t, s, "b1"); e.State != queue.StateAcked {
				t.Fatalf("b1 after the first batch = %s, want still acked", jsonOf(e))
			}
		}
	}
	_, err := s.Event(ctx, "b1")
	wantErr(t, "Event(pruned b1)", err, queue.ErrNotFound)
}

// docs/contract.md §7.9: Prunable changes nothing, not even the clock mark,
// and counts what Prune at the same tick then deletes in all its batches.
func queuePrune_7_9_PrunableMatchesPrune(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	s := bk.openPolicy(t, lifePolicy())
	pr := pruner(t, s)
	now := lifeSeed(t, s)
	for i := range 7 {
		enqueue(t, s, "m"+itoa(i), "m", "x", now)
	}
	for i := range 7 {
		ack(t, s, "m"+itoa(i), now+clock.Tick(i))
	}
	now += 10
	for _, at := range []clock.Tick{now, now + 3, now + 6, now + 1000} {
		before := snap(t, s)
		want := prunable(t, pr, at)
		assertUnchanged(t, "Prunable", before, snap(t, s))
		if want.More {
			t.Fatalf("Prunable(%d) = %+v, want no More", at, want)
		}
		var got queue.PruneResult
		for {
			r := prune(t, pr, at, 2)
			got.Events += r.Events
			got.Audit += r.Audit
			if !r.More {
				break
			}
		}
		if got != want {
			t.Fatalf("Prune(%d) batches deleted %+v, Prunable said %+v", at, got, want)
		}
		if again := prunable(t, pr, at); again != (queue.PruneResult{}) {
			t.Fatalf("Prunable(%d) after the prune = %+v, want nothing", at, again)
		}
	}
}

// docs/contract.md §7.9: after a prune each flow's numbering, served count,
// weight and pause go on as before; a pruned event's ID enqueued again is a
// new event with the flow's next sequence number.
func queuePrune_7_9_NumberingAndServedContinue(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.openPolicy(t, retention(1))
	pr := pruner(t, s)
	p := pauser(t, s)
	enqueue(t, s, "a1", "a", "x", 1)
	enqueue(t, s, "a2", "a", "x", 1)
	enqueue(t, s, "b1", "b", "x", 1)
	if w, ok := s.(queue.Weighter); ok {
		if err := w.SetWeight(ctx, "b", 4, "r", 1); err != nil {
			t.Fatal(err)
		}
	}
	ack(t, s, "a1", 2)
	ack(t, s, "b1", 2)
	ack(t, s, "a2", 2)
	pause(t, p, "b", "r", 2)
	beforeA, beforeB := flowState(t, s, "a"), flowState(t, s, "b")
	if r := prune(t, pr, 10, queue.MaxPruneBatch); r.Events != 3 {
		t.Fatalf("Prune(10) = %+v, want the 3 acked events", r)
	}
	if a, b := flowState(t, s, "a"), flowState(t, s, "b"); jsonOf(a) != jsonOf(beforeA) || jsonOf(b) != jsonOf(beforeB) {
		t.Fatalf("flows after the prune = %s, %s\nwant %s, %s", jsonOf(a), jsonOf(b), jsonOf(beforeA), jsonOf(beforeB))
	}
	if evs, err := s.FlowEvents(ctx, "a"); err != nil || len(evs) != 0 {
		t.Fatalf("FlowEvents(a) after the prune = %s, %v; want none", jsonOf(evs), err)
	}
	r := enqueue(t, s, "a1", "a", "x", 11) // the pruned ID, again
	if r.Duplicate || r.Seq != 3 {
		t.Fatalf("Enqueue(pruned a1 again) = %+v, want a new event with seq 3", r)
	}
	if e := event(t, s, "a1"); e.Seq != 3 || e.State != queue.StatePending || e.Generation != 0 || e.AckedAt != 0 {
		t.Fatalf("the new a1 = %s, want pending seq 3, never claimed", jsonOf(e))
	}
	r = enqueue(t, s, "b1", "a", "y", 11) // a pruned ID in another flow, with another body: no conflict
	if r.Duplicate || r.Seq != 4 {
		t.Fatalf("Enqueue(pruned b1 into a) = %+v, want a new event with seq 4", r)
	}
	c := wantClaim(t, s, "a1", 12)
	if c.Seq != 3 {
		t.Fatalf("claim of the new a1 = %s, want seq 3", jsonOf(c))
	}
	if f := flowState(t, s, "a"); f.Served != beforeA.Served+1 {
		t.Fatalf("flow a served = %d, want %d", f.Served, beforeA.Served+1)
	}
	if r := enqueue(t, s, "b2", "b", "x", 12); r.Seq != 2 {
		t.Fatalf("Enqueue(b2) after the prune = %+v, want seq 2", r)
	}
	wantNoClaim(t, s, 13) // a1 in flight, b still paused
}

// docs/contract.md §7.9: Prune is a write: a tick below the clock mark is
// ErrTimeRegression and changes nothing; its tick is recorded, Prunable's
// is not; a bad limit is ErrInvalid (queue.CheckPruneLimit).
func queuePrune_7_9_ChecksAndRecordsNow(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.openPolicy(t, retention(3))
	pr := pruner(t, s)
	enqueue(t, s, "a1", "a", "x", 1)
	ack(t, s, "a1", 10)
	before := snap(t, s)
	_, err := pr.Prune(ctx, 9, 10)
	wantErr(t, "Prune(past tick)", err, queue.ErrTimeRegression)
	for _, bad := range []int{0, -5, queue.MaxPruneBatch + 1} {
		wantErr(t, "CheckPruneLimit", queue.CheckPruneLimit(bad), queue.ErrInvalid)
		_, err := pr.Prune(ctx, 20, bad)
		wantErr(t, "Prune(bad limit)", err, queue.ErrInvalid)
	}
	for _, ok := range []int{1, queue.DefaultPruneBatch, queue.MaxPruneBatch} {
		if err := queue.CheckPruneLimit(ok); err != nil {
			t.Fatalf("CheckPruneLimit(%d) = %v, want nil", ok, err)
		}
	}
	if r := prunable(t, pr, 12); r != (queue.PruneResult{}) {
		t.Fatalf("Prunable(12) = %+v, want nothing: acked at 10, window 3", r)
	}
	if r := prunable(t, pr, 13); r != (queue.PruneResult{Events: 1}) {
		t.Fatalf("Prunable(13) = %+v, want a1", r)
	}
	assertUnchanged(t, "refused Prune and Prunable", before, snap(t, s))
	if r := prune(t, pr, 12, 10); r != (queue.PruneResult{}) {
		t.Fatalf("Prune(12) = %+v, want nothing", r)
	}
	assertOnlyMark(t, "Prune that deleted nothing", before, snap(t, s), 12)
	if r := prune(t, pr, 13, 1); r != (queue.PruneResult{Events: 1, More: true}) {
		t.Fatalf("Prune(13, 1) = %+v, want a1 and More", r)
	}
	if m := snap(t, s).ClockMark; m != 13 {
		t.Fatalf("clock mark after Prune(13) = %d, want 13", m)
	}
}
