package queuestore

import (
	"context"
	"errors"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// The write paths run on the driver (drivertx), where database/sql's Tx used
// to watch the context. docs/contract.md §2: every operation is one transaction, so a
// write whose context is already canceled must fail with an error that wraps
// context.Canceled and change nothing, the clock mark included.
func TestWrites_CanceledContextChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 1)
	c := mustClaim(t, s, 2)
	enqueue(t, s, "b1", "b", "y", 2)
	before := snap(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const now clock.Tick = 3
	writes := []struct {
		name string
		run  func() error
	}{
		{"Enqueue", func() error {
			_, err := s.Enqueue(ctx, Event{ID: "a2", Flow: "a", Body: []byte("z")}, now)
			return err
		}},
		{"EnqueueBatch", func() error {
			_, err := s.EnqueueBatch(ctx, []Event{{ID: "c1", Flow: "c", Body: []byte("z")}}, now)
			return err
		}},
		{"Claim", func() error { _, _, err := s.Claim(ctx, now); return err }},
		{"ClaimBatch", func() error { _, err := s.ClaimBatch(ctx, now, 2); return err }},
		{"Settle", func() error {
			_, err := s.Settle(ctx, c.EventID, c.Generation, Result{OK: true}, now)
			return err
		}},
		{"SettleBatch", func() error {
			_, err := s.SettleBatch(ctx, []SettleItem{{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}}}, now)
			return err
		}},
		{"Redrive", func() error { return s.Redrive(ctx, c.EventID, c.Generation, "operator", now) }},
	}
	for _, w := range writes {
		err := w.run()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: error = %v, want one wrapping context.Canceled", w.name, err)
		}
		assertUnchanged(t, w.name+" with a canceled context", before, snap(t, s))
	}

	// The write connection is still usable afterwards.
	if o := settle(t, s, c.EventID, c.Generation, Result{OK: true}, now); o != Acked {
		t.Fatalf("Settle after the canceled writes = %q, want %q", o, Acked)
	}
}
