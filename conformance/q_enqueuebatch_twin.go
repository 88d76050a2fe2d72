package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// EnqueueBatch_TwinOfSuccessiveEnqueues (docs/contract.md §2.1, docs/contract.md
// "batches"): on twin stores, EnqueueBatch gives each event what successive
// Enqueue calls at the same tick give — the same Seq, the same Duplicate —
// and leaves the same snapshot; a batch with a conflict or a refused
// destination (§7.11) anywhere is refused whole, with the first failing
// event's error, and changes nothing, where the successive calls stop at
// that event. Between rounds both twins claim and ack the same heads (so
// some flows have no head when the next batch comes), and, where the
// backend has them, pause and resume the same flows (§7.9); events may be
// scheduled (NotBefore) and name a destination, registered or not. 40
// seeds, two under the race detector (mage test runs the 40 again
// without it), or the backend's TwinSeeds.
func queueEnqueueBatch_TwinOfSuccessiveEnqueues(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	for seed := range uint64(bk.twinSeeds(40)) {
		rng := rand.New(rand.NewPCG(seed, 1))
		batchStore, single := bk.open(t), bk.open(t)
		twins := []Queue{batchStore, single}
		m := newEnqueueModel()
		if _, ok := batchStore.(queue.DestinationStore); ok {
			for _, s := range twins {
				putDest(t, s.(queue.DestinationStore), testDest("d1", 0, 0), 1)
			}
			m.registered["d1"] = true
		}
		for round := range 6 {
			now := clock.Tick(round + 1)
			m.between(t, rng, twins, now)
			n := 1 + rng.IntN(8)
			var batch []queue.Event
			for i := range n {
				switch r := rng.IntN(10); {
				case r < 2 && len(m.ids) > 0: // a duplicate of a stored event
					batch = append(batch, m.events[m.ids[rng.IntN(len(m.ids))]])
				case r == 2 && len(m.ids) > 0 && rng.IntN(3) == 0: // same ID, another body
					e := m.events[m.ids[rng.IntN(len(m.ids))]]
					e.Body = append([]byte("other-"), e.Body...)
					batch = append(batch, e)
				case r == 3 && len(batch) > 0: // the same event twice in one batch
					batch = append(batch, batch[rng.IntN(len(batch))])
				default:
					e := queue.Event{
						ID:   fmt.Sprintf("s%d-r%d-e%d", seed, round, i),
						Flow: fmt.Sprintf("f%d", rng.IntN(4)),
						Body: []byte(fmt.Sprintf("body-%d", rng.IntN(1000))),
					}
					if rng.IntN(4) == 0 {
						e.NotBefore = now + clock.Tick(rng.IntN(3))
					}
					if rng.IntN(8) == 0 {
						e.Destination = []string{"d1", "d1", "nowhere"}[rng.IntN(3)]
					}
					batch = append(batch, e)
				}
			}
			wantErr := m.refusal(batch)
			before := snap(t, batchStore)
			got, err := batchStore.EnqueueBatch(ctx, batch, now)
			if wantErr != nil {
				if !errors.Is(err, wantErr) {
					t.Fatalf("seed %d round %d: EnqueueBatch(%v): err = %v, want %v", seed, round, batch, err, wantErr)
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
					m.store(e)
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

// enqueueModel is what the twin test knows of the events stored in both
// twins: enough to say whether a batch is refused, and with which error.
type enqueueModel struct {
	ids        []string               // stored event IDs, in order
	events     map[string]queue.Event // by ID
	flowDest   map[string]string      // each flow's destination ("" the default)
	paused     map[string]bool
	registered map[string]bool // registered destinations
}

func newEnqueueModel() *enqueueModel {
	return &enqueueModel{events: map[string]queue.Event{}, flowDest: map[string]string{},
		paused: map[string]bool{}, registered: map[string]bool{}}
}

// store records e, enqueued as a new event.
func (m *enqueueModel) store(e queue.Event) {
	m.ids = append(m.ids, e.ID)
	m.events[e.ID] = e
	if _, ok := m.flowDest[e.Flow]; !ok {
		m.flowDest[e.Flow] = e.Destination
	}
}

// refusal is the error of the first event of batch that successive
// Enqueue calls would refuse (nil when none would): queue.ErrConflict for
// a stored ID with another flow or body, queue.ErrUnknownDestination for a
// name not registered, queue.ErrDestinationMismatch for a name other than
// its flow's.
func (m *enqueueModel) refusal(batch []queue.Event) error {
	events := maps.Clone(m.events)
	flowDest := maps.Clone(m.flowDest)
	for _, e := range batch {
		if st, ok := events[e.ID]; ok {
			if st.Flow != e.Flow || !bytes.Equal(st.Body, e.Body) {
				return queue.ErrConflict
			}
			continue
		}
		d, known := flowDest[e.Flow]
		switch {
		case e.Destination != queue.DefaultDestination && !m.registered[e.Destination]:
			return queue.ErrUnknownDestination
		case e.Destination != queue.DefaultDestination && known && d != e.Destination:
			return queue.ErrDestinationMismatch
		}
		events[e.ID] = e
		if !known {
			flowDest[e.Flow] = e.Destination
		}
	}
	return nil
}

// between does the same to both twins between two batches: claims one to
// four heads and acks them, or, one time in three, claims and acks until
// nothing is due (a flow is then left with a head only if it is paused or
// its next event is scheduled later); then it
// pauses or resumes one flow where the backend has pauses. The claims must
// be the same on both.
func (m *enqueueModel) between(t *testing.T, rng *rand.Rand, twins []Queue, now clock.Tick) {
	t.Helper()
	ctx := context.Background()
	drain := rng.IntN(3) == 0
	n := 1 + rng.IntN(4)
	for {
		var claims [][]queue.Claim
		for _, s := range twins {
			cs, err := s.ClaimBatch(ctx, now, n)
			if err != nil {
				t.Fatalf("ClaimBatch() error = %v", err)
			}
			claims = append(claims, cs)
			ackAll(t, s, cs, now)
		}
		if !reflect.DeepEqual(claims[0], claims[1]) {
			t.Fatalf("twins claimed differently: %s and %s", jsonOf(claims[0]), jsonOf(claims[1]))
		}
		if !drain || len(claims[0]) == 0 {
			break
		}
	}
	if _, ok := twins[0].(queue.Pauser); !ok || len(m.flowDest) == 0 || rng.IntN(2) != 0 {
		return
	}
	flows := slices.Sorted(maps.Keys(m.flowDest))
	f := flows[rng.IntN(len(flows))]
	for _, s := range twins {
		if m.paused[f] {
			resume(t, s.(queue.Pauser), f, "twin resume", now)
		} else {
			pause(t, s.(queue.Pauser), f, "twin pause", now)
		}
	}
	m.paused[f] = !m.paused[f]
}
