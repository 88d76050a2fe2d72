package inbox

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/relay"
	"github.com/fairrelay/fairrelay/webhook"
)

// waveRun drains flows × 1 events through a relay at concurrency 16 into
// a Batcher (WaveWait wait) over a real receiver.db, with skip's events
// succeeding without a Receive. It returns the ReceiveBatch and Receive
// messages' IDs call by call, and each event's wave.
func waveRun(t *testing.T, flows int, wait time.Duration, skip func(id string) bool) (calls [][]string, waves map[string]relay.Wave) {
	t.Helper()
	dir := t.TempDir()
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithPolicy(queuestore.Policy{Lease: 600, MaxAttempts: 3, BackoffBase: 1, BackoffCap: 8}))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	es := make([]queuestore.Event, flows)
	for i := range es {
		es[i] = queuestore.Event{ID: fmt.Sprintf("e%d", i), Flow: fmt.Sprintf("f%d", i), Body: []byte(`{"delta": 1}`)}
	}
	if _, err := q.EnqueueBatch(context.Background(), es, 0); err != nil {
		t.Fatal(err)
	}
	rc := &idRecorder{BatchReceiver: openStore(t, "receiver.db")}
	b := NewBatcher(rc, BatcherOptions{WaveWait: wait})
	defer b.Close()
	var mu sync.Mutex
	waves = map[string]relay.Wave{}
	local := relay.NewLocal(b)
	h := relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		w, _ := relay.WaveOf(ctx)
		mu.Lock()
		waves[e.ID] = w
		mu.Unlock()
		if skip(e.ID) {
			return nil
		}
		return local.Handle(ctx, e)
	})
	r, err := relay.New(q, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 16, Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, err := q.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.Events.Acked == int64(flows) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %+v", st)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.calls, waves
}

// idRecorder records the message IDs of every Receive and ReceiveBatch.
type idRecorder struct {
	BatchReceiver
	mu    sync.Mutex
	calls [][]string
}

func (r *idRecorder) Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error) {
	r.record([]receiver.Message{m})
	return r.BatchReceiver.Receive(ctx, m)
}

func (r *idRecorder) ReceiveBatch(ctx context.Context, ms []receiver.Message) ([]receiver.BatchResult, error) {
	r.record(ms)
	return r.BatchReceiver.ReceiveBatch(ctx, ms)
}

func (r *idRecorder) record(ms []receiver.Message) {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	r.mu.Lock()
	r.calls = append(r.calls, ids)
	r.mu.Unlock()
}

// wholeWaves counts, of the waves that reached the receiver, those whose
// every delivered member was in one call, and all waves.
func wholeWaves(calls [][]string, waves map[string]relay.Wave, skip func(string) bool) (whole, all int) {
	in := map[relay.Wave]map[int]int{} // wave -> call -> members
	for c, ids := range calls {
		for _, id := range ids {
			w := waves[id]
			if in[w] == nil {
				in[w] = map[int]int{}
			}
			in[w][c]++
		}
	}
	for w, byCall := range in {
		want := w.Size()
		for id, x := range waves {
			if x == w && skip(id) {
				want--
			}
		}
		for _, n := range byCall {
			if n == want {
				whole++
			}
		}
		all++
	}
	return whole, all
}

// A relay's waves reach the receiver whole: with a WaveWait long enough
// that only a complete wave ends it, every wave of 320 events at
// concurrency 16 is one ReceiveBatch. (Without the wave wait, measured:
// most waves split in two, the first call holding what had arrived.)
func TestBatcher_RelayWavesCommitWhole(t *testing.T) {
	none := func(string) bool { return false }
	calls, waves := waveRun(t, 320, time.Minute, none)
	whole, all := wholeWaves(calls, waves, none)
	if whole != all || all < 20 {
		t.Fatalf("%d of %d waves in one call (calls %v); want all, at least 20", whole, all, calls)
	}
}

// A wave whose member never calls Receive ends its wait after WaveWait:
// the others are received (the relay acks all 48), and each wave's
// delivered members still share one call.
func TestBatcher_WaveWaitIsABound(t *testing.T) {
	skip := func(id string) bool { return id == "e5" || id == "e21" }
	calls, waves := waveRun(t, 48, 200*time.Millisecond, skip)
	whole, all := wholeWaves(calls, waves, skip)
	if whole != all {
		t.Fatalf("%d of %d waves in one call (calls %v); want all", whole, all, calls)
	}
}

// A Server hands a request's fairrelay-wave header to a Batcher: three
// requests of a wave of 4 wait for the fourth, sent 50 ms later (with
// WaveWait a minute, only the wave's completion ends the wait), and the
// four share one ReceiveBatch. A malformed header ("x y/2": a space in the
// id) is ignored: that request is received alone, well within the
// client's 10 s timeout, where a wave of 2 would wait a minute.
func TestServer_WaveHeaderReachesTheBatcher(t *testing.T) {
	rc := &idRecorder{BatchReceiver: openStore(t, "receiver.db")}
	b := NewBatcher(rc, BatcherOptions{WaveWait: time.Minute})
	defer b.Close()
	srv := httptest.NewServer(NewServer(b, secret, ServerOptions{}))
	defer srv.Close()
	srv.Client().Timeout = 10 * time.Second
	send := func(id, wave string) error {
		d := deliver(id, "flow-"+id, 1, `{"delta": 1}`)
		d.edit = func(h http.Header) { h.Set(webhook.HeaderWave, wave) }
		resp, err := srv.Client().Do(d.request(t, srv.URL))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: status %d", id, resp.StatusCode)
		}
		return nil
	}
	if err := send("lone", "x y/2"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for _, id := range []string{"a", "b", "c"} {
		go func() { errs <- send(id, "w-1/4") }()
	}
	time.Sleep(50 * time.Millisecond)
	go func() { errs <- send("d", "w-1/4") }()
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.calls) != 2 || len(rc.calls[0]) != 1 || len(rc.calls[1]) != 4 {
		t.Fatalf("calls %v; want [lone], then the wave's 4 together", rc.calls)
	}
}
