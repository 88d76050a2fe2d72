package pgqueuestore_test

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
)

// A queue in its own schema: enqueue, claim in MinServed order, settle.
// (Not run by go test: it needs a server, and a schema of its own; the
// package's tests make one per test with pgtest.)
func Example() {
	ctx := context.Background()
	s, err := pgqueuestore.Open(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		pgqueuestore.WithSchema("example_queue"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	if _, err := s.Enqueue(ctx, queue.Event{ID: "evt-1", Flow: "tenant-a", Body: []byte(`{"delta": 5}`)}, 1); err != nil {
		fmt.Println(err)
		return
	}
	c, ok, err := s.Claim(ctx, 2)
	if err != nil || !ok {
		fmt.Println(ok, err)
		return
	}
	o, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, 3)
	fmt.Println(c.EventID, c.Ticket, c.LeaseUntil, o, err)
	// On a new schema this prints: evt-1 1 7 acked <nil>
}
