package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
)

// Retention on the receiving side (docs/contract.md §7.9): receipts carry
// the wall-clock time they were accepted; Prune deletes those accepted
// before a time and raises their flows' pruned mark; a later message at or
// below the mark with no receipt is Pruned and changes nothing.

// rclock is a store's wall clock (ReceiverOptions.Now) that a clause moves
// by hand, in whole seconds: every backend keeps a time to the second.
type rclock struct{ sec atomic.Int64 }

func newRClock() *rclock {
	c := &rclock{}
	c.sec.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix())
	return c
}

func (c *rclock) now() time.Time { return time.Unix(c.sec.Load(), 0).UTC() }

// tick moves the clock one second on and returns the new time.
func (c *rclock) tick() time.Time { c.sec.Add(1); return c.now() }

// ropenPruner opens a new store on clk and returns it as the Pruner it must
// be.
func ropenPruner(t *testing.T, rk *ReceiverBackend, clk *rclock) (Receiver, receiver.Pruner, string) {
	t.Helper()
	s, loc := rk.open(t, withNow(clk.now))
	p, ok := s.(receiver.Pruner)
	if !ok {
		t.Fatalf("%T is not a receiver.Pruner", s)
	}
	return s, p, loc
}

func rprune(t testing.TB, p receiver.Pruner, before time.Time, limit int, want receiver.PruneResult) {
	t.Helper()
	got, err := p.Prune(context.Background(), before, limit)
	if err != nil || got != want {
		t.Fatalf("Prune(%s, %d) = %+v, %v; want %+v", before.Format(time.TimeOnly), limit, got, err, want)
	}
}

func rprunable(t testing.TB, p receiver.Pruner, before time.Time, want int64) {
	t.Helper()
	got, err := p.Prunable(context.Background(), before)
	if err != nil || got != (receiver.PruneResult{Receipts: want}) {
		t.Fatalf("Prunable(%s) = %+v, %v; want %d receipts", before.Format(time.TimeOnly), got, err, want)
	}
}

func rflows(t testing.TB, s Receiver) []receiver.FlowState {
	t.Helper()
	fs, err := s.Flows(context.Background())
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	return fs
}

func rnext(t testing.TB, s Receiver, flow string) int64 {
	t.Helper()
	n, err := s.NextExpected(context.Background(), flow)
	if err != nil {
		t.Fatalf("NextExpected(%q) error = %v", flow, err)
	}
	return n
}

// §7.9: Prune deletes exactly the receipts accepted strictly before
// before; one accepted at before is kept, as are later ones and every
// conflict record. Prunable counts the same receipts beforehand and none
// after.
func receiverPrune_DeletesOnlyReceiptsAcceptedBefore(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, _ := ropenPruner(t, rk, clk)
	rmustReceive(t, s, rmsg("a1", "a", 1, 1), receiver.Accepted)
	rmustReceive(t, s, rmsg("a2", "a", 2, 2), receiver.Accepted)
	rmustReceive(t, s, rmsg("b1", "b", 1, 4), receiver.Accepted)
	rmustReceive(t, s, rmsg("x", "a", 1, 9), receiver.Conflict) // seq_taken, recorded
	cut := clk.tick()
	rmustReceive(t, s, rmsg("a3", "a", 3, 8), receiver.Accepted) // accepted at cut: kept
	clk.tick()
	rmustReceive(t, s, rmsg("b2", "b", 2, 16), receiver.Accepted)
	before := rsnap(t, s)

	rprunable(t, p, cut.Add(-time.Second), 0)
	rprune(t, p, cut.Add(-time.Second), 10, receiver.PruneResult{})
	rassertUnchanged(t, s, before, "Prune before the first receipt")

	rprunable(t, p, cut, 3)
	rprune(t, p, cut, 10, receiver.PruneResult{Receipts: 3})
	rprunable(t, p, cut, 0)
	after := rsnap(t, s)
	want := []receiver.Receipt{
		{ID: "a3", Flow: "a", Seq: 3, Body: string(rbody(8)), Delta: 8},
		{ID: "b2", Flow: "b", Seq: 2, Body: string(rbody(16)), Delta: 16},
	}
	if !reflect.DeepEqual(after.Receipts, want) {
		t.Fatalf("receipts after Prune = %s, want %s", rjs(after.Receipts), rjs(want))
	}
	if !reflect.DeepEqual(after.Conflicts, before.Conflicts) {
		t.Fatalf("conflicts after Prune = %s, want them kept: %s", rjs(after.Conflicts), rjs(before.Conflicts))
	}
	rprune(t, p, cut, 10, receiver.PruneResult{})
	rassertUnchanged(t, s, after, "a second Prune with the same before")
}

// §7.9: Prune deletes at most limit receipts, the oldest first, and says
// More when it reached the limit; batch after batch it deletes what
// Prunable counted, and then nothing.
func receiverPrune_LimitAndMore(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, _ := ropenPruner(t, rk, clk)
	ids := []string{"e1", "e2", "e3", "e4", "e5"}
	for i, id := range ids {
		rmustReceive(t, s, rmsg(id, "f", int64(i+1), 1), receiver.Accepted)
		clk.tick()
	}
	now := clk.now()
	for _, step := range []struct {
		prunable int64
		limit    int
		want     receiver.PruneResult
		kept     []string
	}{
		{5, 2, receiver.PruneResult{Receipts: 2, More: true}, ids[2:]},
		{3, 2, receiver.PruneResult{Receipts: 2, More: true}, ids[4:]},
		{1, 2, receiver.PruneResult{Receipts: 1}, nil},
		{0, 2, receiver.PruneResult{}, nil},
	} {
		rprunable(t, p, now, step.prunable)
		rprune(t, p, now, step.limit, step.want)
		var kept []string
		for _, r := range rsnap(t, s).Receipts {
			kept = append(kept, r.ID)
		}
		if !reflect.DeepEqual(kept, step.kept) {
			t.Fatalf("after Prune(limit %d) the receipts are %v, want %v (the oldest go first)", step.limit, kept, step.kept)
		}
	}
	// A batch that deletes exactly limit receipts says More; the next one
	// finds nothing.
	rmustReceive(t, s, rmsg("e6", "f", 6, 1), receiver.Accepted)
	clk.tick()
	rprune(t, p, clk.now(), 1, receiver.PruneResult{Receipts: 1, More: true})
	rprune(t, p, clk.now(), 1, receiver.PruneResult{})
}

// §7.9: receipts accepted at the same time go in order of their flow, then
// their seq, on every backend, so a batch cut through the tie deletes the
// same receipts everywhere: not in the order they were received (here b's
// first), nor in the order of their IDs (here the reverse of a's seqs).
func receiverPrune_SameTimeInFlowAndSeqOrder(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, _ := ropenPruner(t, rk, clk)
	rmustReceive(t, s, rmsg("k0", "z", 1, 1), receiver.Accepted) // the oldest, of the last flow
	clk.tick()
	// One batch, one time: b's first message, then a's, then b's and a's
	// next.
	res, err := s.ReceiveBatch(context.Background(), []receiver.Message{
		rmsg("k1", "b", 1, 1), rmsg("k4", "a", 1, 1), rmsg("k2", "b", 2, 1), rmsg("k3", "a", 2, 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Outcome != receiver.Accepted {
			t.Fatalf("setup item %d: %+v", i, r)
		}
	}
	clk.tick()
	rmustReceive(t, s, rmsg("k5", "a", 3, 1), receiver.Accepted) // accepted at before: kept
	before := clk.now()
	for _, step := range []struct {
		limit int
		want  receiver.PruneResult
		kept  []string // the IDs in the snapshot's order: by flow, then seq
	}{
		{3, receiver.PruneResult{Receipts: 3, More: true}, []string{"k5", "k1", "k2"}}, // k0, then a1 (k4) and a2 (k3)
		{1, receiver.PruneResult{Receipts: 1, More: true}, []string{"k5", "k2"}},       // b1 (k1)
		{5, receiver.PruneResult{Receipts: 1}, []string{"k5"}},                         // b2 (k2)
	} {
		rprune(t, p, before, step.limit, step.want)
		var kept []string
		for _, r := range rsnap(t, s).Receipts {
			kept = append(kept, r.ID)
		}
		if !reflect.DeepEqual(kept, step.kept) {
			t.Fatalf("after Prune(limit %d) the receipts are %v, want %v (ties by flow, then seq)", step.limit, kept, step.kept)
		}
	}
	want := []receiver.FlowState{
		{Flow: "a", NextExpected: 4, Total: 3, PrunedThrough: 2},
		{Flow: "b", NextExpected: 3, Total: 2, PrunedThrough: 2},
		{Flow: "z", NextExpected: 2, Total: 1, PrunedThrough: 1},
	}
	if got := rflows(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Flows() after the prunes = %s, want %s", rjs(got), rjs(want))
	}
}

// §7.9: a flow's total and next expected number survive Prune; the flow
// shows its pruned mark (the highest seq deleted, never lowered) and goes
// on accepting where it was.
func receiverPrune_TotalsAndNextExpectedSurvive(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, _ := ropenPruner(t, rk, clk)
	rmustReceive(t, s, rmsg("a1", "a", 1, 1), receiver.Accepted)
	rmustReceive(t, s, rmsg("a2", "a", 2, 2), receiver.Accepted)
	rmustReceive(t, s, rmsg("b1", "b", 1, 4), receiver.Accepted)
	rmustReceive(t, s, rmsg("c1", "c", 1, 5), receiver.Accepted)
	cut := clk.tick()
	rmustReceive(t, s, rmsg("c2", "c", 2, 6), receiver.Accepted)
	// a: both receipts go; b: its one; c: seq 1 only.
	rprune(t, p, cut, receiver.DefaultPruneBatch, receiver.PruneResult{Receipts: 4})
	want := []receiver.FlowState{
		{Flow: "a", NextExpected: 3, Total: 3, PrunedThrough: 2},
		{Flow: "b", NextExpected: 2, Total: 4, PrunedThrough: 1},
		{Flow: "c", NextExpected: 3, Total: 11, PrunedThrough: 1},
	}
	if got := rflows(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Flows() after Prune = %s, want %s", rjs(got), rjs(want))
	}
	if got, want := rjs(rsnap(t, s).Flows[0]), `{"flow":"a","next_expected":3,"total":3,"pruned_through":2}`; got != want {
		t.Fatalf("a pruned flow in a snapshot = %s, want %s", got, want)
	}
	if rtotal(t, s, "a") != 3 || rnext(t, s, "a") != 3 {
		t.Fatalf("Total(a), NextExpected(a) = %d, %d; want 3, 3", rtotal(t, s, "a"), rnext(t, s, "a"))
	}
	rmustReceive(t, s, rmsg("a3", "a", 3, 10), receiver.Accepted)
	if rtotal(t, s, "a") != 13 || rnext(t, s, "a") != 4 {
		t.Fatalf("after a3: Total(a), NextExpected(a) = %d, %d; want 13, 4", rtotal(t, s, "a"), rnext(t, s, "a"))
	}
	// A later prune of c2 and a3 raises the marks; none goes down.
	clk.tick()
	rprune(t, p, clk.now(), receiver.DefaultPruneBatch, receiver.PruneResult{Receipts: 2})
	want = []receiver.FlowState{
		{Flow: "a", NextExpected: 4, Total: 13, PrunedThrough: 3},
		{Flow: "b", NextExpected: 2, Total: 4, PrunedThrough: 1},
		{Flow: "c", NextExpected: 3, Total: 11, PrunedThrough: 2},
	}
	if got := rflows(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Flows() after the second Prune = %s, want %s", rjs(got), rjs(want))
	}
}

// §7.9: a redelivery of a pruned receipt's message is Pruned and changes
// nothing (the total is not applied again, no conflict is recorded), and
// so is any message without a receipt at or below the mark: its ID and
// body can no longer be compared with the applied one's. A store reopened
// on the same data answers the same.
func receiverReceive_PrunedRedeliveryChangesNothing(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, loc := ropenPruner(t, rk, clk)
	rmustReceive(t, s, rmsg("a1", "a", 1, 1), receiver.Accepted)
	rmustReceive(t, s, rmsg("a2", "a", 2, 2), receiver.Accepted)
	clk.tick()
	rmustReceive(t, s, rmsg("a3", "a", 3, 4), receiver.Accepted)
	rprune(t, p, clk.now(), 10, receiver.PruneResult{Receipts: 2})
	before := rsnap(t, s)
	for _, m := range []receiver.Message{
		rmsg("a1", "a", 1, 1), // the very message
		rmsg("a2", "a", 2, 2),
		rmsg("a2", "a", 2, 7),    // its ID with another body
		rmsg("other", "a", 1, 1), // another ID at a pruned seq
	} {
		rmustReceive(t, s, m, receiver.Pruned)
	}
	rassertUnchanged(t, s, before, "redeliveries of pruned receipts")
	rmustReceive(t, rk.reopen(t, loc, withNow(clk.now)), rmsg("a1", "a", 1, 1), receiver.Pruned)
	// The receipt that is left still answers as before.
	rmustReceive(t, s, rmsg("a3", "a", 3, 4), receiver.Duplicate)
	rmustReceive(t, s, rmsg("a3", "a", 3, 5), receiver.Conflict)
	// The pruned ID names another event now: a new message with it at the
	// flow's next seq is accepted (nothing remembers the ID).
	rmustReceive(t, s, rmsg("a1", "a", 4, 8), receiver.Accepted)
	if rtotal(t, s, "a") != 15 {
		t.Fatalf("Total(a) = %d, want 15 (1+2+4+8: no pruned message applied twice)", rtotal(t, s, "a"))
	}
}

// §7.9: ReceiveBatch answers a pruned receipt's redelivery Pruned too, in
// the order of successive Receive calls, and applies nothing for it.
func receiverReceiveBatch_PrunedRedeliveryChangesNothing(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, _ := ropenPruner(t, rk, clk)
	rmustReceive(t, s, rmsg("a1", "a", 1, 1), receiver.Accepted)
	rmustReceive(t, s, rmsg("a2", "a", 2, 2), receiver.Accepted)
	rmustReceive(t, s, rmsg("b1", "b", 1, 4), receiver.Accepted)
	clk.tick()
	rprune(t, p, clk.now(), 10, receiver.PruneResult{Receipts: 3})
	res, err := s.ReceiveBatch(context.Background(), []receiver.Message{
		rmsg("a1", "a", 1, 1), // pruned
		rmsg("a3", "a", 3, 8), // new
		rmsg("a2", "a", 2, 2), // pruned
		rmsg("a3", "a", 3, 8), // duplicate of the batch's own
		rmsg("b1", "b", 1, 4), // pruned, in another flow
		rmsg("b9", "b", 9, 1), // a gap, as before
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []receiver.Outcome{receiver.Pruned, receiver.Accepted, receiver.Pruned, receiver.Duplicate, receiver.Pruned, receiver.Gap}
	for i, r := range res {
		if r.Err != nil || r.Outcome != want[i] {
			t.Fatalf("item %d = %+v, want %q", i, r, want[i])
		}
	}
	wantFlows := []receiver.FlowState{
		{Flow: "a", NextExpected: 4, Total: 11, PrunedThrough: 2},
		{Flow: "b", NextExpected: 2, Total: 4, PrunedThrough: 1},
	}
	if got := rflows(t, s); !reflect.DeepEqual(got, wantFlows) {
		t.Fatalf("Flows() = %s, want %s", rjs(got), rjs(wantFlows))
	}
	if sn := rsnap(t, s); len(sn.Receipts) != 1 || len(sn.Conflicts) != 0 {
		t.Fatalf("after the batch: receipts %s, conflicts %s; want a3 only and none", rjs(sn.Receipts), rjs(sn.Conflicts))
	}
}

// §7.9 with §3: above the pruned mark the rules are as before: a
// redelivery with a receipt is Duplicate, another ID at its seq a
// seq_taken Conflict, a seq above next expected a Gap.
func receiverReceive_AbovePrunedMarkRulesUnchanged(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, _ := ropenPruner(t, rk, clk)
	rmustReceive(t, s, rmsg("e1", "f", 1, 1), receiver.Accepted)
	rmustReceive(t, s, rmsg("e2", "f", 2, 1), receiver.Accepted)
	cut := clk.tick()
	rmustReceive(t, s, rmsg("e3", "f", 3, 1), receiver.Accepted)
	rmustReceive(t, s, rmsg("e4", "f", 4, 1), receiver.Accepted)
	rprune(t, p, cut, 10, receiver.PruneResult{Receipts: 2})
	rmustReceive(t, s, rmsg("e3", "f", 3, 1), receiver.Duplicate)
	rmustReceive(t, s, rmsg("x3", "f", 3, 1), receiver.Conflict)
	rmustReceive(t, s, rmsg("e6", "f", 6, 1), receiver.Gap)
	rmustReceive(t, s, rmsg("e5", "f", 5, 1), receiver.Accepted)
	cs, err := s.Conflicts(context.Background())
	if err != nil || len(cs) != 1 || cs[0].Rule != receiver.RuleSeqTaken || cs[0].WithID != "e3" {
		t.Fatalf("Conflicts() = %s, %v; want x3's seq_taken with e3", rjs(cs), err)
	}
}

// §7.9 with §3 rule 4: a seq above the pruned mark and below next
// expected whose receipt is missing (a state the API never makes: the
// receipt deleted by hand) is still a seq_behind Conflict, not Pruned.
func receiverReceive_AbovePrunedMarkWithoutReceiptIsSeqBehind(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, loc := ropenPruner(t, rk, clk)
	rmustReceive(t, s, rmsg("e1", "f", 1, 1), receiver.Accepted)
	cut := clk.tick()
	rmustReceive(t, s, rmsg("e2", "f", 2, 1), receiver.Accepted)
	rmustReceive(t, s, rmsg("e3", "f", 3, 1), receiver.Accepted)
	rprune(t, p, cut, 10, receiver.PruneResult{Receipts: 1})
	rk.exec(t, loc, `DELETE FROM receipts WHERE id = 'e2'`)
	rmustReceive(t, s, rmsg("e2", "f", 2, 1), receiver.Conflict)
	cs, err := s.Conflicts(context.Background())
	if err != nil || len(cs) != 1 || cs[0].Rule != receiver.RuleSeqBehind || cs[0].NextExpected != 4 {
		t.Fatalf("Conflicts() = %s, %v; want e2's seq_behind at next expected 4", rjs(cs), err)
	}
	rmustReceive(t, s, rmsg("e1", "f", 1, 1), receiver.Pruned)
}

// §7.9: a limit outside 1..MaxPruneBatch is ErrInvalidOption and changes
// nothing; MaxPruneBatch itself is a limit.
func receiverPrune_BadLimitIsInvalidOption(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, _ := ropenPruner(t, rk, clk)
	rmustReceive(t, s, rmsg("e1", "f", 1, 1), receiver.Accepted)
	now := clk.tick()
	before := rsnap(t, s)
	for _, limit := range []int{0, -1, receiver.MaxPruneBatch + 1} {
		if r, err := p.Prune(context.Background(), now, limit); !errors.Is(err, receiver.ErrInvalidOption) || r != (receiver.PruneResult{}) {
			t.Fatalf("Prune(limit %d) = %+v, %v; want ErrInvalidOption", limit, r, err)
		}
	}
	rassertUnchanged(t, s, before, "Prune with a bad limit")
	rprunable(t, p, now, 1)
	rprune(t, p, now, receiver.MaxPruneBatch, receiver.PruneResult{Receipts: 1})
}

// §7.9: the pruned mark is the highest seq ever deleted and never goes
// down, even when the wall clock went back between two receipts (a later
// seq accepted at an earlier time is pruned first).
func receiverPrune_MarkNeverLowered(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, _ := ropenPruner(t, rk, clk)
	clk.sec.Add(10)
	rmustReceive(t, s, rmsg("e1", "f", 1, 1), receiver.Accepted)
	clk.sec.Add(-5) // the clock is set back
	rmustReceive(t, s, rmsg("e2", "f", 2, 1), receiver.Accepted)
	rprune(t, p, clk.tick(), 10, receiver.PruneResult{Receipts: 1}) // e2 only
	clk.sec.Add(10)
	rprune(t, p, clk.now(), 10, receiver.PruneResult{Receipts: 1}) // e1
	want := []receiver.FlowState{{Flow: "f", NextExpected: 3, Total: 2, PrunedThrough: 2}}
	if got := rflows(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Flows() = %s, want %s", rjs(got), rjs(want))
	}
	rmustReceive(t, s, rmsg("e2", "f", 2, 1), receiver.Pruned)
}

// §7.9 under concurrency: while batches of Prune delete a flow's receipts,
// other stores on the same data redeliver those messages, alone and in
// batches. Every answer is Duplicate (the receipt was still there) or
// Pruned (it was gone), never Accepted or Conflict, and the flow's total
// and next expected number never move.
func receiverPrune_ConcurrentRedeliveriesNeverApplyTwice(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	clk := newRClock()
	s, p, loc := ropenPruner(t, rk, clk)
	const n = 60
	var ms []receiver.Message
	for i := range n {
		ms = append(ms, rmsg(fmt.Sprintf("e%02d", i+1), "f", int64(i+1), 1+i%7))
	}
	res, err := s.ReceiveBatch(context.Background(), ms)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Outcome != receiver.Accepted {
			t.Fatalf("setup item %d: %+v", i, r)
		}
	}
	wantTotal := rtotal(t, s, "f")
	now := clk.tick()
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			r, err := p.Prune(context.Background(), now, 7)
			if err != nil {
				errs <- err
				return
			}
			if !r.More {
				return
			}
		}
	}()
	for w := range 2 {
		other := rk.reopen(t, loc, withNow(clk.now))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 2 {
				var outs []receiver.Outcome
				if i%3 == 0 {
					rs, err := other.ReceiveBatch(context.Background(), []receiver.Message{ms[i], ms[(i+1)%n]})
					if err != nil {
						errs <- err
						return
					}
					for _, r := range rs {
						outs = append(outs, r.Outcome)
					}
				} else {
					o, err := other.Receive(context.Background(), ms[i])
					if err != nil {
						errs <- err
						return
					}
					outs = append(outs, o)
				}
				for _, o := range outs {
					if o != receiver.Duplicate && o != receiver.Pruned {
						errs <- fmt.Errorf("redelivery of %s during Prune = %q, want duplicate or pruned", ms[i].ID, o)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rprune(t, p, now, receiver.MaxPruneBatch, receiver.PruneResult{}) // the pruner finished
	want := []receiver.FlowState{{Flow: "f", NextExpected: n + 1, Total: wantTotal, PrunedThrough: n}}
	if got := rflows(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Flows() = %s, want %s", rjs(got), rjs(want))
	}
	for _, m := range ms {
		rmustReceive(t, s, m, receiver.Pruned)
	}
	if cs, err := s.Conflicts(context.Background()); err != nil || len(cs) != 0 {
		t.Fatalf("Conflicts() = %s, %v; want none", rjs(cs), err)
	}
}
