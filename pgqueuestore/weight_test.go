package pgqueuestore

import (
	"context"
	"errors"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// This backend keeps no flow weights yet (docs/contract.md §7.7): an event
// that carries one is refused, in Enqueue and in EnqueueBatch, and nothing
// is written; Flows reports every flow at weight 1.
func TestWeightRefusedNothingWritten(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	if _, err := s.Enqueue(ctx, queue.Event{ID: "a-1", Flow: "a", Body: []byte(`{"delta": 1}`), Weight: 2}, 1); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("Enqueue with a weight: %v, want ErrInvalid", err)
	}
	if _, err := s.EnqueueBatch(ctx, []queue.Event{{ID: "b-1", Flow: "b", Body: []byte("x")}, {ID: "c-1", Flow: "c", Body: []byte("x"), Weight: 3}}, 1); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("EnqueueBatch with a weight: %v, want ErrInvalid", err)
	}
	flows, err := s.Flows(ctx)
	if err != nil || len(flows) != 0 {
		t.Fatalf("after the refusals: flows %v, %v; want none", flows, err)
	}
	if _, err := s.Enqueue(ctx, queue.Event{ID: "a-1", Flow: "a", Body: []byte(`{"delta": 1}`)}, 1); err != nil {
		t.Fatal(err)
	}
	flows, err = s.Flows(ctx)
	if err != nil || len(flows) != 1 || flows[0].Weight != 1 {
		t.Fatalf("Flows = %+v, %v; want one flow of weight 1", flows, err)
	}
}
