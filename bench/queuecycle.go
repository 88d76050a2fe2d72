package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// BatchedQueueCycle is the queue side of [BatchedRelayCycle]: EnqueueBatch →
// ClaimBatch → SettleBatch, three durable commits per batch of size events,
// one event in each of size flows, size events per Step. It is what River's
// insert → fetch → complete does, so it is the SQLite row compared with
// River on SQLite.
func BatchedQueueCycle(size int) Case {
	return Case{
		Name: fmt.Sprintf("queue/batch-%d", size),
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
			if err != nil {
				return nil, err
			}
			return &queueBatched{batchedCycle: newBatchedCycle(q, size), q: q}, nil
		},
	}
}

// cycleQueue is what a batched cycle needs of a queue: *queuestore.Store
// and *pgqueuestore.Store both have it.
type cycleQueue interface {
	BatchEnqueuer
	ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error)
	SettleBatch(ctx context.Context, items []queue.SettleItem, now clock.Tick) ([]queue.SettleResult, error)
}

// batchedCycle is the queue cycle at size events: EnqueueBatch → ClaimBatch
// → SettleBatch (all acked), the same Step on either backend.
type batchedCycle struct {
	cq    cycleQueue
	size  int
	n     int
	es    []queue.Event
	items []queue.SettleItem
}

func newBatchedCycle(q cycleQueue, size int) batchedCycle {
	return batchedCycle{cq: q, size: size, es: make([]queue.Event, size), items: make([]queue.SettleItem, size)}
}

// Step enqueues, claims and acks one batch of size events.
func (b *batchedCycle) Step(ctx context.Context) (int, error) {
	for i := range b.es {
		b.n++
		b.es[i] = queue.Event{ID: fmt.Sprintf("e%d", b.n), Flow: flowName(i), Body: body}
	}
	if _, err := b.cq.EnqueueBatch(ctx, b.es, now); err != nil {
		return 0, err
	}
	cs, err := b.cq.ClaimBatch(ctx, now, b.size)
	if err != nil {
		return 0, err
	}
	if len(cs) != b.size {
		return 0, fmt.Errorf("claim batch: %d claims, want %d", len(cs), b.size)
	}
	for i, c := range cs {
		b.items[i] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}}
	}
	ss, err := b.cq.SettleBatch(ctx, b.items, now)
	if err != nil {
		return 0, err
	}
	if err := allAcked(ss); err != nil {
		return 0, err
	}
	return b.size, nil
}

// queueBatched is the cycle on a queuestore, which Close closes.
type queueBatched struct {
	batchedCycle
	q io.Closer
}

// Close closes the queue.
func (b *queueBatched) Close() error { return b.q.Close() }
