package pgreceiverstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
)

// TestPrune_BoundsFlowsPerTransaction: a batch over many flows deletes the
// oldest receipts of at most maxPruneFlows flows per transaction (one
// advisory lock each), says More, and the next batches take the rest, so a
// default batch never asks the server's shared lock table for a thousand
// locks at once.
func TestPrune_BoundsFlowsPerTransaction(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	s, _, _ := open(t, WithNow(func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) }))
	const flows = 3*maxPruneFlows + 5
	for i := range flows {
		m := receiver.Message{ID: fmt.Sprintf("e%d", i), Flow: fmt.Sprintf("f%03d", i), Seq: 1, Body: []byte(`{"delta": 1}`)}
		if o, err := s.Receive(ctx, m); err != nil || o != receiver.Accepted {
			t.Fatalf("Receive(%s) = %s, %v", m.ID, o, err)
		}
	}
	before := base.Add(time.Hour)
	var batches []receiver.PruneResult
	for {
		r, err := s.Prune(ctx, before, receiver.DefaultPruneBatch)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, r)
		if !r.More {
			break
		}
		if len(batches) > flows {
			t.Fatalf("Prune never stops saying More: %+v", batches)
		}
	}
	want := []receiver.PruneResult{{Receipts: maxPruneFlows, More: true}, {Receipts: maxPruneFlows, More: true}, {Receipts: maxPruneFlows, More: true}, {Receipts: 5}}
	if fmt.Sprint(batches) != fmt.Sprint(want) {
		t.Fatalf("batches = %+v, want %+v", batches, want)
	}
	fs, err := s.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.PrunedThrough != 1 || f.Total != 1 || f.NextExpected != 2 {
			t.Fatalf("flow after the prune = %+v, want pruned through 1, total 1, next 2", f)
		}
	}
}
