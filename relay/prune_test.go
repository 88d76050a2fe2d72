package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer is a log sink safe for the relay's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// enqueueMany enqueues n events of flow in batches.
func enqueueMany(t *testing.T, s *queuestore.Store, flow string, n int, now clock.Tick) {
	t.Helper()
	for i := 0; i < n; {
		var es []queue.Event
		for ; i < n && len(es) < 500; i++ {
			es = append(es, queue.Event{ID: fmt.Sprintf("%s-%d", flow, i+1), Flow: flow, Body: []byte(`{}`)})
		}
		if _, err := s.EnqueueBatch(context.Background(), es, now); err != nil {
			t.Fatal(err)
		}
	}
}

// retentionStore is a real queue file with Retention 100 ticks: 2,500
// events delivered and acked at tick 0, a quarantined head with an event
// behind it, and a paused flow with a pending event.
func retentionStore(t *testing.T) *queuestore.Store {
	t.Helper()
	p := testPolicy(10, 3)
	p.Retention = 100
	s := openStore(t, p)
	ctx := context.Background()
	enqueueMany(t, s, "done", 2500, 0)
	enqueue(t, s, "bad", 2, 0)
	enqueue(t, s, "held", 1, 0)
	if err := s.PauseFlow(ctx, "held", "maintenance", 0); err != nil {
		t.Fatal(err)
	}
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		if e.ID == "bad-1" {
			return relay.FailPermanent("refused", nil)
		}
		return nil
	})
	r, err := relay.New(s, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 64, Batch: 256})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunUntilIdle(ctx); !errors.Is(err, relay.ErrUndelivered) {
		t.Fatalf("delivery run: RunUntilIdle() = %v, want ErrUndelivered (bad-1 quarantined)", err)
	}
	if st := stats(t, s); st.Events.Acked != 2500 || st.Quarantined != 1 || st.Events.Pending != 2 {
		t.Fatalf("stats after delivery = %+v, want 2500 acked, 1 quarantined, 2 pending", st)
	}
	return s
}

// With PruneEvery, the relay prunes what the retention window no longer
// keeps, in batches of queue.DefaultPruneBatch until none is left: every
// acked event and old audit row, never the quarantined, pending or paused
// ones; counted in fairrelay_pruned_total and logged once per pass.
func TestPrune_RealStoreDeletesInBatches(t *testing.T) {
	t.Parallel()
	s := retentionStore(t)
	ctx := context.Background()
	want, err := s.Prunable(ctx, 1000)
	if err != nil || want.Events != 2500 || want.Audit == 0 {
		t.Fatalf("Prunable(1000) = %+v, %v; want 2500 events and the old audit rows", want, err)
	}

	reg := prometheus.NewRegistry()
	var logs syncBuffer
	r, err := relay.New(s, deliver, relay.Options{Clock: relay.NewManualClock(1000), PruneEvery: time.Hour, Metrics: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_paused_flows", "")); got != 1 {
		t.Fatalf("fairrelay_paused_flows = %v, want 1", got)
	}
	// An idle end waits for the pass under way: all of it is pruned.
	var u *relay.UndeliveredError
	if err := r.RunUntilIdle(ctx); !errors.As(err, &u) || u.Quarantined != 0 || u.Waiting != 2 {
		t.Fatalf("RunUntilIdle() = %v, want ErrUndelivered with 0 quarantined (this run), 2 waiting", err)
	}
	if left, err := s.Prunable(ctx, 1000); err != nil || left.Events != 0 || left.Audit != 0 {
		t.Fatalf("Prunable(1000) after the pass = %+v, %v; want nothing", left, err)
	}
	if st := stats(t, s); st.Events.Acked != 0 || st.Quarantined != 1 || st.Events.Pending != 2 || st.PausedFlows != 1 {
		t.Fatalf("stats after pruning = %+v, want 0 acked, 1 quarantined, 2 pending, 1 paused flow", st)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_pruned_total", "events")); got != 2500 {
		t.Errorf("fairrelay_pruned_total{kind=events} = %v, want 2500", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_pruned_total", "audit")); got != float64(want.Audit) {
		t.Errorf("fairrelay_pruned_total{kind=audit} = %v, want %d", got, want.Audit)
	}
	line := fmt.Sprintf(`msg="relay: pruned" events=2500 audit=%d batches=3 at=1000`, want.Audit)
	if n := strings.Count(logs.String(), `msg="relay: pruned"`); n != 1 || !strings.Contains(logs.String(), line) {
		t.Errorf("logs have %d pruned lines, want one: %s\n%s", n, line, logs.String())
	}
}

// A pass runs at Run's start and again every PruneEvery: acks made after
// the first pass are pruned by a later one once the clock has passed their
// retention window.
func TestPrune_LaterPassesFollowTheClock(t *testing.T) {
	t.Parallel()
	p := testPolicy(10, 3)
	p.Retention = 100
	s := openStore(t, p)
	enqueue(t, s, "f", 5, 0)
	clk := relay.NewManualClock(0)
	run := start(t, s, deliver, relay.Options{Clock: clk, PruneEvery: time.Millisecond, Poll: time.Hour})
	waitStore(t, "5 acked", func() bool { return stats(t, s).Events.Acked == 5 })
	clk.Set(100) // AckedAt 0 <= 100 - Retention: prunable now
	waitStore(t, "the acked events pruned", func() bool { return stats(t, s).Events.Acked == 0 })
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Event(context.Background(), "f-1"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("Event(f-1) after pruning = %+v, %v; want ErrNotFound", e, err)
	}
}

// countingPruner counts Prune calls.
type countingPruner struct {
	*queuestore.Store
	calls atomic.Int64
}

func (c *countingPruner) Prune(ctx context.Context, now clock.Tick, limit int) (queue.PruneResult, error) {
	c.calls.Add(1)
	return c.Store.Prune(ctx, now, limit)
}

// With the policy's Retention at 0 (keep forever) the relay never calls
// Prune, and without PruneEvery it never does either.
func TestPrune_OffWithoutRetentionOrInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		retention clock.Tick
		every     time.Duration
	}{
		{"retention 0", 0, time.Millisecond},
		{"no PruneEvery", 100, 0},
	} {
		p := testPolicy(10, 3)
		p.Retention = c.retention
		q := &countingPruner{Store: openStore(t, p)}
		enqueue(t, q.Store, "f", 3, 0)
		r, err := relay.New(q, deliver, relay.Options{Clock: relay.NewManualClock(1000), PruneEvery: c.every})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.RunUntilIdle(context.Background()); err != nil {
			t.Fatalf("%s: RunUntilIdle() = %v", c.name, err)
		}
		if n := q.calls.Load(); n != 0 {
			t.Errorf("%s: Prune called %d times, want 0", c.name, n)
		}
	}
	if _, err := relay.New(&countingPruner{}, deliver, relay.Options{PruneEvery: -time.Second}); !errors.Is(err, relay.ErrInvalid) {
		t.Errorf("New(PruneEvery < 0) = %v, want ErrInvalid", err)
	}
}

// failingPruner fails its first Prune call.
type failingPruner struct {
	countingPruner
}

func (f *failingPruner) Prune(ctx context.Context, now clock.Tick, limit int) (queue.PruneResult, error) {
	if f.calls.Add(1) == 1 {
		return queue.PruneResult{}, errors.New("disk on fire")
	}
	return f.Store.Prune(ctx, now, limit)
}

// A failed Prune is counted as a queue error and the pass is tried again
// after PruneEvery; the relay goes on delivering meanwhile.
func TestPrune_FailureIsRetriedLater(t *testing.T) {
	t.Parallel()
	p := testPolicy(10, 3)
	p.Retention = 100
	q := &failingPruner{countingPruner{Store: openStore(t, p)}}
	enqueue(t, q.Store, "f", 3, 0)
	reg := prometheus.NewRegistry()
	clk := relay.NewManualClock(0)
	run := start(t, q, deliver, relay.Options{Clock: clk, PruneEvery: time.Millisecond, Poll: time.Hour, Metrics: reg})
	waitStore(t, "3 acked", func() bool { return stats(t, q.Store).Events.Acked == 3 })
	clk.Set(100)
	waitStore(t, "the acked events pruned after the failure", func() bool { return stats(t, q.Store).Events.Acked == 0 })
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_store_errors_total", "prune")); got != 1 {
		t.Errorf("fairrelay_store_errors_total{op=prune} = %v, want 1", got)
	}
}

// endlessPruner is the fake queue with Prune: every batch answers More
// while more is set (under the fake's lock), so a pass lasts until the test
// ends it. Its calls are counted as "prune".
type endlessPruner struct {
	*fakeQueue
	more bool
}

func (p *endlessPruner) Prune(context.Context, clock.Tick, int) (queue.PruneResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.call("prune"); err != nil {
		return queue.PruneResult{}, err
	}
	return queue.PruneResult{Events: 1, More: p.more}, nil
}

func (p *endlessPruner) Prunable(context.Context, clock.Tick) (queue.PruneResult, error) {
	return queue.PruneResult{}, nil
}

// A prune pass does not hold up delivery: handlers that return while
// its batches run are taken, settled, and their flows' next events claimed
// between the batches (Options.PruneEvery), so a whole flow is delivered
// while a pass that never runs out of rows goes on.
func TestPrune_DeliveryGoesOnDuringAPass(t *testing.T) {
	t.Parallel()
	p := testPolicy(600, 3)
	p.Retention = 100
	q := &endlessPruner{fakeQueue: newFake(p), more: true}
	q.enqueue("a", 3)
	run := start(t, q, deliver, relay.Options{Clock: relay.NewManualClock(1000), PruneEvery: time.Hour, Poll: time.Hour})
	q.waitFor(t, "a/1 to a/3 acked while the pass goes on (every batch answers More)", func() bool {
		return q.byID["a/3"].state == "acked" && q.byID["a/2"].state == "acked" && q.byID["a/1"].state == "acked"
	})
	var prunes int
	q.get(func() { q.more = false; prunes = q.calls["prune"] })
	q.waitFor(t, "the pass's last batch", func() bool { return q.calls["prune"] > prunes })
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}
