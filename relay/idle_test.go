package relay_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
)

// untilIdle runs RunUntilIdle in the background; the channel gets its error.
func untilIdle(t *testing.T, q relay.Queue, h relay.Handler, o relay.Options) (*relay.Relay, <-chan error) {
	t.Helper()
	r, err := relay.New(q, h, o)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- r.RunUntilIdle(context.Background()) }()
	return r, errc
}

func wait(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("RunUntilIdle did not return")
		return nil
	}
}

var deliver = relay.HandlerFunc(func(context.Context, relay.Event) error { return nil })

// An empty queue is idle at once; a drained one once the last event is acked.
func TestRunUntilIdle_DeliversEverythingThenReturnsNil(t *testing.T) {
	t.Parallel()
	empty := openStore(t, testPolicy(10, 3))
	if _, errc := untilIdle(t, empty, deliver, relay.Options{Clock: relay.NewManualClock(0), Poll: time.Hour}); wait(t, errc) != nil {
		t.Fatal("RunUntilIdle() on an empty queue != nil")
	}

	s := openStore(t, testPolicy(10, 3))
	enqueue(t, s, "a", 30, 0)
	enqueue(t, s, "b", 20, 0)
	r, errc := untilIdle(t, s, deliver, relay.Options{Clock: relay.NewManualClock(0), Poll: time.Hour, Concurrency: 4})
	if err := wait(t, errc); err != nil {
		t.Fatalf("RunUntilIdle() = %v, want nil", err)
	}
	if st := stats(t, s); st.Events.Acked != 50 || st.Events.Pending != 0 || st.Events.Inflight != 0 {
		t.Fatalf("stats after idle = %+v, want 50 acked and nothing else", st.Events)
	}
	if tot := r.Totals(); tot.Delivered != 50 || tot.InFlight != 0 {
		t.Fatalf("Totals() = %+v, want 50 delivered", tot)
	}
	if err := r.RunUntilIdle(context.Background()); !errors.Is(err, relay.ErrRunning) {
		t.Fatalf("second RunUntilIdle() = %v, want ErrRunning", err)
	}
}

// A head waiting for its backoff is due later, not idle: RunUntilIdle
// waits for it (here, for the logical clock to pass it) and returns nil
// once the retry is delivered.
func TestRunUntilIdle_WaitsForABackoff(t *testing.T) {
	t.Parallel()
	s := openStore(t, testPolicy(10, 3))
	enqueue(t, s, "a", 1, 0)
	clk := relay.NewManualClock(0)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		if e.Attempt == 1 {
			return relay.Fail("not_yet", nil)
		}
		return nil
	})
	r, errc := untilIdle(t, s, h, relay.Options{Clock: clk, Poll: time.Hour})
	waitStore(t, "the retry scheduled", func() bool {
		e, err := s.Event(context.Background(), "a-1")
		return err == nil && e.State == queue.StatePending && e.Attempts == 1
	})
	select {
	case err := <-errc:
		t.Fatalf("RunUntilIdle() = %v while a retry waited for its backoff", err)
	default:
	}
	clk.Advance(queuestore.BackoffCap)
	if err := wait(t, errc); err != nil {
		t.Fatalf("RunUntilIdle() = %v, want nil", err)
	}
	if tot := r.Totals(); tot.Retried != 1 || tot.Delivered != 1 {
		t.Fatalf("Totals() = %+v, want 1 retried, 1 delivered", tot)
	}
}

// An idle end with a quarantined head and an event waiting behind it is
// ErrUndelivered, with both counts.
func TestRunUntilIdle_UndeliveredCounts(t *testing.T) {
	t.Parallel()
	s := openStore(t, testPolicy(10, 3))
	enqueue(t, s, "bad", 2, 0)
	enqueue(t, s, "good", 3, 0)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		if e.ID == "bad-1" {
			return relay.FailPermanent("refused", nil)
		}
		return nil
	})
	r, errc := untilIdle(t, s, h, relay.Options{Clock: relay.NewManualClock(0), Poll: time.Hour})
	err := wait(t, errc)
	var u *relay.UndeliveredError
	if !errors.Is(err, relay.ErrUndelivered) || !errors.As(err, &u) || u.Quarantined != 1 || u.Waiting != 1 {
		t.Fatalf("RunUntilIdle() = %v, want ErrUndelivered with 1 quarantined and 1 waiting", err)
	}
	if tot := r.Totals(); tot.Delivered != 3 || tot.Quarantined != 1 || tot.Permanent != 1 {
		t.Fatalf("Totals() = %+v, want 3 delivered, 1 quarantined (permanent)", tot)
	}
}

// A context that ends before the queue is idle ends the run as Run's does,
// and the error says so.
func TestRunUntilIdle_ContextEndsFirst(t *testing.T) {
	t.Parallel()
	s := openStore(t, testPolicy(1000, 3))
	enqueue(t, s, "a", 2, 0)
	started, release := make(chan struct{}), make(chan struct{})
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		close(started)
		<-release
		return nil
	})
	r, err := relay.New(s, h, relay.Options{Clock: relay.NewManualClock(0), Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.RunUntilIdle(ctx) }()
	<-started
	stop := errors.New("operator stop")
	cancel(stop)
	close(release) // the running handler finishes within the grace period
	if err := wait(t, errc); !errors.Is(err, stop) || errors.Is(err, relay.ErrUndelivered) {
		t.Fatalf("RunUntilIdle() = %v, want an error wrapping the context's cause", err)
	}
	if st := stats(t, s); st.Events.Acked != 1 || st.Events.Pending != 1 {
		t.Fatalf("stats = %+v, want the started event acked at shutdown and the other pending", st.Events)
	}
}

// The Producer enqueues at its clock's tick and wakes the relay; In makes
// a NotBefore from a delay.
func TestProducer_UsesItsClockAndNotifies(t *testing.T) {
	t.Parallel()
	if _, err := relay.NewProducer(nil, relay.ProducerOptions{}); !errors.Is(err, relay.ErrInvalid) {
		t.Fatalf("NewProducer(nil) = %v, want ErrInvalid", err)
	}
	s := openStore(t, testPolicy(10, 3))
	clk := relay.NewManualClock(40)
	woken := 0
	p, err := relay.NewProducer(s, relay.ProducerOptions{Clock: clk, Notify: func() { woken++ }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res, err := p.Enqueue(ctx, queue.Event{ID: "e1", Flow: "f", Body: []byte(`{}`)}); err != nil || res.Seq != 1 {
		t.Fatalf("Enqueue() = %+v, %v", res, err)
	}
	clk.Advance(5)
	if res, err := p.EnqueueBatch(ctx, []queue.Event{{ID: "e2", Flow: "f", Body: []byte(`{}`)}, {ID: "e3", Flow: "g", Body: []byte(`{}`)}}); err != nil || len(res) != 2 || res[0].Seq != 2 {
		t.Fatalf("EnqueueBatch() = %+v, %v", res, err)
	}
	if res, err := p.Enqueue(ctx, queue.Event{ID: "e1", Flow: "f", Body: []byte(`{}`)}); err != nil || !res.Duplicate {
		t.Fatalf("Enqueue() of a stored event = %+v, %v; want a Duplicate", res, err)
	}
	if woken != 2 {
		t.Fatalf("Notify called %d times, want 2 (not for a Duplicate)", woken)
	}
	for id, want := range map[string]clock.Tick{"e1": 40, "e2": 45, "e3": 45} {
		if e, err := s.Event(ctx, id); err != nil || e.AvailableAt != want {
			t.Fatalf("%s available at %d (%v), want %d", id, e.AvailableAt, err, want)
		}
	}
	if got := p.In(1500 * time.Microsecond); got != 47 {
		t.Fatalf("In(1.5ms) at tick 45 = %d, want 47 (rounded up)", got)
	}
	if got := p.In(-time.Second); got != 45 {
		t.Fatalf("In(-1s) = %d, want now (45)", got)
	}
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	if got := p.At(at); got != clock.Tick(at.UnixMilli()) {
		t.Fatalf("At(%v) = %d, want its Unix milliseconds", at, got)
	}
}

// In counts a delay in milliseconds rounded up, the longest delays
// included: math.MaxInt64 ns is about 9.2e12 ticks, not a tick wrapped
// negative (the conversion a failure's RetryAfter goes through too).
func TestProducer_InRoundsUpWithoutOverflow(t *testing.T) {
	t.Parallel()
	p, err := relay.NewProducer(openStore(t, testPolicy(10, 3)), relay.ProducerOptions{Clock: relay.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d    time.Duration
		want clock.Tick
	}{
		{math.MinInt64, 0},
		{0, 0},
		{1, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{math.MaxInt64 - 1, math.MaxInt64/1_000_000 + 1},
		{math.MaxInt64, math.MaxInt64/1_000_000 + 1},
	} {
		if got := p.In(c.d); got != c.want {
			t.Errorf("In(%d) at tick 0 = %d, want %d", c.d, got, c.want)
		}
	}
}

// A scheduled event (NotBefore, made with the Producer's In) is due later,
// not idle: RunUntilIdle delivers what is due now and waits for it; a
// paused flow's events are not due at all, so they leave it idle, as
// undelivered.
func TestRunUntilIdle_WaitsForAScheduledEventNotAPausedFlow(t *testing.T) {
	t.Parallel()
	s := openStore(t, testPolicy(10, 3))
	clk := relay.NewManualClock(0)
	p, err := relay.NewProducer(s, relay.ProducerOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, e := range []queue.Event{
		{ID: "now", Flow: "a", Body: []byte(`{}`)},
		{ID: "later", Flow: "b", Body: []byte(`{}`), NotBefore: p.In(50 * time.Millisecond)}, // tick 50
		{ID: "held", Flow: "c", Body: []byte(`{}`)},
	} {
		if _, err := p.Enqueue(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PauseFlow(ctx, "c", "maintenance", 0); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Event(ctx, "later"); err != nil || e.AvailableAt != 50 {
		t.Fatalf("Event(later) = %+v, %v; want available at tick 50", e, err)
	}
	r, errc := untilIdle(t, s, deliver, relay.Options{Clock: clk, Poll: time.Hour})
	waitStore(t, "the due event acked", func() bool { return stats(t, s).Events.Acked == 1 })
	select {
	case err := <-errc:
		t.Fatalf("RunUntilIdle() = %v while a scheduled event waited", err)
	default:
	}
	clk.Set(50)
	var u *relay.UndeliveredError
	if err := wait(t, errc); !errors.As(err, &u) || u.Quarantined != 0 || u.Waiting != 1 {
		t.Fatalf("RunUntilIdle() = %v, want ErrUndelivered with the paused flow's event waiting", err)
	}
	if tot := r.Totals(); tot.Delivered != 2 {
		t.Fatalf("Totals() = %+v, want 2 delivered (now, later)", tot)
	}
}
