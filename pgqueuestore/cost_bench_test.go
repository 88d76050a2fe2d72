package pgqueuestore

import (
	"context"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// BenchmarkSingleClaimSettle is the per-event cost at its worst: one
// Claim and one successful Settle per op, two write transactions (two
// commits) per event, on 1,000 flows of 16 events loaded untimed
// (bench's claim+settle case, in the store's own benchmarks). The
// server's one-row commit ceiling bounds it at half its commits/s
// (docs/decisions/postgres-per-event-cost.md).
func BenchmarkSingleClaimSettle(b *testing.B) {
	ctx := context.Background()
	s, _, _ := open(b)
	var es []queue.Event
	for k := range 16 {
		for f := range 1000 {
			es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%04d", f), Body: []byte(`{"delta":1}`)})
		}
	}
	for len(es) > 0 {
		n := min(len(es), 500)
		if _, err := s.EnqueueBatch(ctx, es[:n], 0); err != nil {
			b.Fatal(err)
		}
		es = es[n:]
	}
	if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.events; ANALYZE {s}.flows`)); err != nil {
		b.Fatal(err)
	}
	if b.N > 16000 {
		b.Fatalf("b.N %d is above the backlog's 16,000 events", b.N)
	}
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
// more, in one SettleClaimBatch, on 1,000 flows of 16 events.
func BenchmarkSettleClaimWave(b *testing.B) {
	ctx := context.Background()
	s, _, _ := open(b)
	var es []queue.Event
	for k := range 16 {
		for f := range 1000 {
			es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%04d", f), Body: []byte(`{"delta":1}`)})
		}
	}
	for len(es) > 0 {
		n := min(len(es), 500)
		if _, err := s.EnqueueBatch(ctx, es[:n], 0); err != nil {
			b.Fatal(err)
		}
		es = es[n:]
	}
	if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.events; ANALYZE {s}.flows`)); err != nil {
		b.Fatal(err)
	}
	if b.N > 990 {
		b.Fatalf("b.N %d is above the backlog's 990 waves", b.N)
	}
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
