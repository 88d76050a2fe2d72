package queuestore

import (
	"context"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// docs/contract.md §2.4 (1): a generation that differs from the event's is stale and
// changes nothing but the clock mark: an old callback cannot overwrite a
// newer round.
func TestSettle_2_4_1_StaleGeneration(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	old := mustClaim(t, s, 0)
	cur := mustClaim(t, s, Lease) // take-over: generation 2
	for _, r := range []Result{success, failure("unavailable")} {
		before := snap(t, s)
		if o := settle(t, s, "a1", old.Generation, r, Lease+1); o != Stale {
			t.Fatalf("Settle(old generation, %+v) = %q, want stale", r, o)
		}
		assertOnlyMark(t, "stale settle", before, snap(t, s), Lease+1)
	}
	if o := settle(t, s, "a1", cur.Generation+1, success, Lease+1); o != Stale {
		t.Fatalf("Settle(future generation) = %q, want stale", o)
	}
	if o := settle(t, s, "a1", cur.Generation, success, Lease+1); o != Acked {
		t.Fatalf("Settle(current generation) = %q, want acked", o)
	}
}

// docs/contract.md §2.4 (2): an event that is not inflight (acked, quarantined, pending
// for a retry) is stale, even with its current generation.
func TestSettle_2_4_2_NotInflightIsStale(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "q1", "q", "x", 0)
	q, now := quarantineHead(t, s, 0) // q1: quarantined at generation 3
	enqueue(t, s, "a1", "a", "x", now)
	a := mustClaim(t, s, now)
	settle(t, s, a.EventID, a.Generation, success, now) // a1: acked at generation 1
	enqueue(t, s, "b1", "b", "x", now)
	b := mustClaim(t, s, now)
	settle(t, s, b.EventID, b.Generation, failure("unavailable"), now) // b1: pending for a retry
	enqueue(t, s, "d1", "d", "x", now)                                 // d1: pending, never claimed

	for _, tc := range []struct {
		id  string
		gen int64
	}{{"q1", q.Generation}, {"a1", a.Generation}, {"b1", b.Generation}, {"d1", 0}} {
		e := event(t, s, tc.id)
		before := snap(t, s)
		if o := settle(t, s, tc.id, tc.gen, success, now); o != Stale {
			t.Fatalf("Settle(%s, %s, its generation %d) = %q, want stale", tc.id, e.State, tc.gen, o)
		}
		assertOnlyMark(t, "settle of a "+e.State+" event", before, snap(t, s), now)
	}
}

// docs/contract.md §2.4 (3): now >= lease_until is expired even when nobody took the
// event over; nothing but the clock mark changes. The check comes after the
// generation and state checks.
func TestSettle_2_4_3_ExpiredLease(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	c := mustClaim(t, s, 0)
	before := snap(t, s)
	if o := settle(t, s, "a1", c.Generation, success, c.LeaseUntil); o != Expired {
		t.Fatalf("Settle(at lease_until) = %q, want expired", o)
	}
	assertOnlyMark(t, "expired settle", before, snap(t, s), c.LeaseUntil)
	if o := settle(t, s, "a1", c.Generation, failure("gap"), c.LeaseUntil+10); o != Expired {
		t.Fatalf("Settle(failure after lease) = %q, want expired", o)
	}
	if o := settle(t, s, "a1", c.Generation+1, success, c.LeaseUntil+10); o != Stale {
		t.Fatalf("Settle(wrong generation after lease) = %q, want stale (checked first)", o)
	}
	// One tick before the lease ends is still in time.
	s2, _ := openTest(t)
	enqueue(t, s2, "a1", "a", "x", 0)
	c = mustClaim(t, s2, 0)
	if o := settle(t, s2, "a1", c.Generation, success, c.LeaseUntil-1); o != Acked {
		t.Fatalf("Settle(lease_until-1) = %q, want acked", o)
	}
}

// docs/contract.md §2.4 (4): success acks the event; the flow's next event becomes the
// head. The failure reason of an earlier attempt is kept as history.
func TestSettle_2_4_4_SuccessAcks(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "a2", "a", "y", 0)
	c := mustClaim(t, s, 0)
	if o := settle(t, s, "a1", c.Generation, success, 1); o != Acked {
		t.Fatalf("Settle = %q, want acked", o)
	}
	e := event(t, s, "a1")
	if e.State != stateAcked || e.LeaseUntil != 0 || e.Generation != 1 || e.Attempts != 1 {
		t.Fatalf("a1 = %s, want acked, lease 0, generation 1", jsonOf(e))
	}
	f := flowOf(t, s, "a")
	if f.HeadSeq == nil || *f.HeadSeq != 2 {
		t.Fatalf("flow a head = %v, want 2", f.HeadSeq)
	}
	if c := mustClaim(t, s, 1); c.EventID != "a2" {
		t.Fatalf("next claim = %q, want a2", c.EventID)
	}
}

// docs/contract.md §2.4 (5, 6): failures back off 2 then 4 ticks (pending, reason kept),
// and the third failure quarantines with its reason.
func TestSettle_2_4_5_6_BackoffTwoFourThenQuarantine(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	now := clock.Tick(10)
	reasons := []string{"unavailable", "gap", "unsupported_delta"}
	wantWait := []clock.Tick{2, 4}
	for i, reason := range reasons {
		c := mustClaim(t, s, now)
		if c.Attempts != i+1 {
			t.Fatalf("claim %d attempts = %d, want %d", i+1, c.Attempts, i+1)
		}
		o := settle(t, s, "a1", c.Generation, failure(reason), now+1)
		e := event(t, s, "a1")
		if i < 2 {
			if o != RetryScheduled || e.State != statePending || e.AvailableAt != now+1+wantWait[i] || e.Reason != reason || e.LeaseUntil != 0 {
				t.Fatalf("failure %d: outcome %q, event %s; want retry_scheduled, pending at %d, reason %q",
					i+1, o, jsonOf(e), now+1+wantWait[i], reason)
			}
			if _, ok := claim(t, s, e.AvailableAt-1); ok {
				t.Fatalf("failure %d: claimed before available_at %d", i+1, e.AvailableAt)
			}
			now = e.AvailableAt
		} else if o != Quarantined || e.State != stateQuarantined || e.Reason != reason || e.Attempts != MaxAttempts {
			t.Fatalf("failure 3: outcome %q, event %s; want quarantined with reason %q", o, jsonOf(e), reason)
		}
	}
}

// docs/contract.md §2.4: Backoff(k) = min(2 * 2^(k-1), 8).
func TestBackoff_2_4_Values(t *testing.T) {
	t.Parallel()
	for k, want := range map[int]clock.Tick{1: 2, 2: 4, 3: 8, 4: 8, 60: 8} {
		if got := Backoff(k); got != want {
			t.Errorf("Backoff(%d) = %d, want %d", k, got, want)
		}
	}
}

// docs/contract.md §2.4 with the common rules: a failure without a reason, a bad ID, a
// negative generation or an unknown event is an error and changes nothing.
func TestSettle_2_4_BadInputChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	c := mustClaim(t, s, 0)
	before := snap(t, s)
	cases := []struct {
		name    string
		id      string
		gen     int64
		r       Result
		targets []error
	}{
		{"empty reason", "a1", c.Generation, Result{}, []error{ErrInvalid, ErrEmptyReason}},
		{"control char reason", "a1", c.Generation, failure("a\tb"), []error{ErrInvalid}},
		{"long reason", "a1", c.Generation, failure(strings.Repeat("r", MaxReasonLen+1)), []error{ErrInvalid}},
		{"empty id", "", c.Generation, success, []error{ErrInvalid}},
		{"negative generation", "a1", -1, success, []error{ErrInvalid}},
		{"unknown event", "zz", 1, success, []error{ErrNotFound}},
	}
	for _, tc := range cases {
		_, err := s.Settle(context.Background(), tc.id, tc.gen, tc.r, 1)
		wantErr(t, "Settle("+tc.name+")", err, tc.targets...)
		assertUnchanged(t, "Settle("+tc.name+")", before, snap(t, s))
	}
}
