package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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
			return &queueBatched{q: q, size: size, es: make([]queuestore.Event, size), items: make([]queuestore.SettleItem, size)}, nil
		},
	}
}

type queueBatched struct {
	q     *queuestore.Store
	size  int
	n     int
	es    []queuestore.Event
	items []queuestore.SettleItem
}

// Step enqueues, claims and acks one batch of size events.
func (b *queueBatched) Step(ctx context.Context) (int, error) {
	for i := range b.es {
		b.n++
		b.es[i] = queuestore.Event{ID: fmt.Sprintf("e%d", b.n), Flow: flowName(i), Body: body}
	}
	if _, err := b.q.EnqueueBatch(ctx, b.es, now); err != nil {
		return 0, err
	}
	cs, err := b.q.ClaimBatch(ctx, now, b.size)
	if err != nil {
		return 0, err
	}
	if len(cs) != b.size {
		return 0, fmt.Errorf("claim batch: %d claims, want %d", len(cs), b.size)
	}
	for i, c := range cs {
		b.items[i] = queuestore.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queuestore.Result{OK: true}}
	}
	ss, err := b.q.SettleBatch(ctx, b.items, now)
	if err != nil {
		return 0, err
	}
	for i, s := range ss {
		if s.Err != nil || s.Outcome != queuestore.Acked {
			return 0, fmt.Errorf("settle batch item %d: %s, %v, want acked", i, s.Outcome, s.Err)
		}
	}
	return b.size, nil
}

// Close closes the queue.
func (b *queueBatched) Close() error { return b.q.Close() }
