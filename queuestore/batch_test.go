package queuestore

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// Batches: ClaimBatch hands out up to n heads of n different flows in
// MinServed order, with the tickets, served counts, generations and leases
// of n successive claims (the randomized twin test checks the equality on
// random states; this one pins a concrete case).
func TestClaimBatch_DifferentFlowsInMinServedOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	batch, _ := openTest(t)
	single, _ := openTest(t)
	for _, s := range []*Store{batch, single} {
		for _, f := range []string{"c", "a", "b"} {
			for k := 1; k <= 2; k++ {
				enqueue(t, s, fmt.Sprintf("%s%d", f, k), f, "x", 0)
			}
		}
		// The first claim serves a (served 0, smallest ID): a1 is acked.
		c := mustClaim(t, s, 0)
		settle(t, s, c.EventID, c.Generation, success, 0)
	}
	got, err := batch.ClaimBatch(ctx, 1, 5)
	if err != nil {
		t.Fatalf("ClaimBatch() error = %v", err)
	}
	var want []Claim
	for {
		c, ok := claim(t, single, 1)
		if !ok {
			break
		}
		want = append(want, c)
	}
	if jsonOf(got) != jsonOf(want) {
		t.Fatalf("ClaimBatch() = %s\nsuccessive Claim = %s", jsonOf(got), jsonOf(want))
	}
	var order []string
	for _, c := range got {
		order = append(order, c.EventID)
	}
	// b and c have served 0, a has served 1 (its head is now a2).
	if fmt.Sprint(order) != "[b1 c1 a2]" {
		t.Fatalf("ClaimBatch order = %v, want [b1 c1 a2] (served 0 by flow ID, then a)", order)
	}
	if !reflect.DeepEqual(snap(t, batch), snap(t, single)) {
		t.Fatalf("stores differ after ClaimBatch and successive Claim:\n%s\n%s", jsonOf(snap(t, batch)), jsonOf(snap(t, single)))
	}
	if more, err := batch.ClaimBatch(ctx, 1, 3); err != nil || len(more) != 0 {
		t.Fatalf("ClaimBatch() with every head in flight = %v, %v; want none", more, err)
	}
}

// Batches: SettleBatch gives each item the outcome Settle would give, in
// order; bad items get their own error without failing the others; a time
// regression refuses the whole batch.
func TestSettleBatch_EachItemAsSettle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	for _, f := range []string{"a", "b", "c", "d"} {
		enqueue(t, s, f+"1", f, "x", 0)
	}
	cs, err := s.ClaimBatch(ctx, 0, 4)
	if err != nil || len(cs) != 4 {
		t.Fatalf("ClaimBatch() = %d claims, %v; want 4", len(cs), err)
	}
	gen := map[string]int64{}
	for _, c := range cs {
		gen[c.EventID] = c.Generation
	}
	items := []SettleItem{
		{EventID: "a1", Generation: gen["a1"], Result: success},
		{EventID: "b1", Generation: gen["b1"], Result: failure("unavailable")},
		{EventID: "zz", Generation: 1, Result: success},                // unknown
		{EventID: "c1", Generation: gen["c1"], Result: Result{}},       // no reason
		{EventID: "c1", Generation: gen["c1"] + 1, Result: success},    // stale
		{EventID: "a1", Generation: gen["a1"], Result: success},        // already acked above: stale
		{EventID: "d1", Generation: gen["d1"], Result: failure("gap")}, // retry
	}
	before := snap(t, s)
	_, err = s.SettleBatch(ctx, items, -1)
	wantErr(t, "SettleBatch at a past tick", err, ErrTimeRegression)
	assertUnchanged(t, "SettleBatch at a past tick", before, snap(t, s))

	got, err := s.SettleBatch(ctx, items, 2)
	if err != nil {
		t.Fatalf("SettleBatch() error = %v", err)
	}
	want := []Outcome{Acked, RetryScheduled, "", "", Stale, Stale, RetryScheduled}
	for i, r := range got {
		if r.Outcome != want[i] {
			t.Fatalf("item %d outcome = %q (err %v), want %q", i, r.Outcome, r.Err, want[i])
		}
	}
	wantErr(t, "item 2 (unknown)", got[2].Err, ErrNotFound)
	wantErr(t, "item 3 (no reason)", got[3].Err, ErrInvalid, ErrEmptyReason)
	for _, i := range []int{0, 1, 4, 5, 6} {
		if got[i].Err != nil {
			t.Fatalf("item %d err = %v, want nil", i, got[i].Err)
		}
	}
	if e := event(t, s, "c1"); e.State != stateInflight {
		t.Fatalf("c1 = %s, want still inflight (its items were bad or stale)", jsonOf(e))
	}
	if e := event(t, s, "d1"); e.State != statePending || e.AvailableAt != 4 || e.Reason != "gap" {
		t.Fatalf("d1 = %s, want pending at 4 with reason gap", jsonOf(e))
	}
	if m := snap(t, s).ClockMark; m != 2 {
		t.Fatalf("clock mark = %d, want 2", m)
	}
}

// Batches: SettleBatch calls the settle hook once, before its commit, and
// only when an item changed an event.
func TestSettleBatch_HookOnlyWhenSomethingChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var calls []HookPoint
	s, _ := openTest(t, WithHook(func(p HookPoint) { calls = append(calls, p) }))
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "b1", "b", "x", 0)
	cs, err := s.ClaimBatch(ctx, 0, 2)
	if err != nil || len(cs) != 2 {
		t.Fatalf("ClaimBatch() = %v, %v", cs, err)
	}
	calls = nil
	if _, err := s.SettleBatch(ctx, []SettleItem{{EventID: "a1", Generation: 9, Result: success}}, 0); err != nil {
		t.Fatalf("SettleBatch(stale) error = %v", err)
	}
	if len(calls) != 0 {
		t.Fatalf("hook calls for an all-stale batch = %v, want none", calls)
	}
	items := []SettleItem{{EventID: "a1", Generation: cs[0].Generation, Result: success}, {EventID: "b1", Generation: cs[1].Generation, Result: success}}
	if _, err := s.SettleBatch(ctx, items, 0); err != nil {
		t.Fatalf("SettleBatch() error = %v", err)
	}
	if !reflect.DeepEqual(calls, []HookPoint{HookSettleBeforeCommit}) {
		t.Fatalf("hook calls = %v, want one %s", calls, HookSettleBeforeCommit)
	}
}

// docs/contract.md §2.3: when the first heads ClaimBatch reads are used-up
// take-overs, it quarantines them (lease_expired) and reads further heads
// until it has n claims, exactly as successive Claims would. Five flows are
// claimed three times each; a and b never settle (their last lease
// expires), c, d and e ack each claim. All have served 3, so a batch of 3
// reads a, b (quarantined), c, and must read again for d and e.
func TestClaimBatch_ReadsPastUsedUpTakeOvers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	batch, _ := openTest(t)
	single, _ := openTest(t)
	var now clock.Tick
	for _, s := range []*Store{batch, single} {
		for _, f := range []string{"a", "b", "c", "d", "e"} {
			for k := 1; k <= 4; k++ {
				enqueue(t, s, fmt.Sprintf("%s%d", f, k), f, "x", 0)
			}
		}
		now = 0
		for range MaxAttempts {
			var cs []Claim
			for range 5 {
				cs = append(cs, mustClaim(t, s, now))
			}
			for _, c := range cs {
				if c.Flow != "a" && c.Flow != "b" {
					settle(t, s, c.EventID, c.Generation, success, now)
				}
			}
			now += Lease
		}
	}
	got, err := batch.ClaimBatch(ctx, now, 3)
	if err != nil {
		t.Fatalf("ClaimBatch() error = %v", err)
	}
	var want []Claim
	for range 3 {
		c, ok := claim(t, single, now)
		if !ok {
			break
		}
		want = append(want, c)
	}
	if len(want) != 3 || want[0].Flow != "c" {
		t.Fatalf("successive claims = %+v, want c, d, e (the test's setup is wrong)", want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ClaimBatch() = %+v, want %+v", got, want)
	}
	if b, s := snap(t, batch), snap(t, single); !reflect.DeepEqual(b, s) {
		t.Fatalf("snapshots differ:\nbatch  %s\nsingle %s", jsonOf(b), jsonOf(s))
	}
	for _, id := range []string{"a1", "b1"} {
		if st := event(t, batch, id); st.State != stateQuarantined || st.Reason != ReasonLeaseExpired {
			t.Fatalf("%s = %+v, want quarantined with reason %q", id, st, ReasonLeaseExpired)
		}
	}
}

// docs/contract.md §2.1: the batch operations pass IDs and flows to SQLite
// and read them back as JSON; names holding JSON's special characters and
// non-ASCII letters come back byte-exact, and bodies that are not UTF-8
// too, as successive Claims and Settles would give them.
func TestBatch_NamesAndBodiesSurviveTheJSONRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	batch, _ := openTest(t)
	single, _ := openTest(t)
	names := []string{`a"b`, `c\d`, `é 😀`, `/\u0041`, `x`}
	for _, s := range []*Store{batch, single} {
		var es []Event
		for i, n := range names {
			es = append(es, Event{ID: "id " + n, Flow: n, Body: []byte{0xff, byte(i), '"', '\\'}})
		}
		if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
			t.Fatalf("EnqueueBatch() error = %v", err)
		}
	}
	got, err := batch.ClaimBatch(ctx, 1, len(names))
	if err != nil {
		t.Fatalf("ClaimBatch() error = %v", err)
	}
	var want []Claim
	for range names {
		want = append(want, mustClaim(t, single, 1))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ClaimBatch() = %+v, want %+v", got, want)
	}
	var items []SettleItem
	for i, c := range got {
		items = append(items, SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: i%2 == 0, Reason: "r"}})
	}
	items = append(items, SettleItem{EventID: `id a"b`, Generation: 1, Result: Result{OK: true}}, SettleItem{EventID: `no "such`, Generation: 1, Result: Result{OK: true}})
	res, err := batch.SettleBatch(ctx, items, 2)
	if err != nil {
		t.Fatalf("SettleBatch() error = %v", err)
	}
	for i, it := range items {
		o, err := single.Settle(ctx, it.EventID, it.Generation, it.Result, 2)
		if res[i].Outcome != o || (res[i].Err == nil) != (err == nil) {
			t.Fatalf("item %d %+v: SettleBatch = %q, %v; Settle = %q, %v", i, it, res[i].Outcome, res[i].Err, o, err)
		}
	}
	if b, s := snap(t, batch), snap(t, single); !reflect.DeepEqual(b, s) {
		t.Fatalf("snapshots differ:\nbatch  %s\nsingle %s", jsonOf(b), jsonOf(s))
	}
}
