package shard_test

import (
	"context"
	"flag"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

var fairnessRun = flag.Bool("shard.fairness", false, "measure fairness across shards at full size (docs/decisions/sharding.md)")

// TestClaimRotation checks the documented rotation: single claims take
// turns among the shards with something dispatchable, and a batch that a
// shard cannot fill is filled from the others.
func TestClaimRotation(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := newSet(t, b, 3, nil)
		for i := 0; i < 2; i++ { // shard 2 stays empty
			for k, f := range flowsIn(i, 3, 3, "r") {
				for j := 0; j < 3; j++ {
					enqueue(t, s, fmt.Sprintf("%d-%d-%d", i, k, j), f, 1)
				}
			}
		}
		var order []int
		for k := 0; k < 6; k++ {
			c, ok, err := s.Claim(ctx, 1)
			if err != nil || !ok {
				t.Fatalf("Claim %d = %v, %v", k, ok, err)
			}
			order = append(order, shard.Of(c.Flow, 3))
		}
		for k := 1; k < len(order); k++ {
			if order[k] == order[k-1] {
				t.Errorf("single claims came from shards %v: want them to alternate", order)
				break
			}
		}
		// 6 heads left in shards 0 and 1 (none yet served twice): a batch
		// of 6 gets them all, though shard 2 has none of its share.
		cs, err := s.ClaimBatch(ctx, 1, 6)
		if err != nil || len(cs) != 0 {
			// every flow's head is in flight: nothing more at tick 1
			t.Fatalf("ClaimBatch with every head in flight = %d, %v", len(cs), err)
		}
		cs, err = s.ClaimBatch(ctx, 1+queue.Lease, 6)
		if err != nil || len(cs) != 6 {
			t.Fatalf("ClaimBatch(6) after the leases = %d claims, %v; want 6", len(cs), err)
		}
	})
}

// spread serves claims from s in batches until served claims are made,
// settling each at once, and returns the served counts of the flows that
// still have a backlog at the end, by flow.
func spread(t *testing.T, s queue.Store, flows []string, backlog func(k int) int, served, batch int) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	var evs []queue.Event
	for k, f := range flows {
		for j := 0; j < backlog(k); j++ {
			evs = append(evs, queue.Event{ID: fmt.Sprintf("%s-%d", f, j), Flow: f, Body: []byte("x")})
		}
	}
	for len(evs) > 0 {
		n := min(len(evs), 500)
		if _, err := s.EnqueueBatch(ctx, evs[:n], 1); err != nil {
			t.Fatal(err)
		}
		evs = evs[n:]
	}
	got := map[string]int64{}
	now := clock.Tick(1)
	for total := 0; total < served; {
		cs, err := s.ClaimBatch(ctx, now, min(batch, served-total))
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			break
		}
		items := make([]queue.SettleItem, len(cs))
		for k, c := range cs {
			items[k] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}}
			got[c.Flow]++
		}
		if _, err := s.SettleBatch(ctx, items, now); err != nil {
			t.Fatal(err)
		}
		total += len(cs)
		now++
	}
	out := map[string]int64{}
	for k, f := range flows {
		if int64(backlog(k)) > got[f] {
			out[f] = got[f]
		}
	}
	return out
}

// minMax is the least and the most of the values of m.
func minMax(m map[string]int64) (lo, hi int64) {
	first := true
	for _, v := range m {
		if first || v < lo {
			lo = v
		}
		if first || v > hi {
			hi = v
		}
		first = false
	}
	return lo, hi
}

// TestFairnessSpread measures how evenly claims reach backlogged flows
// with and without shards (docs/decisions/sharding.md): flows, five with
// ten times the backlog, served in batches past the light flows' backlog;
// the spread is the difference between the most and the least served flow
// that still has a backlog. Unsharded, and inside each shard, the fair
// order keeps it at most 1 (§2.3); across shards it is measured and
// logged. The test runs a small size; -shard.fairness runs the size the
// decision reports.
func TestFairnessSpread(t *testing.T) {
	flowsN, base, served := 20, 5, 125
	if *fairnessRun {
		flowsN, base, served = 100, 20, 2500
	}
	flows := make([]string, flowsN)
	for k := range flows {
		flows[k] = fmt.Sprintf("tenant-%03d", k)
	}
	backlog := func(k int) int {
		if k%(flowsN/5) == 0 { // 5 flows with 10× the backlog
			return 10 * base
		}
		return base
	}
	for _, batch := range []int{1, 10} {
		one := sqliteSet(t, 1, nil)
		flat := spread(t, one[0], flows, backlog, served, batch)
		lo, hi := minMax(flat)
		row := fmt.Sprintf("batch %2d: unsharded spread %d (%d flows backlogged)", batch, hi-lo, len(flat))
		if hi-lo > 1 {
			t.Errorf("unsharded spread %d, want at most 1", hi-lo)
		}
		for _, n := range []int{2, 4} {
			s, _ := newSet(t, backends[0], n, nil)
			got := spread(t, s, flows, backlog, served, batch)
			lo, hi := minMax(got)
			per := make([]map[string]int64, n)
			for f, v := range got {
				i := shard.Of(f, n)
				if per[i] == nil {
					per[i] = map[string]int64{}
				}
				per[i][f] = v
			}
			var counts []int
			for i := range per {
				counts = append(counts, len(per[i]))
				if l, h := minMax(per[i]); h-l > 1 {
					t.Errorf("%d shards, batch %d: spread %d inside shard %d, want at most 1", n, batch, h-l, i)
				}
			}
			row += fmt.Sprintf("; %d shards (backlogged flows per shard %v): spread %d (min %d, max %d)", n, counts, hi-lo, lo, hi)
		}
		t.Log(row)
	}
}
