package pgqueuestore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// TestRoundTrips_Enqueue: an enqueue takes as many round trips whether it
// locks its IDs one by one or escalates to the enqueue key (the lock
// statement goes in the round trip that begins the transaction): an
// Enqueue or EnqueueBatch two (BEGIN with the locks, the locked meta row
// and the reads; the writes with COMMIT), an EnqueueBatchTx two in the
// caller's transaction (the savepoint, the locks and the reads; the
// writes), for a batch of 64 and of 1,000 alike.
func TestRoundTrips_Enqueue(t *testing.T) {
	ctx := context.Background()
	var c tripCounter
	s := openCounted(t, &c)
	mk := func(p string, n int) []queue.Event {
		es := make([]queue.Event, n)
		for i := range es {
			es[i] = queue.Event{ID: fmt.Sprintf("%s-%d", p, i), Flow: fmt.Sprintf("f%02d", i%64), Body: []byte("x")}
		}
		return es
	}
	round := 0
	ops := []struct {
		name string
		want int64
		op   func() error
	}{
		{"Enqueue", 2, func() error {
			_, err := s.Enqueue(ctx, queue.Event{ID: fmt.Sprintf("one-%d", round), Flow: "f00", Body: []byte("x")}, 0)
			return err
		}},
		{"EnqueueBatch of 64", 2, func() error {
			_, err := s.EnqueueBatch(ctx, mk(fmt.Sprintf("s%d", round), 64), 0)
			return err
		}},
		{"EnqueueBatch of 1,000", 2, func() error {
			_, err := s.EnqueueBatch(ctx, mk(fmt.Sprintf("b%d", round), 1000), 0)
			return err
		}},
		{"EnqueueBatchTx of 64", 2, nil},
		{"EnqueueBatchTx of 1,000", 2, nil},
	}
	for k, n := range map[int]int{3: 64, 4: 1000} {
		ops[k].op = func() error {
			conn, err := s.pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if _, err := s.EnqueueBatchTx(ctx, tx, mk(fmt.Sprintf("t%d-%d", round, n), n), 0); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
	}
	// The first rounds prepare the statements (a round trip each).
	for round = range 3 {
		for _, o := range ops {
			before := c.n.Load()
			if err := o.op(); err != nil {
				t.Fatalf("%s: %v", o.name, err)
			}
			got := c.n.Load() - before
			if strings.HasPrefix(o.name, "EnqueueBatchTx") {
				got -= 2 // BEGIN and COMMIT are the caller's
				// The next write turn would promote the committed
				// events, a round trip more: not the enqueue's.
				if err := s.promoteWaiting(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if round == 2 && got != o.want {
				t.Errorf("%s: %d round trips, want %d", o.name, got, o.want)
			}
		}
	}
}
