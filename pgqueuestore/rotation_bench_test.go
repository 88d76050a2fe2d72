package pgqueuestore

import (
	"context"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// BenchmarkRotationIndex measures what the permanent flows_rotation index
// (migration 2) costs a min_served queue, and what the rotation costs
// (docs/decisions/rotation-in-sql.md). One claimant claims 8 heads of 64
// backlogged flows and acks them (ClaimBatch + SettleBatch: the turn and the
// commit paid once per 8 events, so that the statements, not the fsync,
// weigh); an op is one event.
//
//   - min_served: the store as shipped (flows_rotation kept, and empty:
//     no flow has joined the rotation, migration 12).
//   - min_served_no_index: flows_rotation dropped, as SQLite has it under
//     min_served.
//   - rotation: the rotation policy.
func BenchmarkRotationIndex(b *testing.B) {
	for _, v := range []string{"min_served", "min_served_no_index", "rotation"} {
		b.Run(v, func(b *testing.B) {
			ctx := context.Background()
			var opts []Option
			if v == "rotation" {
				opts = append(opts, WithPolicy(rotationPolicy()))
			}
			s, _, _ := open(b, opts...)
			if v == "min_served_no_index" {
				if _, err := s.pool.Exec(ctx, s.q(`DROP INDEX {s}.flows_rotation`)); err != nil {
					b.Fatal(err)
				}
			}
			const flows = 64
			perFlow := b.N/flows + 2
			var es []queue.Event
			for k := range perFlow {
				for f := range flows {
					es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%02d", f), Body: []byte("x")})
				}
			}
			for len(es) > 0 {
				n := min(len(es), 5000)
				if _, err := s.EnqueueBatch(ctx, es[:n], 0); err != nil {
					b.Fatal(err)
				}
				es = es[n:]
			}
			b.ResetTimer()
			for done := 0; done < b.N; {
				cs, err := s.ClaimBatch(ctx, 0, 8)
				if err != nil || len(cs) == 0 {
					b.Fatalf("ClaimBatch = %d claims, %v", len(cs), err)
				}
				items := make([]queue.SettleItem, len(cs))
				for i, c := range cs {
					items[i] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}}
				}
				if _, err := s.SettleBatch(ctx, items, 0); err != nil {
					b.Fatal(err)
				}
				done += len(cs)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
