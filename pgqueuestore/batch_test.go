package pgqueuestore

import (
	"context"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// TestSettleBatchEqualsSettles: SettleBatch leaves the store, and
// answers, as Settle item after item does, both when its writes touch
// each flow once (the set statements) and when two items write one flow
// (here by a second in-flight event put into flow f by hand: the
// item-by-item statements), under both policies.
func TestSettleBatchEqualsSettles(t *testing.T) {
	for _, pol := range []string{"min_served", "rotation"} {
		for _, twoInFlow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/twoInFlow=%v", pol, twoInFlow), func(t *testing.T) {
				ctx := context.Background()
				var opts []Option
				if pol == "rotation" {
					opts = append(opts, WithPolicy(rotationPolicy()))
				}
				var items []queue.SettleItem
				setup := func() (*Store, string) {
					s, url, _ := open(t, opts...)
					var es []queue.Event
					for _, id := range []string{"f1", "f2", "f3", "g1", "g2", "h1", "k1"} {
						es = append(es, queue.Event{ID: id, Flow: id[:1], Body: []byte("x" + id)})
					}
					if _, err := s.EnqueueBatch(ctx, es, 1); err != nil {
						t.Fatal(err)
					}
					cs, err := s.ClaimBatch(ctx, 2, 4)
					if err != nil || len(cs) != 4 {
						t.Fatalf("ClaimBatch = %d, %v", len(cs), err)
					}
					if twoInFlow {
						execSQL(t, url, s.q(`UPDATE {s}.events SET state = 'inflight', generation = 1, attempts = 1,
    lifetime_attempts = 1, lease_until = 100000, ticket = 99 WHERE id = 'f2'`))
					}
					items = []queue.SettleItem{
						{EventID: "f1", Generation: 1, Result: queue.Result{OK: true}},
						{EventID: "f2", Generation: 1, Result: queue.Result{Reason: "boom"}},
						{EventID: "g1", Generation: 1, Result: queue.Result{Reason: "unavailable"}},
						{EventID: "h1", Generation: 1, Result: queue.Result{OK: true}},
						{EventID: "nope", Generation: 1, Result: queue.Result{OK: true}},
						{EventID: "f1", Generation: 1, Result: queue.Result{OK: true}},
						{EventID: "k1", Generation: 0, Result: queue.Result{OK: true}},
						{EventID: "", Generation: 1, Result: queue.Result{OK: true}},
					}
					return s, url
				}
				a, _ := setup()
				b, _ := setup()
				got, err := a.SettleBatch(ctx, items, 3)
				if err != nil {
					t.Fatal(err)
				}
				for i, it := range items {
					o, err := b.Settle(ctx, it.EventID, it.Generation, it.Result, 3)
					if fmt.Sprint(o) != fmt.Sprint(got[i].Outcome) || (err == nil) != (got[i].Err == nil) {
						t.Errorf("item %d: SettleBatch %v %v, Settle %v %v", i, got[i].Outcome, got[i].Err, o, err)
					}
				}
				if d := stateDiff(t, a, b); d != "" {
					t.Errorf("a: the batch, b: the settles: %s", d)
				}
				t.Logf("outcomes: %v", got)
			})
		}
	}
}
