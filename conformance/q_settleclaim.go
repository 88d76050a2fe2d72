package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// settleClaimer is q as a queue.SettleClaimer; the clause is skipped
// without one.
func settleClaimer(t *testing.T, q Queue) queue.SettleClaimer {
	return capability[queue.SettleClaimer](t, q, "SettleClaimBatch")
}

func outcomes(rs []queue.SettleResult) []queue.Outcome {
	out := make([]queue.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

// errText renders the items' errors for comparison: their text and the
// sentinels they wrap are what callers see.
func errText(rs []queue.SettleResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		if r.Err != nil {
			out[i] = r.Err.Error()
		}
	}
	return out
}

// SettleClaimBatch_TwinOfSettleBatchThenClaimBatch: on twin stores, for
// both fairness orders, SettleClaimBatch gives what SettleBatch followed by
// ClaimBatch at the same tick give — the same outcomes and item errors, the
// same claims (order, tickets, generations, attempts, leases) — and leaves
// the same snapshot, on random states with acks, retries, quarantines,
// take-overs of expired leases, stale and unknown items, invalid items,
// weights, and n from 0 (settle only) up.
func queueSettleClaimBatch_TwinOfSettleBatchThenClaimBatch(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	seeds := uint64(bk.twinSeeds(12))
	fairs := []queue.Fairness{queue.FairMinServed}
	if bk.Rotation {
		fairs = append(fairs, queue.FairRotation)
	}
	for _, fair := range fairs {
		for seed := range seeds {
			p := queue.DefaultPolicy()
			p.Fairness = fair
			p.MaxAttempts = 2
			p.Lease = 4
			both, single := bk.openPolicy(t, p), bk.openPolicy(t, p)
			sc := settleClaimer(t, both)
			rng := rand.New(rand.NewPCG(seed, 7))
			var held []queue.Claim // claims handed out so far (some settled, some expired)
			now := clock.Tick(1)
			nEvents := 0
			for round := range 30 {
				where := fmt.Sprintf("%s seed %d round %d", fair, seed, round)
				// New events on both, some flows with a weight.
				for range rng.IntN(4) {
					e := queue.Event{
						ID:   fmt.Sprintf("e%d", nEvents),
						Flow: fmt.Sprintf("f%d", rng.IntN(6)),
						Body: []byte(fmt.Sprintf("b%d", nEvents)),
					}
					if rng.IntN(4) == 0 {
						e.Weight = 1 + rng.IntN(3)
					}
					nEvents++
					for _, s := range []Queue{both, single} {
						if _, err := s.Enqueue(ctx, e, now); err != nil {
							t.Fatalf("%s: Enqueue(%s): %v", where, e.ID, err)
						}
					}
				}
				var items []queue.SettleItem
				for range rng.IntN(6) {
					switch r := rng.IntN(12); {
					case r == 0:
						items = append(items, queue.SettleItem{EventID: "", Generation: 1, Result: success}) // invalid ID
					case r == 1:
						items = append(items, queue.SettleItem{EventID: "nobody", Generation: 1, Result: success}) // not found
					case r == 2:
						items = append(items, queue.SettleItem{EventID: "e0", Generation: 1, Result: queue.Result{}}) // no reason
					case len(held) > 0:
						c := held[rng.IntN(len(held))]
						res := success
						if rng.IntN(3) == 0 {
							res = failure("unavailable")
						}
						gen := c.Generation
						if rng.IntN(8) == 0 {
							gen++ // stale
						}
						items = append(items, queue.SettleItem{EventID: c.EventID, Generation: gen, Result: res})
					}
				}
				n := rng.IntN(5)
				if b, s := snap(t, both), snap(t, single); !reflect.DeepEqual(b, s) {
					t.Fatalf("%s: stores differ before the call", where)
				}
				gotR, gotC, err := sc.SettleClaimBatch(ctx, items, now, n)
				if err != nil {
					t.Fatalf("%s: SettleClaimBatch: %v", where, err)
				}
				wantR, err := single.SettleBatch(ctx, items, now)
				if err != nil {
					t.Fatalf("%s: SettleBatch: %v", where, err)
				}
				var wantC []queue.Claim
				if n > 0 {
					if wantC, err = single.ClaimBatch(ctx, now, n); err != nil {
						t.Fatalf("%s: ClaimBatch: %v", where, err)
					}
				}
				if !reflect.DeepEqual(outcomes(gotR), outcomes(wantR)) || !reflect.DeepEqual(errText(gotR), errText(wantR)) {
					t.Fatalf("%s: results %v %q, SettleBatch %v %q", where, outcomes(gotR), errText(gotR), outcomes(wantR), errText(wantR))
				}
				for i, r := range gotR {
					if (r.Err != nil) != (wantR[i].Err != nil) || r.Err != nil && errors.Is(wantR[i].Err, queue.ErrInvalid) != errors.Is(r.Err, queue.ErrInvalid) {
						t.Fatalf("%s: item %d error %v, SettleBatch %v", where, i, r.Err, wantR[i].Err)
					}
				}
				if jsonOf(gotC) != jsonOf(wantC) {
					t.Fatalf("%s: claims %s\nClaimBatch %s", where, jsonOf(gotC), jsonOf(wantC))
				}
				if b, s := snap(t, both), snap(t, single); !reflect.DeepEqual(b, s) {
					t.Fatalf("%s: snapshots differ:\nSettleClaimBatch %s\nSettleBatch+ClaimBatch %s", where, jsonOf(b), jsonOf(s))
				}
				held = append(held, gotC...)
				if len(held) > 12 {
					held = held[len(held)-12:]
				}
				now += clock.Tick(rng.IntN(3)) // sometimes the same tick, sometimes past a lease or backoff
			}
		}
	}
}

// SettleClaimBatch_ClaimSeesTheSettle: a flow whose head is acked hands out
// its next event in the same call, and n bounds the claims.
func queueSettleClaimBatch_ClaimSeesTheSettle(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	sc := settleClaimer(t, s)
	for _, id := range []string{"a1", "a2", "a3"} {
		enqueue(t, s, id, "a", "x", 0)
	}
	enqueue(t, s, "b1", "b", "x", 0)
	c := mustClaim(t, s, 0) // a1
	rs, cs, err := sc.SettleClaimBatch(ctx, []queue.SettleItem{{EventID: c.EventID, Generation: c.Generation, Result: success}}, 1, 1)
	if err != nil {
		t.Fatalf("SettleClaimBatch() error = %v", err)
	}
	if len(rs) != 1 || rs[0].Outcome != queue.Acked || rs[0].Err != nil {
		t.Fatalf("SettleClaimBatch() results = %+v, want one Acked", rs)
	}
	// b (served 0) comes before a (served 1); n = 1 stops there.
	if len(cs) != 1 || cs[0].EventID != "b1" || cs[0].Ticket != 2 {
		t.Fatalf("SettleClaimBatch() claims = %s, want b1 with ticket 2", jsonOf(cs))
	}
	_, cs, err = sc.SettleClaimBatch(ctx, nil, 1, 5)
	if err != nil || len(cs) != 1 || cs[0].EventID != "a2" {
		t.Fatalf("SettleClaimBatch(no items, 5) = %s, %v; want a2 only (b's head is in flight)", jsonOf(cs), err)
	}
}

// SettleClaimBatch_SettleOnly: n = 0 settles and claims nothing, even with
// dispatchable heads; it records now, as SettleBatch does.
func queueSettleClaimBatch_SettleOnly(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	sc := settleClaimer(t, s)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "a2", "a", "x", 0)
	enqueue(t, s, "b1", "b", "x", 0)
	c := mustClaim(t, s, 0)
	rs, cs, err := sc.SettleClaimBatch(ctx, []queue.SettleItem{{EventID: c.EventID, Generation: c.Generation, Result: success}}, 2, 0)
	if err != nil || len(cs) != 0 || len(rs) != 1 || rs[0].Outcome != queue.Acked {
		t.Fatalf("SettleClaimBatch(n=0) = %+v, %s, %v; want Acked and no claim", rs, jsonOf(cs), err)
	}
	if sn := snap(t, s); sn.ClockMark != 2 {
		t.Fatalf("clock mark = %d, want 2", sn.ClockMark)
	}
	if e := event(t, s, "b1"); e.State != queue.StatePending {
		t.Fatalf("b1 state = %q, want pending (nothing claimed)", e.State)
	}
}

// SettleClaimBatch_RefusedWholeChangesNothing: a negative n (ErrInvalid),
// a time regression, and a failure in the claim part after the settles
// were written (the context cancelled by the settle's hook) each refuse
// the whole call: no item is settled, nothing is claimed, the store is
// unchanged. A bad item alone is not refused whole: it gets its own Err,
// as in SettleBatch, and changes nothing of its own.
func queueSettleClaimBatch_RefusedWholeChangesNothing(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	armed := false // the hook runs in the calling goroutine
	s, _ := bk.openTest(t, withHook(func(p queue.HookPoint) {
		if armed && p == queue.HookSettleBeforeCommit {
			cancel()
		}
	}))
	sc := settleClaimer(t, s)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "b1", "b", "x", 0)
	c := mustClaim(t, s, 5)
	ok := []queue.SettleItem{{EventID: c.EventID, Generation: c.Generation, Result: success}}

	before := snap(t, s)
	_, _, err := sc.SettleClaimBatch(ctx, ok, 5, -1)
	wantErr(t, "SettleClaimBatch(n=-1)", err, queue.ErrInvalid)
	assertUnchanged(t, "SettleClaimBatch(n=-1)", before, snap(t, s))

	_, _, err = sc.SettleClaimBatch(ctx, ok, 4, 3)
	wantErr(t, "SettleClaimBatch(time regression)", err, queue.ErrTimeRegression)
	assertUnchanged(t, "SettleClaimBatch(time regression)", before, snap(t, s))

	armed = true
	_, _, err = sc.SettleClaimBatch(ctx, ok, 6, 3)
	armed = false
	wantErr(t, "SettleClaimBatch(cancelled after the settle)", err, context.Canceled)
	assertUnchanged(t, "SettleClaimBatch(cancelled after the settle)", before, snap(t, s))

	bad := append([]queue.SettleItem{{EventID: "", Generation: 1, Result: success}}, ok...)
	rs, cs, err := sc.SettleClaimBatch(context.Background(), bad, 6, 3)
	if err != nil {
		t.Fatalf("SettleClaimBatch(bad item) error = %v", err)
	}
	wantErr(t, "SettleClaimBatch bad item", rs[0].Err, queue.ErrInvalid)
	if rs[1].Outcome != queue.Acked || len(cs) != 1 || cs[0].EventID != "b1" {
		t.Fatalf("SettleClaimBatch(bad item) = %+v, %s; want the good item Acked and b1 claimed", rs, jsonOf(cs))
	}
}
