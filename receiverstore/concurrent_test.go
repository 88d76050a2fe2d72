package receiverstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
)

// SPEC §1/§3: delivery is at-least-once, the effect exactly-once. Eight Store
// values on one file (as eight processes would hold) receive overlapping
// duplicates of one flow, each in its own shuffled order, until the flow is
// complete. Every delta is applied exactly once: one Accepted per message
// over all of them, and the total is the sum.
func TestConcurrentStores_EachDeltaAppliedExactlyOnce(t *testing.T) {
	t.Parallel()
	const stores, n = 8, 24
	path := filepath.Join(t.TempDir(), "receiver.db")
	msgs := make([]Message, n)
	var want int64
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("e%d", i+1), "f", int64(i+1), i+1)
		want += int64(i + 1)
	}

	accepted := make([][]int, stores) // per store: how often each message was accepted
	errs := make([]error, stores)
	var wg sync.WaitGroup
	for w := range stores {
		s := reopen(t, path)
		accepted[w] = make([]int, n)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			ctx := context.Background()
			// Each pass sends every message in a shuffled order. A pass always
			// includes the flow's next expected message, so it makes progress;
			// n passes are enough in the worst case.
			for pass := 0; pass < n; pass++ {
				next, err := s.NextExpected(ctx, "f")
				if err != nil {
					errs[w] = err
					return
				}
				if next == n+1 {
					return
				}
				for _, i := range r.Perm(n) {
					out, err := s.Receive(ctx, msgs[i])
					if err != nil {
						errs[w] = err
						return
					}
					switch out {
					case Accepted:
						accepted[w][i]++
					case Duplicate, Gap:
					default:
						errs[w] = fmt.Errorf("Receive(%s) = %q, want accepted, duplicate or gap", msgs[i].ID, out)
						return
					}
				}
			}
			errs[w] = fmt.Errorf("store %d: flow not complete after %d passes", w, n)
		})
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("store %d: %v", w, err)
		}
	}
	for i := range n {
		sum := 0
		for w := range stores {
			sum += accepted[w][i]
		}
		if sum != 1 {
			t.Errorf("message %s accepted %d times over all stores, want 1", msgs[i].ID, sum)
		}
	}
	s := reopen(t, path)
	sn := snap(t, s)
	if len(sn.Receipts) != n || len(sn.Conflicts) != 0 {
		t.Fatalf("receipts = %d, conflicts = %d; want %d, 0", len(sn.Receipts), len(sn.Conflicts), n)
	}
	if got := total(t, s, "f"); got != want {
		t.Fatalf("Total(f) = %d, want %d", got, want)
	}
}
