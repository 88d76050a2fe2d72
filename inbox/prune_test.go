package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// testClock is the wall clock of a store (WithNow) and of a server
// (ServerOptions.Now) that a test moves by hand; it starts at the real time,
// so that the deliveries' timestamps, read on it, verify.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// watchedPruner is a receiver.Pruner that reports each Prune call, or
// fails every call with err and errResult (what a batch whose failure
// came after its commit deleted).
type watchedPruner struct {
	receiver.Pruner
	err       error
	errResult receiver.PruneResult

	mu     sync.Mutex
	limits []int
	total  int64
	calls  chan receiver.PruneResult // each call's result, when there is room
}

func newWatched(p receiver.Pruner) *watchedPruner {
	return &watchedPruner{Pruner: p, calls: make(chan receiver.PruneResult, 1000)}
}

func (w *watchedPruner) Prune(ctx context.Context, before time.Time, limit int) (receiver.PruneResult, error) {
	var (
		r   = w.errResult
		err = w.err
	)
	if err == nil {
		r, err = w.Pruner.Prune(ctx, before, limit)
	}
	w.mu.Lock()
	w.limits = append(w.limits, limit)
	w.total += r.Receipts
	w.mu.Unlock()
	select {
	case w.calls <- r:
	default:
	}
	return r, err
}

func (w *watchedPruner) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.limits)
}

// waitPruned waits until the pruner has deleted want receipts in all, or
// fails the test after a minute (a bound for a broken build, not a speed).
func (w *watchedPruner) waitPruned(t *testing.T, want int64) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		w.mu.Lock()
		total := w.total
		w.mu.Unlock()
		if total >= want {
			if total > want {
				t.Fatalf("pruned %d receipts, want %d", total, want)
			}
			return
		}
		select {
		case <-w.calls:
		case <-deadline:
			t.Fatalf("pruned %d receipts, still waiting for %d", total, want)
		}
	}
}

// retentionFixture is a server with retention over a real receiver.db on
// a fake clock, behind a loopback listener.
type retentionFixture struct {
	*fixture
	clk    *testClock
	pruner *watchedPruner
	server *Server
	log    *lockedWriter // the server's log (f.logs, read through it)
}

func newRetentionFixture(t *testing.T, o ServerOptions) *retentionFixture {
	t.Helper()
	clk := newTestClock()
	st, err := receiverstore.Open(filepath.Join(t.TempDir(), "receiver.db"), receiverstore.WithNow(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{store: st, recv: &counting{Receiver: st}, logs: new(bytes.Buffer), reg: prometheus.NewRegistry()}
	w := newWatched(st)
	lw := &lockedWriter{w: f.logs}
	o.Logger = slog.New(slog.NewTextHandler(lw, nil))
	o.Metrics, o.Now = f.reg, clk.now
	if o.Pruner == nil {
		o.Pruner = w
	}
	s := NewServer(f.recv, secret, o)
	f.srv = httptest.NewServer(s)
	t.Cleanup(func() { f.srv.Close(); s.Close() })
	return &retentionFixture{fixture: f, clk: clk, pruner: w, server: s, log: lw}
}

// lockedWriter serializes writes of the server's goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func metricValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// With a retention window the server prunes the receipts older than it in
// the background; a redelivery of a pruned receipt's event is then 200
// {"outcome":"pruned"} and applies nothing; the pruned receipts are
// counted. After Close no prune runs.
func TestServer_RetentionPrunesAndAnswersPruned(t *testing.T) {
	t.Parallel()
	f := newRetentionFixture(t, ServerOptions{Retention: time.Hour, PruneEvery: time.Millisecond})
	send := func(id string, seq int64, body string, status int, outcome string) {
		t.Helper()
		d := deliver(id, "f", seq, body)
		d.ts = f.clk.now()
		if st, a := f.send(t, d); st != status || a.Outcome != outcome {
			t.Fatalf("%s seq %d: %d %+v, want %d %s", id, seq, st, a, status, outcome)
		}
	}
	send("e1", 1, `{"delta": 1}`, 200, "accepted")
	send("e2", 2, `{"delta": 2}`, 200, "accepted")
	f.clk.advance(30 * time.Minute)
	send("e3", 3, `{"delta": 4}`, 200, "accepted")
	f.clk.advance(31 * time.Minute) // e1 and e2 are past the hour, e3 is not
	f.pruner.waitPruned(t, 2)

	before := f.snap(t)
	send("e1", 1, `{"delta": 1}`, 200, "pruned")
	send("e2", 2, `{"delta": 2}`, 200, "pruned")
	send("e3", 3, `{"delta": 4}`, 200, "duplicate")
	if after := f.snap(t); dump(after) != dump(before) {
		t.Fatalf("pruned redeliveries changed the store:\n%s\n%s", dump(after), dump(before))
	}
	if before.Flows[0].Total != 7 || before.Flows[0].PrunedThrough != 2 || len(before.Receipts) != 1 {
		t.Fatalf("store = %s, want total 7, pruned through 2, e3's receipt only", dump(before))
	}
	if got := counter(t, f.reg, "pruned"); got != 2 {
		t.Errorf("receives_total{pruned} = %v, want 2", got)
	}
	if got := metricValue(t, f.reg, "fairrelay_receiver_pruned_total"); got != 2 {
		t.Errorf("fairrelay_receiver_pruned_total = %v, want 2", got)
	}
	if logs := f.log.String(); !strings.Contains(logs, "pruned receipts") {
		t.Errorf("no log line for the prune:\n%s", logs)
	}

	if err := f.server.Close(); err != nil {
		t.Fatal(err)
	}
	calls := f.pruner.count()
	f.clk.advance(2 * time.Hour)
	send("e4", 4, `{"delta": 8}`, 200, "accepted") // the handler keeps answering
	if f.pruner.count() != calls {
		t.Fatalf("a prune ran after Close")
	}
	if err := f.server.Close(); err != nil {
		t.Fatalf("second Close() error = %v", err)
	}
}

// Each batch deletes at most PruneBatch receipts in its own transaction
// (its own Prune call); a round goes on while a batch says More.
func TestServer_RetentionPrunesInBatches(t *testing.T) {
	t.Parallel()
	f := newRetentionFixture(t, ServerOptions{Retention: time.Minute, PruneEvery: time.Hour, PruneBatch: 2})
	<-f.pruner.calls // the first round, at start: nothing to prune
	f.pruner.mu.Lock()
	f.pruner.limits = nil
	f.pruner.mu.Unlock()
	for i := range 5 {
		d := deliver(fmt.Sprintf("e%d", i+1), "f", int64(i+1), `{"delta": 1}`)
		d.ts = f.clk.now()
		if st, a := f.send(t, d); st != 200 {
			t.Fatalf("setup: %d %+v", st, a)
		}
	}
	f.clk.advance(2 * time.Minute)
	// The next round comes in an hour: a second server on the same store
	// runs its first round at once.
	w := newWatched(f.store)
	s := NewServer(f.recv, secret, ServerOptions{Retention: time.Minute, PruneBatch: 2, Now: f.clk.now, Pruner: w,
		Logger: slog.New(slog.DiscardHandler)})
	w.waitPruned(t, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(w.limits) != 3 || w.limits[0] != 2 || w.limits[1] != 2 || w.limits[2] != 2 {
		t.Fatalf("Prune limits = %v, want three batches of 2 (2, 2, 1 receipts)", w.limits)
	}
}

// A failing prune is logged and counted; the server keeps answering. The
// receipts a batch deleted before it failed (a vacuum after the commit)
// are counted as pruned.
func TestServer_RetentionErrorLoggedAndCounted(t *testing.T) {
	t.Parallel()
	clk := newTestClock()
	st, err := receiverstore.Open(filepath.Join(t.TempDir(), "receiver.db"), receiverstore.WithNow(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := newWatched(st)
	w.err = errors.New("disk on fire")
	w.errResult = receiver.PruneResult{Receipts: 3, More: true}
	logs := &lockedWriter{w: new(bytes.Buffer)}
	reg := prometheus.NewRegistry()
	s := NewServer(st, secret, ServerOptions{Retention: time.Hour, PruneEvery: time.Hour, Pruner: w, Now: clk.now,
		Metrics: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	<-w.calls
	if err := s.Close(); err != nil { // waits for the round to end
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "fairrelay_receiver_prune_errors_total"); got != 1 {
		t.Errorf("fairrelay_receiver_prune_errors_total = %v, want 1", got)
	}
	if got := metricValue(t, reg, "fairrelay_receiver_pruned_total"); got != 3 {
		t.Errorf("fairrelay_receiver_pruned_total = %v, want 3 (deleted before the batch failed)", got)
	}
	if l := logs.String(); !strings.Contains(l, "prune failed") || !strings.Contains(l, "disk on fire") || !strings.Contains(l, "pruned=3") {
		t.Errorf("log has no prune failure:\n%s", l)
	}
}

// A retention the server cannot carry out is refused by NewServer: no
// Pruner, or a batch size out of range. Without Retention nothing is
// checked and nothing runs.
func TestServer_RetentionConfigurationRefused(t *testing.T) {
	t.Parallel()
	st, err := receiverstore.Open(filepath.Join(t.TempDir(), "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, tc := range map[string]struct {
		r Receiver
		o ServerOptions
	}{
		"receiver is not a Pruner": {&counting{Receiver: st}, ServerOptions{Retention: time.Hour}},
		"batch above the maximum":  {st, ServerOptions{Retention: time.Hour, PruneBatch: receiver.MaxPruneBatch + 1}},
		"negative batch":           {st, ServerOptions{Retention: time.Hour, PruneBatch: -1}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: NewServer did not panic", name)
				}
			}()
			s := NewServer(tc.r, secret, tc.o)
			_ = s.Close()
		}()
	}
	s := NewServer(&counting{Receiver: st}, secret, ServerOptions{PruneBatch: -1}) // no Retention: off
	if s.pruning != nil {
		t.Fatal("a server without Retention prunes")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// dump prints v with its field names, for comparing and showing snapshots.
func dump(v any) string { return fmt.Sprintf("%+v", v) }
