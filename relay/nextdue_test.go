package relay_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
)

// countingStore is a queuestore.Store that counts its claims (ClaimFor and
// SettleClaimFor, the calls a relay in destination mode claims with).
type countingStore struct {
	*queuestore.Store
	claims atomic.Int64
}

func (c *countingStore) ClaimFor(ctx context.Context, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.Claim, error) {
	c.claims.Add(1)
	return c.Store.ClaimFor(ctx, now, n, f)
}

func (c *countingStore) SettleClaimFor(ctx context.Context, items []queue.SettleItem, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.SettleResult, []queue.Claim, error) {
	c.claims.Add(1)
	return c.Store.SettleClaimFor(ctx, items, now, n, f)
}

// watchedClock is a ManualClock that reports each call of Moved, which
// the relay's loop makes once at the start of every turn (turns is
// buffered; a report beyond its room is dropped).
type watchedClock struct {
	*relay.ManualClock
	turns chan struct{}
}

func (w watchedClock) Moved() <-chan struct{} {
	ch := w.ManualClock.Moved()
	select {
	case w.turns <- struct{}{}:
	default:
	}
	return ch
}

// In destination mode, a claim cut short by the store's own limit (here a
// destination's concurrency of 1, with a second flow of it dispatchable)
// makes the relay wait destRecheck ticks before it claims again, as after
// one its own filter cut short: NextDue still says a head is due now (a
// limit is transient), and claiming again at every tick would spin. The
// relay's own filter leaves nothing out here (4 slots of 4 for the
// destination), so only destination mode holds the claim back.
func TestDestinationMode_StoreLimitDoesNotSpin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &countingStore{Store: openStore(t, testPolicy(1000, 3))}
	if err := s.PutDestination(ctx, queue.Destination{Name: "a", URL: "http://127.0.0.1:9/", Secrets: []string{"k"}, Concurrency: 1}, "r", 0); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"fa1", "fa2"} {
		if _, err := s.Enqueue(ctx, queue.Event{ID: f, Flow: f, Body: []byte(`{}`), Destination: "a"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	entered, release := make(chan string, 2), make(chan struct{})
	var once sync.Once
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		entered <- e.ID
		<-release
		return nil
	})
	clk := watchedClock{relay.NewManualClock(0), make(chan struct{}, 64)}
	r, err := relay.New(s, h, relay.Options{Clock: clk, Poll: time.Hour, Concurrency: 4, DestinationSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- r.Run(rctx) }()
	defer func() {
		once.Do(func() { close(release) })
		cancel()
		<-errc
	}()
	within := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the relay did not get there", what)
		}
	}
	var first string
	select {
	case first = <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery started")
	}
	if got := s.claims.Load(); got != 1 {
		t.Fatalf("claims before the clock moved = %d, want 1", got)
	}
	// Two moves of one tick each: the loop's turn that reads tick 1 (or 2)
	// has ended once it starts the turn after the second move (the loop
	// sleeps in between: its handler is held, its timers are far off).
	for range 2 {
		for len(clk.turns) > 0 {
			<-clk.turns
		}
		clk.Advance(1)
		within("a turn after the clock moved", clk.turns)
	}
	if got := s.claims.Load(); got != 1 {
		t.Fatalf("claims by tick 2 = %d, want 1 (no new claim before tick %d while the store's limit holds)", got, 20)
	}
	once.Do(func() { close(release) })
	select {
	case second := <-entered:
		if second == first {
			t.Fatalf("delivered %s twice", first)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second flow was not delivered once the first settled")
	}
}

// RunUntilIdle ends while a paused destination holds events (its heads are
// not due, docs/contract.md §7.11): the other flows are delivered, and the
// *UndeliveredError counts the paused destination's events.
func TestRunUntilIdle_PausedDestinationCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, testPolicy(10, 3))
	if err := s.PutDestination(ctx, queue.Destination{Name: "a", URL: "http://127.0.0.1:9/", Secrets: []string{"k"}}, "r", 0); err != nil {
		t.Fatal(err)
	}
	for i, f := range []string{"fa", "fa", "fd"} {
		dest := "a"
		if f == "fd" {
			dest = ""
		}
		if _, err := s.Enqueue(ctx, queue.Event{ID: f + string(rune('0'+i)), Flow: f, Body: []byte(`{}`), Destination: dest}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PauseDestination(ctx, "a", "down", 0); err != nil {
		t.Fatal(err)
	}
	r, errc := untilIdle(t, s, deliver, relay.Options{Clock: relay.NewManualClock(0), Poll: time.Hour})
	err := wait(t, errc)
	var u *relay.UndeliveredError
	if !errors.As(err, &u) || u.Quarantined != 0 || u.Waiting != 2 || u.PausedDestinations != 1 || u.InPausedDestinations != 2 {
		t.Fatalf("RunUntilIdle() = %v (%+v), want an UndeliveredError with 2 waiting in 1 paused destination", err, u)
	}
	if want := "relay: idle with events not delivered: 0 quarantined during this run, 2 waiting behind quarantined heads, " +
		"in paused flows or in paused destinations (2 events in 1 paused destinations)"; err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
	if tot := r.Totals(); tot.Delivered != 1 {
		t.Fatalf("Totals() = %+v, want fd's event delivered", tot)
	}
}

// In destination mode, a destination whose breaker stays open while its
// heads stay due (its receiver down for long, the other destinations idle)
// costs a claim about once per Poll, not one every destRecheck ticks: each
// claim that leaves it out and comes back empty doubles the wait before
// the next, up to Poll (1000 ticks here). NextDue cannot tell when the
// head left out becomes claimable, and a claim is a write.
func TestDestinationMode_OpenBreakerBacksOff(t *testing.T) {
	t.Parallel()
	q := newFakeDest(testPolicy(100000, 1000))
	q.register(queue.Destination{Name: "x", URL: "http://127.0.0.1:9/", Secrets: []string{"k"}})
	q.enqueueTo("fx", "x", 1)
	h := relay.HandlerFunc(func(context.Context, relay.Event) error {
		return relay.FailDestination("down", nil)
	})
	const poll = time.Second // 1000 ticks
	clk := watchedClock{relay.NewManualClock(0), make(chan struct{}, 64)}
	r, err := relay.New(q, h, relay.Options{Clock: clk, Poll: poll, Concurrency: 4,
		Breaker: relay.BreakerOptions{Threshold: 1, MinProbe: time.Hour, MaxProbe: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	defer func() {
		cancel()
		<-errc
	}()
	q.waitFor(t, "x's failure settled", func() bool {
		e := q.byID["fx/1"]
		return e.state == "pending" && e.attempts == 1
	})
	if st := r.DestinationBreakers()["x"].State; st != relay.BreakerOpen {
		t.Fatalf("x's breaker is %s, want open", st)
	}
	claims := func() (n int) {
		q.get(func() { n = q.calls["claim"] + q.calls["settle_claim"] })
		return n
	}
	before, start := claims(), time.Now()
	// Move the clock 10 ticks at a time, one turn of the loop per move.
	const span, step = 100000, 10
	for range span / step {
		for len(clk.turns) > 0 {
			<-clk.turns
		}
		clk.Advance(step)
		select {
		case <-clk.turns:
		case <-time.After(30 * time.Second):
			t.Fatal("the relay took no turn after the clock moved")
		}
	}
	got := claims() - before
	// One claim per Poll of ticks, the doubling from 20 up to 1000 (7
	// claims), a few more, and one per Poll of real time (the poll).
	limit := span/1000 + 10 + int(time.Since(start)/poll) + 1
	t.Logf("claims over %d ticks with x's breaker open: %d (at most %d)", span, got, limit)
	if got > limit {
		t.Fatalf("claims over %d ticks with x's breaker open = %d, want at most %d (about one per Poll, not one per %d ticks)", span, got, limit, 20)
	}
	if got < span/1000/2 {
		t.Fatalf("claims over %d ticks = %d, want about one per Poll (1000 ticks)", span, got)
	}
	q.get(func() {
		f := (*q.filters)[len(*q.filters)-1]
		if !slices.Contains(f.Exclude, "x") {
			t.Errorf("last claim's filter = %+v, want x excluded", f)
		}
		if e := q.byID["fx/1"]; e.state != "pending" || e.avail > clk.Now() {
			t.Errorf("fx/1 = %+v, want pending and due", *e)
		}
	})
}
