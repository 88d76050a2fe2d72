package shard_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// TestConcurrentClaimants drains a 2-shard set with four goroutines
// sharing one Store: every event is acked exactly once, each by the
// claim that took it.
func TestConcurrentClaimants(t *testing.T) {
	ctx := context.Background()
	s, _ := newSet(t, backends[0], 2, nil)
	const flows, per = 8, 5
	for f := 0; f < flows; f++ {
		for k := 0; k < per; k++ {
			enqueue(t, s, fmt.Sprintf("c%d-%d", f, k), fmt.Sprintf("flow-%d", f), 1)
		}
	}
	var mu sync.Mutex
	acked := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idle := 0; idle < 3; {
				cs, err := s.ClaimBatch(ctx, clock.Tick(1), 2)
				if err != nil {
					t.Error(err)
					return
				}
				if len(cs) == 0 {
					idle++
					continue
				}
				for _, c := range cs {
					o, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, 1)
					if err != nil || o != queue.Acked {
						t.Errorf("Settle(%s) = %v, %v", c.EventID, o, err)
					}
					mu.Lock()
					acked[c.EventID]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(acked) != flows*per {
		t.Errorf("%d events acked, want %d", len(acked), flows*per)
	}
	for id, n := range acked {
		if n != 1 {
			t.Errorf("event %s acked %d times", id, n)
		}
	}
}
