package queuestore

import (
	"context"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/fairness"
)

// docs/contract.md §2.2: an inflight head with a live lease blocks the later events of
// its flow, and never another flow.
func TestHeads_2_2_InflightHeadBlocksOnlyItsFlow(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "a2", "a", "x", 0)
	enqueue(t, s, "b1", "b", "x", 0)
	if c := mustClaim(t, s, 0); c.EventID != "a1" {
		t.Fatalf("first claim = %q, want a1", c.EventID)
	}
	if c := mustClaim(t, s, 1); c.EventID != "b1" {
		t.Fatalf("second claim = %q, want b1 (a2 is blocked by a1)", c.EventID)
	}
	if c, ok := claim(t, s, 4); ok {
		t.Fatalf("third claim = %q, want none: a1's lease runs to 5", c.EventID)
	}
}

// docs/contract.md §2.2: a pending head whose backoff has not elapsed blocks its flow
// until available_at, and never another flow.
func TestHeads_2_2_BackoffHeadBlocksOnlyItsFlow(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "a2", "a", "x", 0)
	c := mustClaim(t, s, 0)
	if o := settle(t, s, c.EventID, c.Generation, failure("unavailable"), 1); o != RetryScheduled {
		t.Fatalf("Settle(failure) = %q, want %q", o, RetryScheduled)
	}
	if c, ok := claim(t, s, 2); ok {
		t.Fatalf("Claim(2) = %q, want none: a1 waits until 3 and blocks a2", c.EventID)
	}
	enqueue(t, s, "b1", "b", "x", 2)
	if c := mustClaim(t, s, 2); c.EventID != "b1" {
		t.Fatalf("Claim(2) = %q, want b1", c.EventID)
	}
	if c := mustClaim(t, s, 3); c.EventID != "a1" || c.Attempts != 2 {
		t.Fatalf("Claim(3) = %q attempts %d, want a1 attempts 2", c.EventID, c.Attempts)
	}
}

// docs/contract.md §2.2: a quarantined head blocks its flow for good (until a redrive),
// and never another flow.
func TestHeads_2_2_QuarantinedHeadBlocksOnlyItsFlow(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "a2", "a", "x", 0)
	_, now := quarantineHead(t, s, 0)
	enqueue(t, s, "b1", "b", "x", now)
	c := mustClaim(t, s, now+100)
	if c.EventID != "b1" {
		t.Fatalf("Claim = %q, want b1", c.EventID)
	}
	settle(t, s, c.EventID, c.Generation, success, now+100)
	if c, ok := claim(t, s, now+1000); ok {
		t.Fatalf("Claim = %q, want none: a2 is behind quarantined a1", c.EventID)
	}
}

// docs/contract.md §2.2: the head is the lowest event that is not acked; acking it makes
// the next one the head.
func TestHeads_2_2_AckMakesNextEventHead(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	for i := 1; i <= 3; i++ {
		enqueue(t, s, fmt.Sprintf("a%d", i), "a", "x", 0)
	}
	for i := 1; i <= 3; i++ {
		c := mustClaim(t, s, clock.Tick(i))
		if want := fmt.Sprintf("a%d", i); c.EventID != want || c.Seq != int64(i) {
			t.Fatalf("claim %d = %q seq %d, want %q seq %d", i, c.EventID, c.Seq, want, i)
		}
		if o := settle(t, s, c.EventID, c.Generation, success, clock.Tick(i)); o != Acked {
			t.Fatalf("Settle = %q, want acked", o)
		}
	}
	if f := flowOf(t, s, "a"); f.HeadSeq != nil || f.ReadyAt != nil || f.Ready {
		t.Fatalf("flow a after all acked = %s, want no head", jsonOf(f))
	}
	enqueue(t, s, "a4", "a", "x", 5)
	if c := mustClaim(t, s, 5); c.EventID != "a4" {
		t.Fatalf("Claim after a new event = %q, want a4", c.EventID)
	}
}

// docs/contract.md §2.3: false when nothing is dispatchable; the tick is still recorded.
func TestClaim_2_3_NothingDispatchable(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	if _, ok := claim(t, s, 3); ok {
		t.Fatalf("Claim on an empty store ok = true, want false")
	}
	if got := snap(t, s).ClockMark; got != 3 {
		t.Fatalf("clock mark = %d, want 3", got)
	}
}

// docs/contract.md §2.3: a claim picks the smallest served, ties to the smallest flow ID
// in byte order, exactly as fairness.MinServed does.
func TestClaim_2_3_OrderIsMinServed(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	// Flow names chosen so that byte order differs from case-insensitive or
	// length order: "B" < "a" < "a b" < "ab" < "é".
	flows := []string{"é", "ab", "a b", "a", "B"}
	served := map[string]int64{}
	backlog := map[string]int64{}
	now := clock.Tick(0)
	total := 0
	// Uneven backlogs: flow i has i+1 events, so flows drop out over time.
	for i, f := range flows {
		for k := 0; k <= i; k++ {
			enqueue(t, s, fmt.Sprintf("%s-%d", f, k), f, "x", now)
			backlog[f]++
			total++
		}
	}
	for step := 0; step < total; step++ {
		var cands []fairness.Candidate
		for _, f := range flows {
			if served[f] < backlog[f] {
				cands = append(cands, fairness.Candidate{Flow: f, Served: served[f]})
			}
		}
		i, _ := fairness.MinServed.Select(cands)
		want := cands[i].Flow
		c := mustClaim(t, s, now)
		if c.Flow != want {
			t.Fatalf("step %d: Claim flow = %q, want %q (MinServed over %v)", step, c.Flow, want, cands)
		}
		served[c.Flow]++
		if o := settle(t, s, c.EventID, c.Generation, success, now); o != Acked {
			t.Fatalf("Settle = %q, want acked", o)
		}
	}
}

// docs/contract.md §2.3: served decides before flow ID: a flow served less goes first
// even with a larger ID.
func TestClaim_2_3_LeastServedBeforeSmallerID(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "a2", "a", "x", 0)
	c := mustClaim(t, s, 0)
	settle(t, s, c.EventID, c.Generation, success, 0)
	enqueue(t, s, "z1", "z", "x", 0)
	if c := mustClaim(t, s, 0); c.Flow != "z" {
		t.Fatalf("Claim flow = %q, want z (served 0 < a's 1)", c.Flow)
	}
}

// docs/contract.md §2.3: in the same transaction the ticket, served, generation,
// attempts and lifetime attempts grow by one, the event is inflight leased
// until now + Lease, and the ticket is recorded on the event.
func TestClaim_2_3_Bookkeeping(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", `{"delta": 3}`, 0)
	enqueue(t, s, "b1", "b", `{"delta": 4}`, 0)
	c1 := mustClaim(t, s, 2)
	want := Claim{EventID: "a1", Flow: "a", Seq: 1, Body: []byte(`{"delta": 3}`), Generation: 1, Attempts: 1, Ticket: 1, LeaseUntil: 2 + Lease}
	if jsonOf(c1) != jsonOf(want) {
		t.Fatalf("Claim() = %s, want %s", jsonOf(c1), jsonOf(want))
	}
	c2 := mustClaim(t, s, 3)
	if c2.EventID != "b1" || c2.Ticket != 2 || c2.LeaseUntil != 3+Lease {
		t.Fatalf("second Claim() = %s, want b1 ticket 2 lease %d", jsonOf(c2), 3+Lease)
	}
	sn := snap(t, s)
	if sn.Ticket != 2 {
		t.Fatalf("store ticket = %d, want 2", sn.Ticket)
	}
	e := sn.Events[0]
	if e.ID != "a1" || e.State != stateInflight || e.Generation != 1 || e.Attempts != 1 || e.LifetimeAttempts != 1 ||
		e.LeaseUntil != 7 || e.Ticket != 1 {
		t.Fatalf("event a1 = %s, want inflight gen 1 attempts 1 lifetime 1 lease 7 ticket 1", jsonOf(e))
	}
	if f := sn.Flows[0]; f.Served != 1 {
		t.Fatalf("flow a served = %d, want 1", f.Served)
	}
}

// docs/contract.md §2.3: an inflight head whose lease has expired (now >= lease_until)
// is dispatchable again: a take-over, which counts as a new attempt.
func TestClaim_2_3_TakeOverAfterLease(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	mustClaim(t, s, 0)
	if c, ok := claim(t, s, Lease-1); ok {
		t.Fatalf("Claim(%d) = %q, want none: the lease is live", Lease-1, c.EventID)
	}
	c := mustClaim(t, s, Lease)
	if c.EventID != "a1" || c.Generation != 2 || c.Attempts != 2 || c.Ticket != 2 || c.LeaseUntil != 2*Lease {
		t.Fatalf("take-over = %s, want a1 gen 2 attempts 2 ticket 2 lease %d", jsonOf(c), 2*Lease)
	}
	if f := flowOf(t, s, "a"); f.Served != 2 {
		t.Fatalf("served = %d, want 2", f.Served)
	}
}

// docs/contract.md §2.3: a claim is an opportunity spent: a failure still consumed
// served and one attempt.
func TestClaim_2_3_FailureStillConsumesServedAndAttempt(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	c := mustClaim(t, s, 0)
	settle(t, s, c.EventID, c.Generation, failure("unavailable"), 0)
	if f := flowOf(t, s, "a"); f.Served != 1 {
		t.Fatalf("served after a failure = %d, want 1", f.Served)
	}
	if e := event(t, s, "a1"); e.Attempts != 1 || e.LifetimeAttempts != 1 {
		t.Fatalf("attempts after a failure = %d/%d, want 1/1", e.Attempts, e.LifetimeAttempts)
	}
}

// docs/contract.md §2.3: a take-over of an event that used its whole round is not
// claimed: it is quarantined with reason lease_expired (served, ticket and
// generation unchanged) and the same claim picks another flow.
func TestClaim_2_3_LastAttemptTakeOverQuarantinesAndPicksOn(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "a2", "a", "x", 0)
	var now clock.Tick
	var last Claim
	for i := 1; i <= MaxAttempts; i++ {
		last = mustClaim(t, s, now)
		if last.EventID != "a1" || last.Attempts != i {
			t.Fatalf("claim %d = %q attempts %d, want a1 attempts %d", i, last.EventID, last.Attempts, i)
		}
		now = last.LeaseUntil // let it expire
	}
	// b has been served more than a so that a would be picked first.
	enqueue(t, s, "b1", "b", "x", now)
	for i := 0; i < 4; i++ {
		enqueue(t, s, fmt.Sprintf("b-extra-%d", i), "b", "x", now)
	}
	// Serve b up to 3 before a's lease is looked at... a has served 3; give
	// b served 3 too, then b's ID is larger, so a is picked first.
	for i := 0; i < 3; i++ {
		c := mustClaim(t, s, now)
		if c.Flow != "b" {
			t.Fatalf("warm-up claim %d = %q, want flow b (served less than a)", i, c.EventID)
		}
		settle(t, s, c.EventID, c.Generation, success, now)
	}
	before := snap(t, s)
	c := mustClaim(t, s, now)
	if c.Flow != "b" || c.Ticket != before.Ticket+1 {
		t.Fatalf("Claim = %s, want flow b with ticket %d after quarantining a1", jsonOf(c), before.Ticket+1)
	}
	e := event(t, s, "a1")
	if e.State != stateQuarantined || e.Reason != ReasonLeaseExpired || e.Generation != last.Generation ||
		e.Attempts != MaxAttempts || e.LifetimeAttempts != MaxAttempts || e.LeaseUntil != 0 {
		t.Fatalf("a1 = %s, want quarantined lease_expired gen %d attempts 3", jsonOf(e), last.Generation)
	}
	fa := flowOf(t, s, "a")
	if fa.Served != 3 {
		t.Fatalf("flow a served = %d, want 3 (unchanged)", fa.Served)
	}
	if e := event(t, s, "a2"); e.State != statePending || e.Generation != 0 {
		t.Fatalf("a2 = %s, want pending, never claimed", jsonOf(e))
	}
	// The ticket went up by exactly one: the quarantine took none.
	if got := snap(t, s).Ticket; got != before.Ticket+1 {
		t.Fatalf("ticket = %d, want %d", got, before.Ticket+1)
	}
}

// docs/contract.md §2.3: a used-up take-over found with nothing else to claim is still
// quarantined, and the claim returns false.
func TestClaim_2_3_LastAttemptTakeOverAlone(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	var now clock.Tick
	for i := 1; i <= MaxAttempts; i++ {
		now = mustClaim(t, s, now).LeaseUntil
	}
	if c, ok := claim(t, s, now); ok {
		t.Fatalf("Claim = %s, want none", jsonOf(c))
	}
	if e := event(t, s, "a1"); e.State != stateQuarantined || e.Reason != ReasonLeaseExpired {
		t.Fatalf("a1 = %s, want quarantined lease_expired", jsonOf(e))
	}
	if sn := snap(t, s); sn.Ticket != MaxAttempts || sn.Flows[0].Served != MaxAttempts {
		t.Fatalf("ticket/served = %d/%d, want %d/%d", sn.Ticket, sn.Flows[0].Served, MaxAttempts, MaxAttempts)
	}
}

// ClaimBatch rejects n < 1 and changes nothing.
func TestClaimBatch_InvalidN(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	before := snap(t, s)
	for _, n := range []int{0, -1} {
		_, err := s.ClaimBatch(context.Background(), 1, n)
		wantErr(t, fmt.Sprintf("ClaimBatch(n=%d)", n), err, ErrInvalid)
	}
	assertUnchanged(t, "ClaimBatch(bad n)", before, snap(t, s))
}
