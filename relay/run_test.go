package relay_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// running is a Relay started by start.
type running struct {
	r      *relay.Relay
	cancel context.CancelFunc
	errc   chan error
}

// start runs a relay on q until the test stops it (stop) or ends.
func start(t *testing.T, q relay.Queue, h relay.Handler, o relay.Options) *running {
	t.Helper()
	r, err := relay.New(q, h, o)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{r: r, cancel: cancel, errc: make(chan error, 1)}
	go func() { run.errc <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-run.errc:
		case <-time.After(30 * time.Second):
			t.Errorf("Run did not return after its context ended")
		}
	})
	return run
}

// stop ends the relay's context and returns Run's error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.errc:
		r.errc <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return after its context ended")
		return nil
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	h := relay.HandlerFunc(func(context.Context, relay.Event) error { return nil })
	for _, o := range []relay.Options{{Concurrency: -1}, {Batch: -1}, {Poll: -time.Second}, {Linger: -1}, {ShutdownGrace: -1},
		{Breaker: relay.BreakerOptions{Threshold: -1}}, {Breaker: relay.BreakerOptions{MinProbe: -1}}, {Breaker: relay.BreakerOptions{MaxProbe: -1}},
		{Breaker: relay.BreakerOptions{MinProbe: time.Minute, MaxProbe: time.Second}}} {
		if _, err := relay.New(q, h, o); !errors.Is(err, relay.ErrInvalid) {
			t.Errorf("New(%+v) error = %v, want ErrInvalid", o, err)
		}
	}
	if _, err := relay.New(nil, h, relay.Options{}); !errors.Is(err, relay.ErrInvalid) {
		t.Errorf("New(nil queue) error = %v, want ErrInvalid", err)
	}
	if _, err := relay.New(q, nil, relay.Options{}); !errors.Is(err, relay.ErrInvalid) {
		t.Errorf("New(nil handler) error = %v, want ErrInvalid", err)
	}
}

// TestRunWaitsForThePolicy: a relay that cannot read its queue's policy at
// the start (its database is away) retries, counted, until it can, then
// delivers; only its context's end stops the waiting, with the error. A
// second Run is ErrRunning.
func TestRunWaitsForThePolicy(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	q.enqueue("a", 2)
	q.fail["policy"] = errors.New("disk gone")
	reg := prometheus.NewRegistry()
	r, err := relay.New(q, relay.HandlerFunc(func(context.Context, relay.Event) error { return nil }),
		relay.Options{Clock: relay.NewManualClock(1), Poll: 20 * time.Millisecond, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	q.waitFor(t, "three failed policy reads", func() bool { return q.calls["policy"] >= 3 })
	q.get(func() { delete(q.fail, "policy") })
	q.waitFor(t, "both events acked", func() bool { return q.byID["a/1"].state == "acked" && q.byID["a/2"].state == "acked" })
	if n := testutil.ToFloat64(counter(t, reg, "fairrelay_store_errors_total", "policy")); n < 3 {
		t.Errorf("fairrelay_store_errors_total{op=policy} = %v, want >= 3", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v after the policy came back", err)
	}
	if err := r.Run(context.Background()); !errors.Is(err, relay.ErrRunning) {
		t.Fatalf("second Run() error = %v, want ErrRunning", err)
	}

	q2 := newFake(testPolicy(6, 3))
	q2.fail["policy"] = errors.New("disk gone")
	r2, err := relay.New(q2, relay.HandlerFunc(func(context.Context, relay.Event) error { return nil }), relay.Options{Clock: relay.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { // no t.Fatal off the test's goroutine: poll, then end the run
		for {
			var n int
			q2.get(func() { n = q2.calls["policy"] })
			if n >= 1 {
				cancel2()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if err := r2.Run(ctx2); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("Run() error = %v, want the policy error once the context ends", err)
	}
}

// TestResults checks how handler returns become settle results: nil is
// success, Fail carries its reason, a plain error is ReasonHandler, a bad
// Fail reason falls back to ReasonHandler, and a panic is ReasonPanic and
// does not stop the relay (the next events are still delivered).
func TestResults(t *testing.T) {
	q := newFake(testPolicy(6, 1))
	for _, flow := range []string{"ok", "gap", "plain", "badreason", "spaced", "panic"} {
		q.enqueue(flow, 2)
	}
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		if e.Seq == 2 {
			return nil
		}
		switch e.Flow {
		case "gap":
			return relay.Fail("gap", errors.New("seq 3 expected"))
		case "plain":
			return errors.New("boom")
		case "badreason":
			return relay.Fail("bad\nreason", nil)
		case "spaced":
			return relay.Fail(" spaced", nil) // printable, but the queue refuses a leading space
		case "panic":
			panic("handler bug")
		}
		return nil
	})
	run := start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 2, Poll: time.Hour})
	want := map[string]string{"ok/1": "acked", "gap/1": "quarantined:gap", "plain/1": "quarantined:" + relay.ReasonHandler,
		"badreason/1": "quarantined:" + relay.ReasonHandler, "spaced/1": "quarantined:" + relay.ReasonHandler, "panic/1": "quarantined:" + relay.ReasonPanic, "ok/2": "acked"}
	got := func(id string) string {
		e := q.byID[id]
		if e.state == "quarantined" {
			return e.state + ":" + e.reason
		}
		return e.state
	}
	q.waitFor(t, "every first event settled", func() bool {
		for id, w := range want {
			if got(id) != w {
				return false
			}
		}
		return true
	})
	if err := run.stop(t); err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	// A quarantined head blocks its flow: only ok/2 was delivered after them.
	if e := q.event("panic/2"); e.state != "pending" || e.attempts != 0 {
		t.Fatalf("panic/2 = %+v, want pending and never claimed", e)
	}
}

// TestPanicKeepsRelaying: a handler that panics on every first attempt; the
// relay retries after the backoff and the second attempt succeeds.
func TestPanicKeepsRelaying(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	q.enqueue("a", 3)
	clk := relay.NewManualClock(0)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		if e.Attempt == 1 {
			panic(fmt.Sprintf("first try of %s", e.ID))
		}
		return nil
	})
	start(t, q, h, relay.Options{Clock: clk, Poll: time.Hour})
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("a/%d", i)
		q.waitFor(t, id+" retried after its panic", func() bool { return q.byID[id].state == "pending" && q.byID[id].reason == relay.ReasonPanic })
		clk.Advance(queuestore.BackoffBase)
		q.waitFor(t, id+" acked", func() bool { return q.byID[id].state == "acked" })
	}
}

// longHandler is a handler that runs until release is closed; it counts
// its deliveries and notes a cancelled context.
type longHandler struct {
	started, release chan struct{}
	deliveries       atomic.Int32
	ctxErr           atomic.Value
}

func newLongHandler() *longHandler {
	return &longHandler{started: make(chan struct{}), release: make(chan struct{})}
}

func (h *longHandler) Handle(ctx context.Context, _ relay.Event) error {
	h.deliveries.Add(1)
	close(h.started)
	<-h.release
	if ctx.Err() != nil {
		h.ctxErr.Store(context.Cause(ctx))
	}
	return nil
}

// outlive moves clk one tick at a time to until while h runs, each time
// waiting for the relay to keep long/1's lease more than a third of lease
// ahead; then it releases h and checks that the event was delivered once,
// acked by its first claim, and that h's context was never cancelled. It
// returns the relay's extend calls.
func (h *longHandler) outlive(t *testing.T, q *fakeQueue, clk *relay.ManualClock, lease, until clock.Tick) int {
	t.Helper()
	<-h.started
	for clk.Now() < until {
		now := clk.Advance(1)
		// The relay extends once a third (2 ticks of 6) or less is left.
		q.waitFor(t, fmt.Sprintf("the lease kept alive at tick %d", now), func() bool {
			return q.byID["long/1"].lease-now > lease/3
		})
	}
	close(h.release)
	q.waitFor(t, "long/1 acked", func() bool { return q.byID["long/1"].state == "acked" })
	e := q.event("long/1")
	if h.deliveries.Load() != 1 || e.gen != 1 || e.attempts != 1 {
		t.Fatalf("deliveries = %d, generation = %d, attempts = %d, want 1, 1, 1", h.deliveries.Load(), e.gen, e.attempts)
	}
	if v := h.ctxErr.Load(); v != nil {
		t.Fatalf("handler context cancelled: %v", v)
	}
	var extends int
	q.get(func() { extends = q.calls["extend"] })
	return extends
}

// TestHandlerOutlivesThreeLeases: a handler runs while the clock moves one
// tick at a time through more than three leases; the relay extends the
// lease before it runs out, the event is delivered once and acked by its
// first claim.
func TestHandlerOutlivesThreeLeases(t *testing.T) {
	const lease = 6
	q := newFake(testPolicy(lease, 3))
	q.enqueue("long", 1)
	clk := relay.NewManualClock(100)
	h := newLongHandler()
	start(t, q, h, relay.Options{Clock: clk, Poll: time.Hour})
	if extends := h.outlive(t, q, clk, lease, 100+4*lease); extends < 3 { // at least one extension per lease
		t.Fatalf("extend calls = %d, want at least %d", extends, 3)
	}
}

// TestLeaseShortenedWhileRunning: another process's SetPolicy shortens the
// lease after the relay read the policy (§7.1: it applies to every later
// write). The relay keeps the lease the queue grants at each claim and
// extension, so the handler still outlives several of the shorter leases
// and the event is delivered once.
func TestLeaseShortenedWhileRunning(t *testing.T) {
	const lease = 6
	q := newFake(testPolicy(10*lease, 3))
	clk := relay.NewManualClock(100)
	h := newLongHandler()
	run := start(t, q, h, relay.Options{Clock: clk, Poll: time.Hour})
	q.waitFor(t, "the relay read the policy", func() bool { return q.calls["policy"] > 0 })
	q.get(func() { q.pol.Lease = lease })
	q.enqueue("long", 1)
	run.r.Notify()
	if extends := h.outlive(t, q, clk, lease, 100+4*lease); extends > 4*lease { // an extension per third of a lease, not one per tick
		t.Fatalf("extend calls = %d over %d ticks, want fewer", extends, 4*lease)
	}
}

// TestLostLeaseCancelsHandler: an extension answered expired cancels the
// handler's context with ErrLeaseLost, and its result is not settled.
func TestLostLeaseCancelsHandler(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	q.enqueue("a", 1)
	q.extend = func(queuestore.ExtendItem) (queuestore.Outcome, bool) { return queuestore.Expired, true }
	clk := relay.NewManualClock(0)
	cause := make(chan error, 1)
	h := relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	run := start(t, q, h, relay.Options{Clock: clk, Poll: time.Hour})
	q.waitFor(t, "a/1 claimed", func() bool { return len(q.claimed) == 1 })
	clk.Set(4) // 2 ticks left: the relay extends and hears "expired"
	if err := <-cause; !errors.Is(err, relay.ErrLeaseLost) {
		t.Fatalf("handler context cause = %v, want ErrLeaseLost", err)
	}
	if err := run.stop(t); err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	q.get(func() {
		if len(q.settles) != 0 {
			t.Fatalf("settles = %v, want none for a lost claim", q.settles)
		}
	})
}

// TestLostLeaseFlowClaimedAgain: extensions fail (the queue is unreachable
// for them), the lease runs out, the queue hands the same event out again
// while the first handler ignores its cancelled context. The new claim waits
// until the old handler returns: one flow never has two handlers at once.
func TestLostLeaseFlowClaimedAgain(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	q.enqueue("a", 1)
	clk := relay.NewManualClock(0)
	var mu sync.Mutex
	var active, maxActive int
	var attempts []int
	release := make(chan struct{})
	running := make(chan struct{})
	h := relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		mu.Lock()
		active++
		maxActive = max(maxActive, active)
		attempts = append(attempts, e.Attempt)
		mu.Unlock()
		defer func() { mu.Lock(); active--; mu.Unlock() }()
		if e.Attempt == 1 {
			close(running)
			<-release // ignores ctx on purpose
			return nil
		}
		return nil
	})
	start(t, q, h, relay.Options{Clock: clk, Poll: 10 * time.Millisecond})
	q.waitFor(t, "a/1 claimed", func() bool { return len(q.claimed) == 1 })
	// The claim is recorded before its handler's goroutine runs; on a loaded
	// machine the lease could otherwise run out before the first call.
	<-running
	q.get(func() { q.fail["extend"] = errors.New("extend unavailable") })
	clk.Set(6) // the lease ran out: the fake hands a/1 out again
	q.waitFor(t, "a/1 claimed again", func() bool { return len(q.claimed) == 2 })
	mu.Lock()
	n := len(attempts)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("handler calls before the lost one returned = %d, want 1", n)
	}
	q.get(func() { delete(q.fail, "extend") })
	close(release)
	q.waitFor(t, "a/1 acked by its second claim", func() bool { return q.byID["a/1"].state == "acked" })
	q.get(func() {
		for _, batch := range q.settles {
			for _, it := range batch {
				if it.Generation != 2 {
					t.Errorf("settled generation %d, want only the live claim's 2", it.Generation)
				}
			}
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if maxActive != 1 || len(attempts) != 2 {
		t.Fatalf("max handlers of the flow at once = %d, calls = %v; want 1 and two calls", maxActive, attempts)
	}
}

// TestClaimsNeverExceedFreeSlotsAndSettlesBatch: with 4 slots and Batch 64
// the relay asks for at most 4; four handlers that finish together are
// settled in one SettleBatch.
func TestClaimsNeverExceedFreeSlotsAndSettlesBatch(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	for i := range 10 {
		q.enqueue(fmt.Sprintf("f%02d", i), 1)
	}
	var wg sync.WaitGroup
	wg.Add(4)
	gate := make(chan struct{})
	var calls atomic.Int32
	h := relay.HandlerFunc(func(context.Context, relay.Event) error {
		if calls.Add(1) <= 4 {
			wg.Done()
			<-gate
		}
		return nil
	})
	run := start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 4, Batch: 64, Linger: time.Hour, Poll: time.Hour})
	wg.Wait()
	close(gate)
	q.waitFor(t, "all acked", func() bool {
		for _, e := range q.byID {
			if e.state != "acked" {
				return false
			}
		}
		return true
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	q.get(func() {
		for _, n := range q.claimNs {
			if n > 4 {
				t.Errorf("ClaimBatch(n = %d) with 4 slots", n)
			}
		}
		if len(q.settles[0]) < 4 || len(q.settles) > 3 {
			t.Errorf("SettleBatch sizes %v, want the first with at least the 4 that finished together", sizes(q.settles))
		}
		// The claims follow the queue's order: flows by served then ID.
		for i, id := range q.claimed {
			if want := fmt.Sprintf("f%02d/1", i); id != want {
				t.Errorf("claim %d = %s, want %s", i, id, want)
			}
		}
	})
}

// TestNeverTwoHandlersOfOneFlow runs many events of few flows at
// concurrency 8 and records the most handlers of one flow at once.
func TestNeverTwoHandlersOfOneFlow(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	for i := range 4 {
		q.enqueue(fmt.Sprintf("f%d", i), 25)
	}
	var mu sync.Mutex
	active := map[string]int{}
	last := map[string]int64{}
	var worst int
	var order []string
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		mu.Lock()
		active[e.Flow]++
		worst = max(worst, active[e.Flow])
		if e.Seq != last[e.Flow]+1 {
			order = append(order, fmt.Sprintf("%s after seq %d", e.ID, last[e.Flow]))
		}
		last[e.Flow] = e.Seq
		mu.Unlock()
		runtime.Gosched()
		mu.Lock()
		active[e.Flow]--
		mu.Unlock()
		return nil
	})
	start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 8, Poll: time.Hour})
	q.waitFor(t, "100 events acked", func() bool {
		for _, e := range q.byID {
			if e.state != "acked" {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	if worst != 1 || len(order) > 0 {
		t.Fatalf("most handlers of one flow at once = %d, out of order: %v", worst, order)
	}
}

// TestShutdownMidFlight: three handlers hold every slot and more work
// waits. On shutdown the relay claims nothing more; the handler that
// finishes within the grace period is settled; the one that only returns
// when its context is cancelled (cause ErrShutdown) is left to its lease.
func TestShutdownMidFlight(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	for _, flow := range []string{"a", "b", "c", "d", "e"} {
		q.enqueue(flow, 1)
	}
	startedN := make(chan struct{}, 5)
	finishB := make(chan struct{})
	causeC := make(chan error, 5)
	h := relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		startedN <- struct{}{}
		switch e.Flow {
		case "a":
			return nil
		case "b":
			<-finishB
			return nil
		default:
			<-ctx.Done()
			causeC <- context.Cause(ctx)
			return ctx.Err()
		}
	})
	run := start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 3, ShutdownGrace: 200 * time.Millisecond, Poll: time.Hour})
	for range 3 {
		<-startedN
	}
	q.waitFor(t, "a/1 acked", func() bool { return q.byID["a/1"].state == "acked" })
	// a's slot is free again and d waits: the relay claims d.
	q.waitFor(t, "d/1 claimed", func() bool { return len(q.claimed) == 4 })
	run.cancel()
	close(finishB)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	if err := <-causeC; !errors.Is(err, relay.ErrShutdown) {
		t.Fatalf("cause = %v, want ErrShutdown", err)
	}
	q.get(func() {
		if len(q.claimed) != 4 {
			t.Errorf("claims = %v, want none after shutdown", q.claimed)
		}
		if s := q.byID["b/1"].state; s != "acked" {
			t.Errorf("b/1 = %s, want acked (finished within the grace period)", s)
		}
		for _, id := range []string{"c/1", "d/1"} {
			if e := q.byID[id]; e.state != "inflight" || e.attempts != 1 {
				t.Errorf("%s = %+v, want inflight, left to its lease", id, *e)
			}
		}
		if s := q.byID["e/1"].state; s != "pending" {
			t.Errorf("e/1 = %s, want pending", s)
		}
	})
}

// TestShutdownAbandonsStubbornHandler: a handler that ignores its context
// makes Run return ErrAbandoned after the grace period and AbandonWait;
// its claim, left to its lease, ends in Totals as a lease lost, so that
// nothing is in flight once Run has returned.
func TestShutdownAbandonsStubbornHandler(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	q.enqueue("a", 1)
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	h := relay.HandlerFunc(func(context.Context, relay.Event) error { close(started); <-release; return nil })
	run := start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), ShutdownGrace: time.Millisecond, Poll: time.Hour})
	<-started
	if err := run.stop(t); !errors.Is(err, relay.ErrAbandoned) {
		t.Fatalf("Run() error = %v, want ErrAbandoned", err)
	}
	if tot := run.r.Totals(); tot.Claimed != 1 || tot.LeasesLost != 1 || tot.InFlight != 0 {
		t.Fatalf("Totals() after ErrAbandoned = %+v, want 1 claimed, 1 lease lost, 0 in flight", tot)
	}
}

// TestNotifyWakesAtOnce: with a one-hour poll interval, an idle relay still
// delivers an event enqueued after it went to sleep, because Notify wakes it.
func TestNotifyWakesAtOnce(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	got := make(chan string, 1)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error { got <- e.ID; return nil })
	run := start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Poll: time.Hour})
	q.waitFor(t, "the relay asked NextDue (idle)", func() bool { return q.calls["next_due"] >= 1 })
	q.enqueue("late", 1)
	run.r.Notify()
	if id := <-got; id != "late/1" {
		t.Fatalf("handled %s, want late/1", id)
	}
}

// TestIdleRelayPollsBoundedly: an idle relay makes one NextDue per poll
// interval and no other call; moving the clock without due work costs no
// call; work enqueued without Notify (another process's) is found by the poll.
func TestIdleRelayPollsBoundedly(t *testing.T) {
	const poll = 20 * time.Millisecond
	q := newFake(testPolicy(6, 3))
	clk := relay.NewManualClock(0)
	got := make(chan string, 1)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error { got <- e.ID; return nil })
	began := time.Now()
	start(t, q, h, relay.Options{Clock: clk, Poll: poll})
	q.waitFor(t, "the first poll", func() bool { return q.calls["next_due"] >= 2 })
	for range 100 {
		clk.Advance(1)
	}
	time.Sleep(10 * poll)
	var calls map[string]int
	q.get(func() { calls = maps(q.calls) })
	elapsed := time.Since(began)
	bound := 2 + int(elapsed/poll) + 1
	if calls["next_due"] > bound || calls["claim"] > 1 || calls["settle"]+calls["extend"] > 0 {
		t.Fatalf("idle calls over %v = %v, want next_due <= %d, one claim, nothing else", elapsed, calls, bound)
	}
	q.enqueue("other", 1) // no Notify
	if id := <-got; id != "other/1" {
		t.Fatalf("handled %s, want other/1", id)
	}
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestStoreErrorsAreRetried: failing claims are retried with backoff and
// the relay delivers once the queue answers again.
func TestStoreErrorsAreRetried(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	q.enqueue("a", 1)
	q.fail["claim"] = errors.New("disk I/O error")
	got := make(chan string, 1)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error { got <- e.ID; return nil })
	start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Poll: 50 * time.Millisecond})
	q.waitFor(t, "three failed claims", func() bool { return q.calls["claim"] >= 3 })
	q.get(func() { delete(q.fail, "claim") })
	if id := <-got; id != "a/1" {
		t.Fatalf("handled %s", id)
	}
}

// TestRetryAfterBackoffWithLogicalTime: a failed attempt is claimed again
// when the logical clock reaches its backoff, not before.
func TestRetryAfterBackoffWithLogicalTime(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	q.enqueue("a", 1)
	clk := relay.NewManualClock(0)
	var calls atomic.Int32
	h := relay.HandlerFunc(func(context.Context, relay.Event) error {
		if calls.Add(1) == 1 {
			return relay.Fail("unavailable", nil)
		}
		return nil
	})
	start(t, q, h, relay.Options{Clock: clk, Poll: time.Hour})
	q.waitFor(t, "a/1 retry scheduled", func() bool { return q.byID["a/1"].state == "pending" && q.byID["a/1"].attempts == 1 })
	q.waitFor(t, "the relay asked NextDue", func() bool { return q.calls["next_due"] >= 2 })
	clk.Advance(queuestore.BackoffBase - 1)
	time.Sleep(20 * time.Millisecond)
	if c := calls.Load(); c != 1 {
		t.Fatalf("handler calls before the backoff ended = %d, want 1", c)
	}
	clk.Advance(1)
	q.waitFor(t, "a/1 acked", func() bool { return q.byID["a/1"].state == "acked" })
}

// TestNoGoroutineOutlivesRun checks that Run leaves no goroutine behind.
func TestNoGoroutineOutlivesRun(t *testing.T) {
	before := runtime.NumGoroutine()
	q := newFake(testPolicy(6, 3))
	q.enqueue("a", 20)
	q.enqueue("b", 20)
	h := relay.HandlerFunc(func(context.Context, relay.Event) error { return nil })
	run := start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Poll: time.Hour})
	q.waitFor(t, "all acked", func() bool { return q.byID["a/20"].state == "acked" && q.byID["b/20"].state == "acked" })
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines %d > %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

func sizes(b [][]queuestore.SettleItem) []int {
	var out []int
	for _, x := range b {
		out = append(out, len(x))
	}
	return out
}

// TestOldestDueAgeMetric: with its one slot busy, the relay leaves a due
// head waiting; the gauge reports how long (ticks read as milliseconds).
func TestOldestDueAgeMetric(t *testing.T) {
	q := newFake(testPolicy(600, 3))
	q.enqueue("busy", 1)
	q.enqueue("waiting", 1)
	clk := relay.NewManualClock(0)
	started, release := make(chan struct{}, 2), make(chan struct{})
	h := relay.HandlerFunc(func(context.Context, relay.Event) error { started <- struct{}{}; <-release; return nil })
	reg := prometheus.NewRegistry()
	start(t, q, h, relay.Options{Clock: clk, Concurrency: 1, Poll: time.Hour, Metrics: reg})
	<-started
	clk.Set(250)
	if got := testutil.ToFloat64(gauge(t, reg, "fairrelay_oldest_due_age_seconds")); got != 0.25 {
		t.Fatalf("oldest due age = %v, want 0.25", got)
	}
	close(release)
	q.waitFor(t, "both acked", func() bool { return q.byID["waiting/1"].state == "acked" })
	if got := testutil.ToFloat64(gauge(t, reg, "fairrelay_oldest_due_age_seconds")); got != 0 {
		t.Fatalf("oldest due age with nothing waiting = %v, want 0", got)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	return counter(t, reg, name, "")
}

// gatherCase starts a relay with 4 slots over 8 one-event flows whose
// handlers each wait for their flow's channel, and returns the queue, the
// channels, and a function that waits until n handlers are in flight.
func gatherCase(t *testing.T, queue func(*fakeQueue) relay.Queue, linger time.Duration) (*fakeQueue, map[string]chan struct{}, func(n int)) {
	t.Helper()
	q := newFake(testPolicy(600, 3))
	release := map[string]chan struct{}{}
	for i := range 8 {
		q.enqueue(fmt.Sprintf("f%d", i), 1)
		release[fmt.Sprintf("f%d", i)] = make(chan struct{})
	}
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error { <-release[e.Flow]; return nil })
	reg := prometheus.NewRegistry()
	start(t, queue(q), h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 4, Linger: linger, Poll: time.Hour, Metrics: reg})
	q.waitFor(t, "4 claimed", func() bool { return len(q.claimed) == 4 })
	inFlight := gauge(t, reg, "fairrelay_handlers_in_flight")
	return q, release, func(n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); testutil.ToFloat64(inFlight) != float64(n); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %d handlers in flight", n)
			}
		}
	}
}

func plain(q *fakeQueue) relay.Queue { return q }

// TestClaimsWaitForYoungHandlers: with 4 slots and Linger an hour, slots
// freed while handlers that started less than Linger ago still run wait
// for them, so that one ClaimBatch refills all 4 slots: the whole wave.
func TestClaimsWaitForYoungHandlers(t *testing.T) {
	q, release, inFlight := gatherCase(t, plain, time.Hour)
	for i, f := range []string{"f0", "f1", "f2"} {
		close(release[f])
		inFlight(3 - i)
	}
	close(release["f3"])
	q.waitFor(t, "8 claimed", func() bool { return len(q.claimed) == 8 })
	for i := 4; i < 8; i++ {
		close(release[fmt.Sprintf("f%d", i)])
	}
	q.waitFor(t, "8 acked", allAcked(q))
	q.get(func() {
		if len(q.claimNs) < 2 || !slices.Equal(q.claimNs[:2], []int{4, 4}) {
			t.Fatalf("ClaimBatch sizes %v, want 4, then 4: the freed slots waited for the young handlers", q.claimNs)
		}
	})
}

// TestClaimsGatherHalfTheSlots: with 4 slots, once the running handlers
// are older than Linger (2 s) a freed slot waits only until half the slots
// are free, so that one ClaimBatch serves them together without waiting
// for handlers that have run long: the claim comes before the first freed
// slot's Linger has passed (had the relay waited for the old handlers, it
// would have claimed the same 2 slots only then).
func TestClaimsGatherHalfTheSlots(t *testing.T) {
	const linger = 2 * time.Second
	q, release, inFlight := gatherCase(t, plain, linger)
	time.Sleep(linger + linger/5) // the 4 handlers are now older than Linger
	freed := time.Now()
	close(release["f0"])
	inFlight(3)
	close(release["f1"])
	q.waitFor(t, "6 claimed", func() bool { return len(q.claimed) == 6 })
	if waited := time.Since(freed); waited >= linger {
		t.Fatalf("the 2 freed slots were claimed %v after the first freed: they waited out Linger for handlers older than it", waited)
	}
	for i := 2; i < 8; i++ {
		close(release[fmt.Sprintf("f%d", i)])
	}
	q.waitFor(t, "8 acked", allAcked(q))
	q.get(func() {
		if len(q.claimNs) < 2 || q.claimNs[1] != 2 {
			t.Fatalf("ClaimBatch sizes %v, want the second to ask for the 2 freed slots together", q.claimNs)
		}
	})
}

// TestSettleErrorsAreRetriedWithoutSpinning: a refused SettleBatch keeps its
// results and is retried after a backoff (10 ms doubling, at most Poll), so
// the calls stay few, and the results are settled once the queue answers.
func TestSettleErrorsAreRetriedWithoutSpinning(t *testing.T) {
	q := newFake(testPolicy(600, 3))
	q.enqueue("a", 1)
	q.enqueue("b", 1)
	q.fail["settle"] = errors.New("database is locked")
	h := relay.HandlerFunc(func(context.Context, relay.Event) error { return nil })
	began := time.Now()
	start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Poll: 40 * time.Millisecond})
	q.waitFor(t, "4 refused settles", func() bool { return q.calls["settle"] >= 4 })
	time.Sleep(100 * time.Millisecond)
	var calls int
	q.get(func() { calls = q.calls["settle"]; delete(q.fail, "settle") })
	// 10, 20, 40, 40 … ms apart: at most one call per 10 ms, plus the first.
	if bound := 1 + int(time.Since(began)/(10*time.Millisecond)); calls > bound {
		t.Fatalf("settle calls = %d in %v, want at most %d", calls, time.Since(began), bound)
	}
	q.waitFor(t, "both acked", func() bool { return q.byID["a/1"].state == "acked" && q.byID["b/1"].state == "acked" })
}

// turnClock is a ManualClock that counts the calls of Moved, which the
// relay's loop makes once at the start of every turn.
type turnClock struct {
	*relay.ManualClock
	turns *atomic.Int64
}

func (c turnClock) Moved() <-chan struct{} {
	c.turns.Add(1)
	return c.ManualClock.Moved()
}

// TestExtendBackoffDoesNotSpin: while a refused ExtendBatch backs the queue
// calls off, the loop sleeps until each retry, long after the poll interval
// has passed since its last claim: about one turn per queue call, not a
// turn per instant (the poll deadline does not move while no call is made,
// so it must not be waited for during the backoff).
func TestExtendBackoffDoesNotSpin(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	q.enqueue("a", 1)
	clk := turnClock{relay.NewManualClock(0), new(atomic.Int64)}
	h := newLongHandler()
	defer close(h.release)
	start(t, q, h, relay.Options{Clock: clk, Poll: 10 * time.Millisecond})
	<-h.started
	q.get(func() { q.fail["extend"] = errors.New("database is locked") })
	clk.Set(4) // 2 ticks of 6 left: the relay extends, refused
	var calls0 int
	q.waitFor(t, "the first refused extend", func() bool {
		calls0 = sum(q.calls)
		return q.calls["extend"] >= 1
	})
	turns0 := clk.turns.Load()
	var calls int
	q.waitFor(t, "8 more refused extends", func() bool { // 10 ms apart (Poll)
		calls = sum(q.calls)
		return q.calls["extend"] >= 9
	})
	turns := clk.turns.Load() - turns0
	if bound := int64(2*(calls-calls0) + 4); turns > bound {
		t.Fatalf("loop turns during 8 backoffs = %d for %d queue calls, want at most %d", turns, calls-calls0, bound)
	}
}

// sum adds up a fake's call counts.
func sum(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c
	}
	return n
}

// TestHandlersOfOneClaimShareAWave: the 4 handlers started from one claim
// of 4 see one relay.Wave of size 4 in their contexts; the next claim's
// handlers see another.
func TestHandlersOfOneClaimShareAWave(t *testing.T) {
	q := newFake(testPolicy(600, 3))
	for i := range 8 {
		q.enqueue(fmt.Sprintf("f%d", i), 1)
	}
	var mu sync.Mutex
	waves := map[string]relay.Wave{}
	gate := make(chan struct{})
	h := relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		w, ok := relay.WaveOf(ctx)
		if !ok {
			return errors.New("no wave")
		}
		mu.Lock()
		waves[e.Flow] = w
		if len(waves) == 4 {
			close(gate)
		}
		mu.Unlock()
		<-gate
		return nil
	})
	start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 4, Linger: time.Hour, Poll: time.Hour})
	q.waitFor(t, "8 acked", allAcked(q))
	mu.Lock()
	defer mu.Unlock()
	for i := range 8 {
		f := fmt.Sprintf("f%d", i)
		first := waves[fmt.Sprintf("f%d", i/4*4)]
		if w := waves[f]; w != first || w.Size() != 4 {
			t.Errorf("%s: wave of size %d, equal to its claim's first: %v; want size 4, equal", f, w.Size(), w == first)
		}
	}
	if waves["f0"] == waves["f4"] {
		t.Error("the two claims' handlers share a wave")
	}
	if _, ok := relay.WaveOf(context.Background()); ok || (relay.Wave{}).Size() != 0 {
		t.Error("a plain context has a wave")
	}
}

// dupQueue hands out, in its first ClaimBatch, the first claim twice (the
// copy with the next generation), as a broken queue might.
type dupQueue struct {
	*fakeQueue
	once sync.Once
}

func (d *dupQueue) ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queuestore.Claim, error) {
	cs, err := d.fakeQueue.ClaimBatch(ctx, now, n)
	if err == nil && len(cs) > 0 {
		d.once.Do(func() {
			c := cs[0]
			c.Generation++
			cs = append(cs, c)
		})
	}
	return cs, err
}

// TestTwoClaimsOfAFlowInOneBatch: when a claim call returns a flow twice,
// only the later claim's handler runs; the earlier is lost before it
// starts, so a flow never has two handlers.
func TestTwoClaimsOfAFlowInOneBatch(t *testing.T) {
	q := newFake(testPolicy(600, 3))
	for i := range 3 {
		q.enqueue(fmt.Sprintf("f%d", i), 1)
	}
	var mu sync.Mutex
	var runs []string
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		mu.Lock()
		runs = append(runs, fmt.Sprintf("%s@%d", e.ID, e.Generation))
		mu.Unlock()
		return nil
	})
	start(t, &dupQueue{fakeQueue: q}, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 4, Poll: time.Hour})
	q.waitFor(t, "the other two acked", func() bool {
		n := 0
		for _, e := range q.byID {
			if e.state == "acked" {
				n++
			}
		}
		return n == 2
	})
	mu.Lock()
	defer mu.Unlock()
	first := q.claimed[0]
	var gens []string
	for _, r := range runs {
		if strings.HasPrefix(r, first+"@") {
			gens = append(gens, r)
		}
	}
	if len(gens) != 1 || gens[0] != first+"@2" {
		t.Fatalf("handlers of %s: %v; want only the later claim's (generation 2)", first, gens)
	}
}
