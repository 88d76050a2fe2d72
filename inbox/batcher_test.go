package inbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// batchRecorder is a BatchReceiver that records, in order, the messages that
// reached the store in calls that may have changed it (every Receive, and
// every ReceiveBatch that succeeded), and the size of every ReceiveBatch.
// When gate is not nil, its first call waits for gate to close, so that a
// test can make requests pile up behind it.
type batchRecorder struct {
	BatchReceiver
	gate    chan struct{}
	entered chan struct{} // closed when the first call has begun
	once    sync.Once
	firstN  atomic.Int64 // messages in the first call

	mu        sync.Mutex
	order     []receiver.Message
	batches   []int // sizes of ReceiveBatch calls, failed ones too
	failed    int   // ReceiveBatch calls that failed as a whole
	singles   int   // Receive calls
	maxActive int
	active    int
}

func newBatchRecorder(r BatchReceiver, gated bool) *batchRecorder {
	rc := &batchRecorder{BatchReceiver: r, entered: make(chan struct{})}
	if gated {
		rc.gate = make(chan struct{})
	}
	return rc
}

func (r *batchRecorder) enter(n int) {
	r.once.Do(func() {
		r.firstN.Store(int64(n))
		close(r.entered)
		if r.gate != nil {
			<-r.gate
		}
	})
	r.mu.Lock()
	r.active++
	r.maxActive = max(r.maxActive, r.active)
	r.mu.Unlock()
}

func (r *batchRecorder) leave() { r.mu.Lock(); r.active--; r.mu.Unlock() }

func (r *batchRecorder) Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error) {
	r.enter(1)
	defer r.leave()
	out, err := r.BatchReceiver.Receive(ctx, m)
	r.mu.Lock()
	r.order = append(r.order, m)
	r.singles++
	r.mu.Unlock()
	return out, err
}

func (r *batchRecorder) ReceiveBatch(ctx context.Context, ms []receiver.Message) ([]receiver.BatchResult, error) {
	r.enter(len(ms))
	defer r.leave()
	rs, err := r.BatchReceiver.ReceiveBatch(ctx, ms)
	r.mu.Lock()
	r.batches = append(r.batches, len(ms))
	if err != nil {
		r.failed++
	} else {
		r.order = append(r.order, ms...)
	}
	r.mu.Unlock()
	return rs, err
}

// waitQueued waits until n requests wait in b's channel.
func waitQueued(t *testing.T, b *Batcher, n int) {
	t.Helper()
	for len(b.reqs) < n {
		time.Sleep(time.Millisecond)
	}
}

func openStore(t *testing.T, name string, opts ...receiverstore.Option) *receiverstore.Store {
	t.Helper()
	s, err := receiverstore.Open(filepath.Join(t.TempDir(), name), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// errClass is what a caller's error means: the sentinel it wraps.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, receiver.ErrInvalidBody):
		return "invalid_body"
	case errors.Is(err, receiver.ErrInvalid):
		return "invalid"
	case errors.Is(err, receiver.ErrEffect):
		return "effect"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "other: " + err.Error()
}

// result is one message with what a caller got for it.
type result struct {
	m   receiver.Message
	out receiver.Outcome
	err string
}

func (r result) String() string {
	return fmt.Sprintf("%s/%s/%d/%s -> %q %q", r.m.ID, r.m.Flow, r.m.Seq, r.m.Body, r.out, r.err)
}

func sortedStrings(rs []result) []string {
	var ss []string
	for _, r := range rs {
		ss = append(ss, r.String())
	}
	sort.Strings(ss)
	return ss
}

// mixedMessages is a workload with every outcome: accepts on several flows,
// exact duplicates, an ID reused with another body, a seq taken by another
// ID, gaps, seqs behind, deltas above MaxDelta, and invalid bodies and
// messages.
func mixedMessages() []receiver.Message {
	var ms []receiver.Message
	for f := range 4 {
		flow := fmt.Sprintf("flow-%d", f)
		for s := int64(1); s <= 12; s++ {
			ms = append(ms, receiver.Message{ID: fmt.Sprintf("%s-%d", flow, s), Flow: flow, Seq: s, Body: []byte(fmt.Sprintf(`{"delta": %d}`, s))})
		}
		ms = append(ms,
			receiver.Message{ID: flow + "-3", Flow: flow, Seq: 3, Body: []byte(`{"delta": 3}`)},      // duplicate (or gap, before 1..2)
			receiver.Message{ID: flow + "-4", Flow: flow, Seq: 4, Body: []byte(`{"delta": 99}`)},     // ID reused, other body
			receiver.Message{ID: flow + "-x5", Flow: flow, Seq: 5, Body: []byte(`{"delta": 5}`)},     // seq taken or gap
			receiver.Message{ID: flow + "-g", Flow: flow, Seq: 40, Body: []byte(`{"delta": 1}`)},     // gap
			receiver.Message{ID: flow + "-big", Flow: flow, Seq: 13, Body: []byte(`{"delta": 50}`)},  // unsupported, or gap
			receiver.Message{ID: flow + "-bad", Flow: flow, Seq: 13, Body: []byte(`{"delta": "x"}`)}, // invalid body
			receiver.Message{ID: " ", Flow: flow, Seq: 1, Body: []byte(`{"delta": 1}`)},              // invalid message
		)
	}
	return ms
}

// N concurrent callers through a Batcher get, message by message, what
// successive Receive calls in the order the Batcher took them give on a
// fresh store, and leave the same snapshot; invalid messages fail only
// their caller. The first call is held until every other request waits, so
// that group commit surely happens.
func TestBatcher_EquivalentToSequential(t *testing.T) {
	t.Parallel()
	for _, linger := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond} {
		t.Run(fmt.Sprint("linger=", linger), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t, "b.db", receiverstore.WithMaxDelta(20))
			rec := newBatchRecorder(st, true)
			b := NewBatcher(rec, BatcherOptions{MaxBatch: 16, Linger: linger})
			defer b.Close()

			ms := mixedMessages()
			const callers = 16
			work := make(chan receiver.Message, len(ms))
			for _, m := range ms {
				work <- m
			}
			close(work)
			var mu sync.Mutex
			var got []result
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for m := range work {
						out, err := b.Receive(ctx, m)
						mu.Lock()
						got = append(got, result{m, out, errClass(err)})
						mu.Unlock()
					}
				})
			}
			<-rec.entered
			waitQueued(t, b, callers-int(rec.firstN.Load()))
			close(rec.gate)
			wg.Wait()

			// The replay: the recorded order, one Receive each, on a
			// fresh store.
			ref := openStore(t, "ref.db", receiverstore.WithMaxDelta(20))
			rec.mu.Lock()
			order := append([]receiver.Message(nil), rec.order...)
			batches := append([]int(nil), rec.batches...)
			rec.mu.Unlock()
			if len(order) != len(ms) {
				t.Fatalf("the store saw %d messages, want %d", len(order), len(ms))
			}
			var want []result
			for _, m := range order {
				out, err := ref.Receive(ctx, m)
				want = append(want, result{m, out, errClass(err)})
			}
			if g, w := sortedStrings(got), sortedStrings(want); !reflect.DeepEqual(g, w) {
				t.Errorf("outcomes differ from sequential Receive:\n got %v\nwant %v", g, w)
			}
			gs, err := st.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ws, err := ref.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gs, ws) {
				t.Errorf("snapshot differs from sequential Receive:\n got %+v\nwant %+v", gs, ws)
			}
			big := 0
			for _, n := range batches {
				if n > 16 {
					t.Errorf("a batch of %d > MaxBatch 16", n)
				}
				big = max(big, n)
			}
			if big < callers-int(rec.firstN.Load()) {
				t.Errorf("largest batch %d, want %d (every waiting request): %v", big, callers-int(rec.firstN.Load()), batches)
			}
			if rec.maxActive != 1 {
				t.Errorf("%d store calls at once, want 1", rec.maxActive)
			}
			var kinds = map[string]int{}
			for _, r := range got {
				kinds[string(r.out)+r.err]++
			}
			for _, k := range []string{"accepted", "duplicate", "conflict", "gap", "invalid_body", "invalid"} {
				if kinds[k] == 0 {
					t.Errorf("no %s in the workload: %v", k, kinds)
				}
			}
		})
	}
}

// A caller whose context ends while its request waits for a batch gets the
// context's error, and its message changes nothing; the others are
// received.
func TestBatcher_CancelWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, "c.db")
	rec := newBatchRecorder(st, true)
	b := NewBatcher(rec, BatcherOptions{})
	defer b.Close()
	msg := func(flow string) receiver.Message {
		return receiver.Message{ID: flow + "-1", Flow: flow, Seq: 1, Body: []byte(`{"delta": 1}`)}
	}
	type res struct {
		out receiver.Outcome
		err error
	}
	first, kept, gone := make(chan res, 1), make(chan res, 1), make(chan res, 1)
	go func() { out, err := b.Receive(ctx, msg("a")); first <- res{out, err} }()
	<-rec.entered
	cctx, cancel := context.WithCancel(ctx)
	go func() { out, err := b.Receive(cctx, msg("gone")); gone <- res{out, err} }()
	waitQueued(t, b, 1)
	go func() { out, err := b.Receive(ctx, msg("b")); kept <- res{out, err} }()
	waitQueued(t, b, 2)
	cancel()
	if r := <-gone; !errors.Is(r.err, context.Canceled) || r.out != "" {
		t.Fatalf("canceled caller got %q, %v; want context.Canceled", r.out, r.err)
	}
	close(rec.gate)
	for _, c := range []chan res{first, kept} {
		if r := <-c; r.err != nil || r.out != receiver.Accepted {
			t.Errorf("caller got %q, %v; want accepted", r.out, r.err)
		}
	}
	fs, err := st.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var flows []string
	for _, f := range fs {
		flows = append(flows, f.Flow)
	}
	if strings.Join(flows, ",") != "a,b" {
		t.Errorf("flows %v, want a,b (the canceled message withdrawn)", flows)
	}
	// A context already done never reaches the store.
	done, stop := context.WithCancel(ctx)
	stop()
	if _, err := b.Receive(done, msg("c")); !errors.Is(err, context.Canceled) {
		t.Errorf("Receive with a done context: %v", err)
	}
}

// Close receives what was handed over before it, answers every caller,
// then refuses new requests with ErrClosed.
func TestBatcher_CloseDrains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, "d.db")
	rec := newBatchRecorder(st, true)
	// A full batch of 4 goes to the store at once and is held there; 3
	// more wait, fewer than MaxBatch, so without Close their batch would
	// linger an hour.
	b := NewBatcher(rec, BatcherOptions{MaxBatch: 4, Linger: time.Hour})
	const n = 7
	errs := make(chan error, n)
	send := func(i int) {
		out, err := b.Receive(ctx, receiver.Message{ID: fmt.Sprint("m", i), Flow: fmt.Sprint("f", i), Seq: 1, Body: []byte(`{"delta": 1}`)})
		if err == nil && out != receiver.Accepted {
			err = fmt.Errorf("message %d: %s", i, out)
		}
		errs <- err
	}
	for i := range 4 {
		go send(i)
	}
	<-rec.entered
	for i := 4; i < n; i++ {
		go send(i)
	}
	waitQueued(t, b, n-4)
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	for {
		b.mu.RLock()
		c := b.closed
		b.mu.RUnlock()
		if c {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Receive(ctx, receiver.Message{ID: "late", Flow: "g", Seq: 1, Body: []byte(`{"delta": 1}`)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Receive after Close: %v, want ErrClosed", err)
	}
	close(rec.gate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	fs, err := st.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != n {
		t.Errorf("%d flows received, want %d", len(fs), n)
	}
	if !reflect.DeepEqual(rec.batches, []int{4, 3}) {
		t.Errorf("batches %v, want [4 3]", rec.batches)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// An effect's error fails ReceiveBatch as a whole; the Batcher then
// receives each message alone: only the failing message's caller gets
// ErrEffect, every other message is applied exactly once.
func TestBatcher_EffectFailureIsItsCallersOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, "e.db",
		receiverstore.WithSchema(`CREATE TABLE IF NOT EXISTS effects (id TEXT PRIMARY KEY)`),
		receiverstore.WithEffect(func(ctx context.Context, tx receiverstore.Tx, m receiverstore.Message) error {
			if strings.Contains(string(m.Body), "fail") {
				return errors.New("effect down")
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (id) VALUES (?)`, m.ID)
			return err
		}))
	rec := newBatchRecorder(st, true)
	b := NewBatcher(rec, BatcherOptions{})
	defer b.Close()
	const n = 6
	type res struct {
		i   int
		out receiver.Outcome
		err error
	}
	results := make(chan res, n+1)
	send := func(i int, body string) {
		out, err := b.Receive(ctx, receiver.Message{ID: fmt.Sprint("m", i), Flow: fmt.Sprint("f", i), Seq: 1, Body: []byte(body)})
		results <- res{i, out, err}
	}
	go send(0, "first")
	<-rec.entered
	for i := 1; i < n; i++ {
		body := "ok"
		if i == 3 {
			body = "fail"
		}
		go send(i, body)
	}
	waitQueued(t, b, n-1)
	close(rec.gate)
	for range n {
		r := <-results
		switch {
		case r.i == 3 && !errors.Is(r.err, receiver.ErrEffect):
			t.Errorf("failing message: %q, %v; want ErrEffect", r.out, r.err)
		case r.i != 3 && (r.err != nil || r.out != receiver.Accepted):
			t.Errorf("message %d: %q, %v; want accepted", r.i, r.out, r.err)
		}
	}
	snap, err := st.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Receipts) != n-1 {
		t.Errorf("%d receipts, want %d", len(snap.Receipts), n-1)
	}
	for _, r := range snap.Receipts {
		if r.ID == "m3" {
			t.Errorf("the failed message has a receipt")
		}
	}
	if rec.failed != 1 || rec.batches[0] != n-1 {
		t.Errorf("batches %v (%d failed), want one of %d that failed", rec.batches, rec.failed, n-1)
	}
	// Each message once more: every one received before is a duplicate,
	// the failed one fails again, and nothing is applied twice.
	for i := range n {
		body := "ok"
		if i == 0 {
			body = "first"
		}
		if i == 3 {
			body = "fail"
		}
		out, err := b.Receive(ctx, receiver.Message{ID: fmt.Sprint("m", i), Flow: fmt.Sprint("f", i), Seq: 1, Body: []byte(body)})
		if i == 3 {
			if !errors.Is(err, receiver.ErrEffect) {
				t.Errorf("failing message again: %v", err)
			}
			continue
		}
		if err != nil || out != receiver.Duplicate {
			t.Errorf("message %d again: %q, %v; want duplicate", i, out, err)
		}
	}
	after, err := st.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap, after) {
		t.Errorf("redelivery changed the store")
	}
}

// A wave of callers started together (as a relay starts its handlers) is
// received in one batch even without Linger: the batch yields once to the
// callers that are ready to run before it commits. With one processor the
// last started caller runs first and wakes the batcher, which without the
// yield commits every request alone (measured: 160 Receive calls for 20
// waves of 8). Preemption can still split a wave now and then, so of 20
// waves at least 12 must be one ReceiveBatch of the whole wave.
func TestBatcher_WaveOfCallersIsOneBatch(t *testing.T) {
	runtime.GOMAXPROCS(1)
	defer runtime.SetDefaultGOMAXPROCS() // the default, and its automatic updates, again
	rc := newBatchRecorder(openStore(t, "receiver.db"), false)
	b := NewBatcher(rc, BatcherOptions{})
	defer b.Close()
	const wave = 8
	for w := range 20 {
		var wg sync.WaitGroup
		errs := make(chan error, wave)
		for i := range wave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := receiver.Message{ID: fmt.Sprintf("w%d-%d", w, i), Flow: fmt.Sprintf("f%d", i), Seq: int64(w + 1), Body: []byte(`{"delta": 1}`)}
				if out, err := b.Receive(context.Background(), m); err != nil || out != receiver.Accepted {
					errs <- fmt.Errorf("%s: %s, %v", m.ID, out, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	whole := 0
	for _, n := range rc.batches {
		if n == wave {
			whole++
		}
	}
	if whole < 12 {
		t.Fatalf("%d Receive calls and ReceiveBatch sizes %v; want at least 12 of the 20 waves in one batch of %d", rc.singles, rc.batches, wave)
	}
}
