package queuestore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
)

// Example enqueues two events in two flows, claims them in fair order, and
// settles them: one success, one failure that is scheduled for a retry.
func Example() {
	dir, err := os.MkdirTemp("", "queuestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	for _, e := range []queuestore.Event{
		{ID: "order-1", Flow: "tenant-b", Body: []byte(`{"delta": 5}`)},
		{ID: "order-2", Flow: "tenant-a", Body: []byte(`{"delta": 7}`)},
	} {
		r, err := s.Enqueue(ctx, e, 0)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("enqueued %s as %s #%d\n", e.ID, e.Flow, r.Seq)
	}

	for i, now := range []clock.Tick{1, 2} {
		c, ok, err := s.Claim(ctx, now)
		if err != nil || !ok {
			log.Fatal(ok, err)
		}
		fmt.Printf("claim ticket %d: %s (%s) generation %d, lease until %d\n",
			c.Ticket, c.EventID, c.Body, c.Generation, c.LeaseUntil)
		r := queuestore.Result{OK: true}
		if i == 1 {
			r = queuestore.Result{Reason: "unavailable"}
		}
		o, err := s.Settle(ctx, c.EventID, c.Generation, r, now)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("settled:", o)
	}
	e, err := s.Event(ctx, "order-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s is %s again at tick %d (reason %s)\n", e.ID, e.State, e.AvailableAt, e.Reason)

	// Output:
	// enqueued order-1 as tenant-b #1
	// enqueued order-2 as tenant-a #1
	// claim ticket 1: order-2 ({"delta": 7}) generation 1, lease until 6
	// settled: acked
	// claim ticket 2: order-1 ({"delta": 5}) generation 1, lease until 7
	// settled: retry_scheduled
	// order-1 is pending again at tick 4 (reason unavailable)
}

// ExampleWithRealTime opens a queue whose ticks are wall-clock
// milliseconds, with a policy in milliseconds, and shows the real-time
// rules: a write slightly below the mark happens at the mark, a tick far
// ahead of the wall clock (seconds mistaken for milliseconds ×1000) is
// refused. A Manual source stands in for clock.Wall{} so the output is
// fixed.
func ExampleWithRealTime() {
	dir, err := os.MkdirTemp("", "queuestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	wall := clock.NewManual(1_767_323_045_000) // in production: clock.Wall{}
	policy := queuestore.Policy{Lease: 30_000, MaxAttempts: 5, BackoffBase: 1_000, BackoffCap: 60_000, Jitter: true}
	s, err := queuestore.Open(filepath.Join(dir, "queue.db"),
		queuestore.WithPolicy(policy), queuestore.WithRealTime(wall, 1_000))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	now := wall.Now()
	if _, err := s.Enqueue(ctx, queuestore.Event{ID: "order-1", Flow: "tenant-a", Body: []byte(`{"delta": 5}`)}, now); err != nil {
		log.Fatal(err)
	}
	// A worker that read the clock 200 ms earlier, before it got the write
	// turn: its claim happens at the mark.
	c, _, err := s.Claim(ctx, now-200)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("lease ends", c.LeaseUntil-now, "ms after the mark")

	// The handler runs long: extend the lease before it ends.
	wall.Advance(20_000)
	o, err := s.Extend(ctx, c.EventID, c.Generation, wall.Now())
	fmt.Println(o, err)

	// A caller handing in microseconds by mistake is refused; nothing moves.
	_, err = s.Enqueue(ctx, queuestore.Event{ID: "order-2", Flow: "tenant-a", Body: []byte("x")}, wall.Now()*1000)
	fmt.Println(errors.Is(err, queuestore.ErrTimeAhead))

	due, ok, err := s.NextDue(ctx)
	fmt.Println("next due in", due-wall.Now(), "ms", ok, err)
	// Output:
	// lease ends 30000 ms after the mark
	// extended <nil>
	// true
	// next due in 30000 ms true <nil>
}
