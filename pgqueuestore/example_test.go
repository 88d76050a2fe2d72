package pgqueuestore_test

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
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

// An order and the event that announces it, in one transaction of the
// application's: both commit, or neither (docs/postgres.md, "Enqueue in
// your transaction"). The store and the business table share the
// database; the event's ID is derived from the order, so a retry of the
// whole transaction cannot enqueue it twice. (Not run by go test: it
// needs a server and a schema of its own, as Example does.)
func ExampleStore_EnqueueTx() {
	ctx := context.Background()
	url := "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	s, err := pgqueuestore.Open(ctx, url, pgqueuestore.WithSchema("example_outbox"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	conn, err := pgx.Connect(ctx, url) // the application's own connection
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS example_outbox.orders (id text PRIMARY KEY, total bigint NOT NULL)`); err != nil {
		fmt.Println(err)
		return
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO example_outbox.orders (id, total) VALUES ($1, $2)`, "o-17", 4200); err != nil {
			return err
		}
		r, err := s.EnqueueTx(ctx, tx, queue.Event{ID: "order-created/o-17", Flow: "tenant-a",
			Body: []byte(`{"order":"o-17","total":4200}`)}, 1)
		if err != nil {
			return err
		}
		fmt.Println("enqueued as seq", r.Seq)
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, ok, err := s.Claim(ctx, 2) // the commit made it claimable
	fmt.Println(c.EventID, ok, err)
	// On a new schema this prints:
	// enqueued as seq 1
	// order-created/o-17 true <nil>
}
