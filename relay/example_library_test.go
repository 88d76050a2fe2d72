package relay_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
)

// Order is the body of the examples' events.
type Order struct {
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// ExampleJSONHandler writes a typed handler: the body arrives decoded. A
// body that does not decode is quarantined at once with reason
// invalid_body, and the handler never sees it.
func ExampleJSONHandler() {
	dir, _ := os.MkdirTemp("", "relay-example")
	defer os.RemoveAll(dir)
	q, _ := queuestore.Open(filepath.Join(dir, "queue.db"))
	defer q.Close()
	ctx := context.Background()
	q.Enqueue(ctx, queue.Event{ID: "o-1", Flow: "shop-1", Body: []byte(`{"item":"tea","quantity":2,"note":"ignored"}`)}, 0)
	q.Enqueue(ctx, queue.Event{ID: "o-2", Flow: "shop-2", Body: []byte(`{"item":"tea","quantity":"two"}`)}, 0)

	h := relay.JSONHandler(func(ctx context.Context, e relay.Event, o Order) error {
		fmt.Printf("%s: %d × %s\n", e.ID, o.Quantity, o.Item)
		return nil
	})
	r, _ := relay.New(q, h, relay.Options{Clock: relay.NewManualClock(0)})
	err := r.RunUntilIdle(ctx)
	fmt.Println("idle:", err)
	bad, _ := q.Event(ctx, "o-2")
	fmt.Println(bad.State, bad.Reason, "-", bad.Error)
	// Output:
	// o-1: 2 × tea
	// idle: relay: idle with events not delivered: 1 quarantined during this run, 0 waiting behind quarantined heads, in paused flows or in paused destinations
	// quarantined invalid_body - json: cannot unmarshal string into Go struct field Order.quantity of type int
}

// ExampleRelay_RunUntilIdle drains a queue and returns, as
// 'relayctl relay --exit-when-idle' does: nil when everything was
// delivered, ErrUndelivered (with counts) when something was quarantined.
func ExampleRelay_RunUntilIdle() {
	dir, _ := os.MkdirTemp("", "relay-example")
	defer os.RemoveAll(dir)
	q, _ := queuestore.Open(filepath.Join(dir, "queue.db"))
	defer q.Close()
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		q.Enqueue(ctx, queue.Event{ID: fmt.Sprintf("e%d", i), Flow: "f", Body: []byte(`{}`)}, 0)
	}
	r, _ := relay.New(q, relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		if e.ID == "e2" {
			return relay.FailPermanent("refused", errors.New("no such customer"))
		}
		return nil
	}), relay.Options{Clock: relay.NewManualClock(0)})

	err := r.RunUntilIdle(ctx)
	var u *relay.UndeliveredError
	if errors.As(err, &u) {
		fmt.Printf("undelivered: %d quarantined, %d waiting behind it\n", u.Quarantined, u.Waiting)
	}
	fmt.Printf("delivered %d\n", r.Totals().Delivered)
	// Output:
	// undelivered: 1 quarantined, 1 waiting behind it
	// delivered 1
}

// ExampleProducer enqueues in real time without handing ticks: the
// producer reads the wall clock and wakes the relay of the same process.
// In schedules an event (Event.NotBefore) 20 ms from now.
func ExampleProducer() {
	dir, _ := os.MkdirTemp("", "relay-example")
	defer os.RemoveAll(dir)
	q, _ := queuestore.Open(filepath.Join(dir, "queue.db"),
		queuestore.WithRealTime(clock.Wall{}, 1000),
		queuestore.WithPolicy(queuestore.Policy{Lease: 30_000, MaxAttempts: 3, BackoffBase: 100, BackoffCap: 1000}))
	defer q.Close()
	ctx := context.Background()

	r, _ := relay.New(q, relay.JSONHandler(func(ctx context.Context, e relay.Event, o Order) error {
		fmt.Println("delivered", e.ID, o.Item)
		return nil
	}), relay.Options{})
	p, _ := relay.NewProducer(q, relay.ProducerOptions{Notify: r.Notify})
	p.Enqueue(ctx, queue.Event{ID: "now", Flow: "shop-1", Body: []byte(`{"item":"tea"}`)})
	p.Enqueue(ctx, queue.Event{ID: "later", Flow: "shop-1", Body: []byte(`{"item":"cake"}`), NotBefore: p.In(20 * time.Millisecond)})

	fmt.Println("idle:", r.RunUntilIdle(ctx))
	// Output:
	// delivered now tea
	// delivered later cake
	// idle: <nil>
}
