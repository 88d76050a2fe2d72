package pgqueuestore

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// BenchmarkSingleClaimSettle is the per-event cost at its worst: one
// Claim and one successful Settle per op, two write transactions (two
// commits) per event, on 1,000 flows of 16 events (more when b.N needs
// them) loaded untimed (bench's claim+settle case, in the store's own
// benchmarks). The server's one-row commit ceiling bounds it at half its
// commits/s (docs/decisions/postgres-per-event-cost.md).
func BenchmarkSingleClaimSettle(b *testing.B) {
	ctx := context.Background()
	s := costBacklog(b, max(1000, (b.N+15)/16))
	b.ResetTimer()
	for i := range b.N {
		now := clock.Tick(i + 1)
		c, ok, err := s.Claim(ctx, now)
		if err != nil || !ok {
			b.Fatalf("Claim = %v, %v", ok, err)
		}
		if o, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, now); err != nil || o != queue.Acked {
			b.Fatalf("Settle = %v, %v", o, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSettleClaimWave is the relay's call on a backlog: each op
// settles (acks) the 16 events the previous op claimed and claims 16
// more, in one SettleClaimBatch, on 1,000 flows of 16 events (more when
// b.N needs them).
func BenchmarkSettleClaimWave(b *testing.B) {
	ctx := context.Background()
	// A wave takes one event from each of 16 flows, the least served
	// first, so b.N waves take 16·b.N of the backlog's 16 events a flow:
	// b.N flows, and a margin.
	s := costBacklog(b, max(1000, b.N+10))
	var items []queue.SettleItem
	b.ResetTimer()
	for i := range b.N {
		_, cs, err := s.SettleClaimBatch(ctx, items, clock.Tick(i+1), 16)
		if err != nil || len(cs) != 16 {
			b.Fatalf("SettleClaimBatch = %d claims, %v", len(cs), err)
		}
		items = items[:0]
		for _, c := range cs {
			items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}})
		}
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "events/s")
}

// costBacklog opens a store and loads it, untimed, with flows flows of 16
// events each, then analyzes its tables: the backlog of the cost
// benchmarks, sized by the caller from b.N so that no run of a faster
// machine or a longer -benchtime runs out of it.
func costBacklog(b *testing.B, flows int) *Store {
	b.Helper()
	s, _, _ := open(b)
	loadBacklog(b, s, flows, 16)
	if _, err := s.pool.Exec(context.Background(), s.q(`ANALYZE {s}.events; ANALYZE {s}.flows`)); err != nil {
		b.Fatal(err)
	}
	return s
}
