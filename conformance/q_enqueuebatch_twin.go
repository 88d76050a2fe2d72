package conformance

import (
	"context"
	"errors"
	"fmt"
	"github.com/fairrelay/fairrelay/queue"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// EnqueueBatch_TwinOfSuccessiveEnqueues (docs/contract.md §2.1, docs/contract.md
// "batches"): on twin stores, EnqueueBatch gives each event what successive
// Enqueue calls at the same tick give — the same Seq, the same Duplicate —
// and leaves the same snapshot; a batch with a conflict anywhere is refused
// whole (queue.ErrConflict) and changes nothing, where the successive calls stop
// at the conflicting event. 40 seeds, a quarter under the race detector
// (mage test runs the 40 again without it).
func queueEnqueueBatch_TwinOfSuccessiveEnqueues(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	for seed := range uint64(sequences(40)) {
		rng := rand.New(rand.NewPCG(seed, 1))
		batchStore, single := bk.open(t), bk.open(t)
		var stored []queue.Event // events enqueued so far, for duplicates and conflicts
		for round := range 6 {
			now := clock.Tick(round + 1)
			n := 1 + rng.IntN(8)
			var batch []queue.Event
			conflict := false
			for i := range n {
				switch r := rng.IntN(10); {
				case r < 2 && len(stored) > 0: // a duplicate of a stored event
					batch = append(batch, stored[rng.IntN(len(stored))])
				case r == 2 && len(stored) > 0 && rng.IntN(3) == 0: // same ID, another body
					e := stored[rng.IntN(len(stored))]
					e.Body = append([]byte("other-"), e.Body...)
					batch = append(batch, e)
					conflict = true
				case r == 3 && len(batch) > 0: // the same event twice in one batch
					batch = append(batch, batch[rng.IntN(len(batch))])
				default:
					batch = append(batch, queue.Event{
						ID:   fmt.Sprintf("s%d-r%d-e%d", seed, round, i),
						Flow: fmt.Sprintf("f%d", rng.IntN(4)),
						Body: []byte(fmt.Sprintf("body-%d", rng.IntN(1000))),
					})
				}
			}
			before := snap(t, batchStore)
			got, err := batchStore.EnqueueBatch(ctx, batch, now)
			if conflict {
				if !errors.Is(err, queue.ErrConflict) {
					t.Fatalf("seed %d round %d: EnqueueBatch with a conflict: err = %v, want queue.ErrConflict", seed, round, err)
				}
				assertUnchanged(t, "a refused EnqueueBatch", before, snap(t, batchStore))
				continue // the twin gets nothing either: both stay equal
			}
			if err != nil {
				t.Fatalf("seed %d round %d: EnqueueBatch: %v", seed, round, err)
			}
			var want []queue.Enqueued
			for _, e := range batch {
				r, err := single.Enqueue(ctx, e, now)
				if err != nil {
					t.Fatalf("seed %d round %d: Enqueue(%s): %v", seed, round, e.ID, err)
				}
				want = append(want, r)
				if !r.Duplicate {
					stored = append(stored, e)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d round %d: EnqueueBatch = %v, successive Enqueue = %v (batch %v)", seed, round, got, want, batch)
			}
			if b, s := snap(t, batchStore), snap(t, single); !reflect.DeepEqual(b, s) {
				t.Fatalf("seed %d round %d: snapshots differ:\nbatch  %s\nsingle %s", seed, round, jsonOf(b), jsonOf(s))
			}
		}
	}
}
