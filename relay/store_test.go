package relay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func openStore(t *testing.T, p queuestore.Policy, opts ...queuestore.Option) *queuestore.Store {
	t.Helper()
	s, err := queuestore.Open(filepath.Join(t.TempDir(), "queue.db"), append([]queuestore.Option{queuestore.WithPolicy(p)}, opts...)...)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func enqueue(t *testing.T, s *queuestore.Store, flow string, n int, now clock.Tick) {
	t.Helper()
	for i := range n {
		if _, err := s.Enqueue(context.Background(), queuestore.Event{ID: fmt.Sprintf("%s-%d", flow, i+1), Flow: flow, Body: []byte(`{"v":1}`)}, now); err != nil {
			t.Fatalf("Enqueue() error = %v", err)
		}
	}
}

// waitStore polls the store until cond holds (a hang fails the test).
func waitStore(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func stats(t *testing.T, s *queuestore.Store) queuestore.Stats {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRealStoreDeliversInFlowOrder runs the relay on a real queue file
// with logical time: 5 flows of 20 events, a handler failing each flow's
// event 3 once; every event is acked, each flow in sequence order, and the
// failed ones are retried when the clock reaches their backoff.
func TestRealStoreDeliversInFlowOrder(t *testing.T) {
	s := openStore(t, testPolicy(30, 3))
	for f := range 5 {
		enqueue(t, s, fmt.Sprintf("flow-%d", f), 20, 0)
	}
	clk := relay.NewManualClock(0)
	var mu sync.Mutex
	seen := map[string][]int64{}
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		mu.Lock()
		defer mu.Unlock()
		seen[e.Flow] = append(seen[e.Flow], e.Seq)
		if e.Seq == 3 && e.Attempt == 1 {
			return relay.Fail("unavailable", nil)
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	run := start(t, s, h, relay.Options{Clock: clk, Concurrency: 4, Batch: 8, Poll: 10 * time.Millisecond, Metrics: reg})
	waitStore(t, "the five retries scheduled", func() bool { st := stats(t, s); return st.Events.Acked == 10 && st.Events.Inflight == 0 })
	clk.Advance(queuestore.BackoffBase)
	run.r.Notify()
	waitStore(t, "100 events acked", func() bool { return stats(t, s).Events.Acked == 100 })
	if err := run.stop(t); err != nil {
		t.Fatalf("Run() error = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for flow, seqs := range seen {
		want := []int64{1, 2, 3, 3}
		for i := int64(4); i <= 20; i++ {
			want = append(want, i)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(want) {
			t.Errorf("%s delivered %v, want %v", flow, seqs, want)
		}
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_claims_total", "")); got != 105 {
		t.Errorf("fairrelay_claims_total = %v, want 105", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_settles_total", "acked")); got != 100 {
		t.Errorf("settles{acked} = %v, want 100", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_settles_total", "retry_scheduled")); got != 5 {
		t.Errorf("settles{retry_scheduled} = %v, want 5", got)
	}
}

// counter sums the members of a metric family whose first label (in
// name order) has the value label ("" : every member), through the
// registry (the collectors are private).
func counter(t *testing.T, reg *prometheus.Registry, name, label string) prometheus.Collector {
	t.Helper()
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			v, found := 0.0, false
			for _, m := range mf.GetMetric() {
				if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
					continue
				}
				v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
				found = true
			}
			if found {
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "copy", nil, nil), prometheus.UntypedValue, v)
				return
			}
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "missing", nil, nil), prometheus.UntypedValue, -1)
	})
}

type collectorFunc func(ch chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

// TestRealStoreLongHandlerAndMetrics: a handler that runs over three leases
// on a real store, with metrics: extensions, in-flight, backlog, the due
// head's age and the handler histogram move.
func TestRealStoreLongHandlerAndMetrics(t *testing.T) {
	const lease = 9
	s := openStore(t, testPolicy(lease, 3))
	enqueue(t, s, "long", 1, 0)
	enqueue(t, s, "waiting", 1, 0)
	clk := relay.NewManualClock(0)
	started, release := make(chan struct{}, 2), make(chan struct{})
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		started <- struct{}{}
		<-release
		return nil
	})
	reg := prometheus.NewRegistry()
	run := start(t, s, h, relay.Options{Clock: clk, Concurrency: 1, Poll: time.Hour, Metrics: reg})
	<-started
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_handlers_in_flight", "")); got != 1 {
		t.Fatalf("in flight = %v, want 1", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_backlog_events", "")); got != 2 {
		t.Fatalf("backlog = %v, want 2", got)
	}
	for clk.Now() < 4*lease {
		now := clk.Advance(1)
		waitStore(t, fmt.Sprintf("lease kept at %d", now), func() bool {
			e, err := s.Event(context.Background(), "long-1")
			return err == nil && e.LeaseUntil-now > 3
		})
	}
	close(release)
	waitStore(t, "both acked", func() bool { return stats(t, s).Events.Acked == 2 })
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	e, err := s.Event(context.Background(), "long-1")
	if err != nil || e.Generation != 1 || e.LifetimeAttempts != 1 {
		t.Fatalf("long-1 = %+v, %v; want one claim", e, err)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_lease_extensions_total", "extended")); got < 4 {
		t.Fatalf("extensions = %v, want at least 4", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_handler_duration_seconds", "")); got != 2 {
		t.Fatalf("handler duration samples = %v, want 2", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_handler_duration_seconds", "ok")); got != 2 {
		t.Fatalf("handler duration samples {result=ok} = %v, want 2", got)
	}
}

// TestRealStoreRealTime runs on the wall clock against a store opened with
// the real-time option, as production does.
func TestRealStoreRealTime(t *testing.T) {
	p := testPolicy(2000, 3)
	p.BackoffBase, p.BackoffCap = 10, 40
	s := openStore(t, p, queuestore.WithRealTime(clock.Wall{}, 1000))
	got := make(chan string, 10)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error { got <- e.ID; return nil })
	run := start(t, s, h, relay.Options{Poll: time.Hour})
	enqueue(t, s, "rt", 3, clock.Wall{}.Now())
	run.r.Notify()
	for i := 1; i <= 3; i++ {
		if id := <-got; id != fmt.Sprintf("rt-%d", i) {
			t.Fatalf("delivery %d = %s", i, id)
		}
	}
	waitStore(t, "3 acked", func() bool { return stats(t, s).Events.Acked == 3 })
}

// TestRealStoreOldestDueAge: the gauge reads the store's OldestDue, so it is
// the age of the waiting head itself (enqueued at tick 10), not the time
// since the queue's last write (the claim at tick 100), which NextDue would
// give.
func TestRealStoreOldestDueAge(t *testing.T) {
	s := openStore(t, testPolicy(1000, 3))
	enqueue(t, s, "busy", 1, 0)
	enqueue(t, s, "waiting", 1, 10)
	clk := relay.NewManualClock(100)
	started, release := make(chan struct{}, 2), make(chan struct{})
	h := relay.HandlerFunc(func(context.Context, relay.Event) error { started <- struct{}{}; <-release; return nil })
	reg := prometheus.NewRegistry()
	run := start(t, s, h, relay.Options{Clock: clk, Concurrency: 1, Poll: time.Hour, Metrics: reg})
	<-started
	clk.Set(250)
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_oldest_due_age_seconds", "")); got != 0.24 {
		t.Fatalf("oldest due age = %v, want 0.24 (tick 250 - the head's due tick 10)", got)
	}
	close(release)
	waitStore(t, "both acked", func() bool { return stats(t, s).Events.Acked == 2 })
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_oldest_due_age_seconds", "")); got != 0 {
		t.Fatalf("oldest due age with nothing waiting = %v, want 0", got)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

var _ relay.OldestDueQueue = (*queuestore.Store)(nil)
