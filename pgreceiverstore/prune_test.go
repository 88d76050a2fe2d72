package pgreceiverstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
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

// TestPrune_MoreAfterAConcurrentPrune: a Prune whose batch another pruner
// deleted first (it read the batch, then waited for the flow's lock) says
// More, so that a pruning loop goes on to the receipts after it.
func TestPrune_MoreAfterAConcurrentPrune(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	s, url, _ := open(t, WithNow(func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) }))
	for i := range int64(10) {
		if o, err := s.Receive(ctx, msg(fmt.Sprintf("m%d", i+1), "f", i+1, 1)); err != nil || o != receiver.Accepted {
			t.Fatalf("Receive = %s, %v", o, err)
		}
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	key := lockKey("flow", s.schema, "f")
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	before := base.Add(time.Hour)
	type answer struct {
		r   receiver.PruneResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := s.Prune(ctx, before, 5)
		got <- answer{r, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting bool
		if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
    AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1)`,
			int64(uint64(key)>>32), int64(uint32(key))).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Prune never waited for the flow's lock")
		}
	}
	// Another pruner deletes the batch the waiting Prune read.
	if _, err := c.Exec(ctx, s.q(`DELETE FROM {s}.receipts WHERE id IN ('m1', 'm2', 'm3', 'm4', 'm5')`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || a.r != (receiver.PruneResult{More: true}) {
		t.Fatalf("Prune after its batch was deleted = %+v, %v; want nothing deleted and More", a.r, a.err)
	}
	if r, err := s.Prune(ctx, before, 5); err != nil || r.Receipts != 5 {
		t.Fatalf("the next Prune = %+v, %v; want the 5 receipts left", r, err)
	}
}
