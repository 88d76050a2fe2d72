package pgqueuestore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/queue"
)

// BenchmarkBatchCycle is bench's batched cycle at 64 on its own, in this
// package (docs/decisions/postgres-batch-round-trips.md): one
// goroutine runs EnqueueBatch of 64 events (one per flow of 64), then
// ClaimBatch(64), then SettleBatch acking the claims, three transactions
// in a row; an op is one cycle, events/s counts its 64 events, and the
// time of each operation is reported per cycle.
func BenchmarkBatchCycle(b *testing.B) {
	for _, v := range []string{"min_served", "rotation"} {
		b.Run(v, func(b *testing.B) {
			ctx := context.Background()
			var opts []Option
			if v == "rotation" {
				opts = append(opts, WithPolicy(rotationPolicy()))
			}
			s, _, _ := open(b, opts...)
			const n = 64
			es := make([]queue.Event, n)
			items := make([]queue.SettleItem, 0, n)
			var tEnq, tClaim, tSettle time.Duration
			b.ResetTimer()
			for i := range b.N {
				for f := range n {
					es[f] = queue.Event{ID: fmt.Sprintf("c%d-%d", i, f), Flow: fmt.Sprintf("f%02d", f), Body: []byte("x")}
				}
				t0 := time.Now()
				if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				cs, err := s.ClaimBatch(ctx, 0, n)
				t2 := time.Now()
				if err != nil || len(cs) != n {
					b.Fatalf("ClaimBatch = %d claims, %v", len(cs), err)
				}
				items = items[:0]
				for _, c := range cs {
					items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}})
				}
				t3 := time.Now()
				rs, err := s.SettleBatch(ctx, items, 0)
				tEnq, tClaim, tSettle = tEnq+t1.Sub(t0), tClaim+t2.Sub(t1), tSettle+time.Since(t3)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range rs {
					if r.Err != nil || r.Outcome != queue.Acked {
						b.Fatalf("settle: %v %v", r.Outcome, r.Err)
					}
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
			for _, m := range []struct {
				d    time.Duration
				unit string
			}{{tEnq, "enqueue-ms/op"}, {tClaim, "claim-ms/op"}, {tSettle, "settle-ms/op"}} {
				b.ReportMetric(float64(m.d.Microseconds())/1000/float64(b.N), m.unit)
			}
		})
	}
}

// BenchmarkSettleBatchSize times one SettleBatch acking n claimed events
// of n flows, at n = 64, 1,000 and 10,000 (the enqueue and the claim
// untimed; an op is one batch): its cost per event must not grow with the
// batch
// (docs/decisions/postgres-server-side-transitions.md: before queue
// migration 13 the one call's check for two items of one flow searched
// the flows before each item, and 10,000 acks took 1 s instead of 0.2).
func BenchmarkSettleBatchSize(b *testing.B) {
	for _, n := range []int{64, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			s, _, _ := open(b)
			es := make([]queue.Event, n)
			b.StopTimer()
			for i := range b.N {
				for f := range n {
					es[f] = queue.Event{ID: fmt.Sprintf("c%d-%d", i, f), Flow: fmt.Sprintf("f%05d", f), Body: []byte("x")}
				}
				items := enqueueClaimAll(b, s, es)
				b.StartTimer()
				rs, err := s.SettleBatch(ctx, items, 0)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range rs {
					if r.Err != nil || r.Outcome != queue.Acked {
						b.Fatalf("settle: %v %v", r.Outcome, r.Err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n*b.N), "µs/event")
		})
	}
}

// enqueueClaimAll enqueues es (one event in each of len(es) flows) at
// tick 0, claims len(es) heads and returns the items that ack them.
func enqueueClaimAll(b *testing.B, s *Store, es []queue.Event) []queue.SettleItem {
	b.Helper()
	ctx := context.Background()
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		b.Fatal(err)
	}
	cs, err := s.ClaimBatch(ctx, 0, len(es))
	if err != nil || len(cs) != len(es) {
		b.Fatalf("ClaimBatch = %d claims, %v", len(cs), err)
	}
	items := make([]queue.SettleItem, 0, len(cs))
	for _, c := range cs {
		items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}})
	}
	return items
}
