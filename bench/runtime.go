package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/inbox"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
	relayrt "github.com/fairrelay/fairrelay/relay"
)

// RuntimePolicy is the queue policy of the runtime cases: ticks are wall
// milliseconds (the store is opened WithRealTime), leases of 30 s.
func RuntimePolicy() queuestore.Policy {
	return queuestore.Policy{Lease: 30_000, MaxAttempts: 3, BackoffBase: 1_000, BackoffCap: 8_000, Fairness: queuestore.FairMinServed}
}

// openRuntimeQueue opens a queue for the runtime: real time (clock.Wall,
// 1 s skew) and RuntimePolicy.
func openRuntimeQueue(path string) (*queuestore.Store, error) {
	return queuestore.Open(path, queuestore.WithPolicy(RuntimePolicy()), queuestore.WithRealTime(clock.Wall{}, 1000))
}

// RuntimeLinger is the Linger of the runtime cases' inbox.Batcher
// (0, inbox.DefaultLinger: none), set by benchrun
// -runtime-linger to measure the choice of the default.
var RuntimeLinger time.Duration

// Receiver is the runtime cases' in-process receiver: what a user has,
// relay.NewLocal over inbox.NewBatcher (group commit) over a receiverstore,
// with the store's commits counted for RuntimeProbe.
type Receiver struct {
	*inbox.Batcher
	h relayrt.Handler
	c *countingReceiver
}

// countingReceiver is a receiver store (either backend's) that counts its
// commits: each ReceiveBatch, and each Receive (a batch of one), with its
// size and time.
type countingReceiver struct {
	Store inbox.BatchReceiver
	mu    sync.Mutex
	st    OpStats
}

func (c *countingReceiver) Receive(ctx context.Context, m receiverstore.Message) (receiverstore.Outcome, error) {
	began := time.Now()
	out, err := c.Store.Receive(ctx, m)
	c.mu.Lock()
	c.st.add(1, time.Since(began))
	c.mu.Unlock()
	return out, err
}

func (c *countingReceiver) ReceiveBatch(ctx context.Context, ms []receiverstore.Message) ([]receiverstore.BatchResult, error) {
	began := time.Now()
	rs, err := c.Store.ReceiveBatch(ctx, ms)
	c.mu.Lock()
	c.st.add(len(ms), time.Since(began))
	c.mu.Unlock()
	return rs, err
}

// stats returns a copy of the commit counts so far.
func (r *Receiver) stats() OpStats {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	st := r.c.st
	st.Took = append([]time.Duration(nil), r.c.st.Took...)
	return st
}

// NewReceiver starts the batcher over s, a receiver store of either backend
// (batches of up to 64, Linger RuntimeLinger); Close stops it.
func NewReceiver(s inbox.BatchReceiver) *Receiver {
	c := &countingReceiver{Store: s}
	b := inbox.NewBatcher(c, inbox.BatcherOptions{MaxBatch: 64, Linger: RuntimeLinger})
	return &Receiver{Batcher: b, h: relayrt.NewLocal(b), c: c}
}

// Handle delivers e through relay.NewLocal: the settle reasons of an HTTP
// delivery.
func (r *Receiver) Handle(ctx context.Context, e relayrt.Event) error {
	return r.h.Handle(ctx, e)
}

// runtimeRun is a prepared runtime case: a loaded queue, a handler, and the
// relay options. Each Step runs one relay for step and counts the events
// its handler completed successfully (all settled by the relay's shutdown).
type runtimeRun struct {
	q       relayrt.Queue // the store, as the relay takes it
	rq      relayrt.Queue // the queue the relay uses, when not q (RuntimeProbe)
	rc      *Receiver
	h       relayrt.Handler
	o       relayrt.Options
	step    time.Duration
	ok      atomic.Int64 // successful deliveries so far, in every Step
	failed  atomic.Int64 // failed deliveries so far
	loaded  int64        // events in the backlog
	closers []func() error

	runTook   time.Duration // the last Step's Run, start to return
	ht        *HandlerTimes // when not nil, told each Step's mean handler time
	took, ran atomic.Int64  // handler time (ns) and runs in the current Step
}

// HandlerTimes collects, Step by Step (the warm-up's included), the mean
// time the handler of an observed runtime case took: for the 50 ms handler,
// how long its wait really lasted on the loaded machine.
type HandlerTimes struct {
	mu    sync.Mutex
	means []time.Duration
}

// Means returns the per-Step means so far, in Step order.
func (h *HandlerTimes) Means() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.means...)
}

func (w *runtimeRun) Handle(ctx context.Context, e relayrt.Event) error {
	began := time.Now()
	err := w.h.Handle(ctx, e)
	if w.ht != nil {
		w.took.Add(int64(time.Since(began)))
		w.ran.Add(1)
	}
	if err == nil {
		w.ok.Add(1)
	} else {
		w.failed.Add(1)
		return fmt.Errorf("bench handler: %w", err)
	}
	return nil
}

// Step runs a relay for w.step and returns the events it delivered.
func (w *runtimeRun) Step(ctx context.Context) (int, error) {
	before := w.ok.Load()
	w.took.Store(0)
	w.ran.Store(0)
	q := w.queue()
	if w.rq != nil {
		q = w.rq
	}
	r, err := relayrt.New(q, w, w.o)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, w.step)
	defer cancel()
	began := time.Now()
	err = r.Run(rctx)
	w.runTook = time.Since(began)
	if err != nil {
		return 0, err
	}
	total := w.ok.Load()
	n := int(total - before)
	if ran := w.ran.Load(); w.ht != nil && ran > 0 {
		w.ht.mu.Lock()
		w.ht.means = append(w.ht.means, time.Duration(w.took.Load()/ran))
		w.ht.mu.Unlock()
	}
	// Counted here, not read with Stats: a Stats call scans the events and
	// the audit and, inside the timed Step, cost up to a sixth of a 1.5 s
	// slice on the loaded machine.
	if f := w.failed.Load(); f > 0 {
		return 0, fmt.Errorf("runtime case: %d deliveries failed", f)
	}
	if n == 0 || total >= w.loaded {
		return 0, fmt.Errorf("runtime case: %d of %d events delivered: %w", total, w.loaded, ErrBacklogEmpty)
	}
	return n, nil
}

// SeparateSettleClaim, when set, hides the store's SettleClaimBatch from
// the relay in the runtime cases (and RuntimeProbe): the relay then settles
// and claims in two transactions, as before the combined call, so that the
// two can be measured in alternation (benchrun -runtime-separate).
var SeparateSettleClaim bool

// plainQueue is a relayrt.Queue with no optional method.
type plainQueue struct{ relayrt.Queue }

// queue is the queue the relay gets: the store, or the store behind
// plainQueue under SeparateSettleClaim.
func (w *runtimeRun) queue() relayrt.Queue {
	if SeparateSettleClaim {
		return plainQueue{w.q}
	}
	return w.q
}

// Close closes what the case opened, in reverse order.
func (w *runtimeRun) Close() error {
	var errs []error
	for i := len(w.closers) - 1; i >= 0; i-- {
		errs = append(errs, w.closers[i]())
	}
	return errors.Join(errs...)
}

// RuntimeKind names the handler of a runtime case.
type RuntimeKind string

// The runtime cases' handlers.
const (
	RuntimeInProcess RuntimeKind = "in-process" // Receiver into receiverstore
	RuntimeHTTP      RuntimeKind = "http"       // relayrt.NewHTTP to a loopback receiver server into receiverstore
	RuntimeSleep     RuntimeKind = "sleep-50ms" // a handler that waits 50 ms
)

// RuntimeCase is the relay runtime draining a backlog of flows × perFlow
// events with the given concurrency and batch, through the handler kind.
func RuntimeCase(kind RuntimeKind, concurrency, batch, flows, perFlow int, step time.Duration) Case {
	return ObservedRuntimeCase(kind, concurrency, batch, flows, perFlow, step, nil)
}

// ObservedRuntimeCase is RuntimeCase that also tells ht, when not nil, the
// mean handler time of every Step.
func ObservedRuntimeCase(kind RuntimeKind, concurrency, batch, flows, perFlow int, step time.Duration, ht *HandlerTimes) Case {
	return runtimeCase(fmt.Sprintf("runtime/%s/c%d-b%d", kind, concurrency, batch), sqliteRuntimeStores, kind, concurrency, batch, flows, perFlow, step, ht)
}

// runtimeQueue is what a runtime case needs of a queue store: the relay's
// queue, loadable with LoadBacklog, closable.
type runtimeQueue interface {
	relayrt.Queue
	BatchEnqueuer
	Close() error
}

// runtimeStores opens a runtime case's queue (with RuntimePolicy, in real
// time) and, when receiver is true, its receiver store, for the case in dir;
// closers close (and drop) what it opened, in order.
type runtimeStores func(ctx context.Context, dir string, receiver bool) (runtimeQueue, inbox.BatchReceiver, []func() error, error)

// sqliteRuntimeStores are the runtime stores on SQLite files in dir.
func sqliteRuntimeStores(ctx context.Context, dir string, receiver bool) (runtimeQueue, inbox.BatchReceiver, []func() error, error) {
	q, err := openRuntimeQueue(filepath.Join(dir, "queue.db"))
	if err != nil {
		return nil, nil, nil, err
	}
	if !receiver {
		return q, nil, []func() error{q.Close}, nil
	}
	rs, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		q.Close()
		return nil, nil, nil, err
	}
	return q, rs, []func() error{q.Close, rs.Close}, nil
}

// runtimeCase is a runtime case named name on the stores that open opens.
func runtimeCase(name string, open runtimeStores, kind RuntimeKind, concurrency, batch, flows, perFlow int, step time.Duration, ht *HandlerTimes) Case {
	return Case{
		Name: name,
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			w := &runtimeRun{step: step, o: relayrt.Options{Concurrency: concurrency, Batch: batch, Poll: time.Second, ShutdownGrace: 30 * time.Second}, ht: ht}
			fail := func(err error) (Workload, error) { w.Close(); return nil, err }
			q, rs, closers, err := open(ctx, dir, kind != RuntimeSleep)
			if err != nil {
				return nil, err
			}
			w.q = q
			w.closers = append(w.closers, closers...)
			if err := LoadBacklog(ctx, q, "e", flows, perFlow); err != nil {
				return fail(err)
			}
			if a, ok := q.(interface{ analyze(context.Context) error }); ok {
				if err := a.analyze(ctx); err != nil { // statistics, as autovacuum would soon give them
					return fail(err)
				}
			}
			w.loaded = int64(flows * perFlow)
			if kind == RuntimeSleep {
				w.h = relayrt.HandlerFunc(func(ctx context.Context, e relayrt.Event) error {
					select {
					case <-time.After(50 * time.Millisecond):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				return w, nil
			}
			rc := NewReceiver(rs)
			w.rc = rc
			w.closers = append(w.closers, rc.Close)
			if kind == RuntimeInProcess {
				w.h = rc
				return w, nil
			}
			secret := []byte("bench-secret")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return fail(err)
			}
			srv := &http.Server{Handler: inbox.NewServer(rc.Batcher, secret, inbox.ServerOptions{Logger: slog.New(slog.DiscardHandler)})}
			go srv.Serve(ln)
			w.closers = append(w.closers, srv.Close)
			h, err := relayrt.NewHTTP("http://"+ln.Addr().String()+"/events", secret, relayrt.HTTPOptions{MaxIdleConns: concurrency})
			if err != nil {
				return fail(err)
			}
			w.h = h
			return w, nil
		},
	}
}

// FairnessResult is the runtime fairness measurement.
type FairnessResult struct {
	Deliveries int // deliveries (of every flow) by the time every small flow had finished
	BigServed  int // of them, events of the big flow
}

// RuntimeFairness runs the relay (concurrency 16, batch 64, a handler that
// only counts) on one flow of bigEvents events and small flows of
// smallEvents each, enqueued big flow first, and returns the number of
// deliveries after which every small flow had all its events delivered.
func RuntimeFairness(ctx context.Context, dir string, bigEvents, small, smallEvents int) (FairnessResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return FairnessResult{}, err
	}
	q, err := openRuntimeQueue(filepath.Join(dir, "queue.db"))
	if err != nil {
		return FairnessResult{}, err
	}
	defer q.Close()
	var es []queuestore.Event
	for i := range bigEvents {
		es = append(es, queuestore.Event{ID: fmt.Sprintf("big-%d", i), Flow: "big", Body: body})
	}
	for f := range small {
		for i := range smallEvents {
			es = append(es, queuestore.Event{ID: fmt.Sprintf("s%d-%d", f, i), Flow: fmt.Sprintf("small-%03d", f), Body: body})
		}
	}
	for len(es) > 0 {
		n := min(len(es), 1000)
		if _, err := q.EnqueueBatch(ctx, es[:n], now); err != nil {
			return FairnessResult{}, err
		}
		es = es[n:]
	}
	var mu sync.Mutex
	var res FairnessResult
	delivered, smallLeft := 0, small*smallEvents
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := relayrt.HandlerFunc(func(_ context.Context, e relayrt.Event) error {
		mu.Lock()
		defer mu.Unlock()
		delivered++
		if e.Flow == "big" {
			res.BigServed++
		} else if smallLeft--; smallLeft == 0 {
			res.Deliveries = delivered
			cancel()
		}
		return nil
	})
	r, err := relayrt.New(q, h, relayrt.Options{Concurrency: 16, Batch: 64})
	if err != nil {
		return FairnessResult{}, err
	}
	if err := r.Run(rctx); err != nil {
		return FairnessResult{}, err
	}
	if res.Deliveries == 0 {
		return res, errors.New("runtime fairness: the small flows did not finish")
	}
	return res, nil
}

// RuntimeWakeSameProcess measures, n times, the time from the return of an
// Enqueue (its commit) followed by Notify to the start of the handler, with
// an idle relay (poll interval 1 s, so only Notify can explain a short
// latency). It includes the relay's ClaimBatch transaction.
func RuntimeWakeSameProcess(ctx context.Context, dir string, n int) ([]time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	q, err := openRuntimeQueue(filepath.Join(dir, "queue.db"))
	if err != nil {
		return nil, err
	}
	defer q.Close()
	started := make(chan time.Time, 1)
	h := relayrt.HandlerFunc(func(context.Context, relayrt.Event) error { started <- time.Now(); return nil })
	r, err := relayrt.New(q, h, relayrt.Options{Poll: time.Second})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	var out []time.Duration
	for i := range n {
		time.Sleep(20 * time.Millisecond) // let the relay go idle
		if _, err := q.Enqueue(ctx, queuestore.Event{ID: fmt.Sprintf("w%d", i), Flow: "wake", Body: body}, clock.Wall{}.Now()); err != nil {
			return nil, err
		}
		t0 := time.Now() // the enqueue is committed
		r.Notify()
		select {
		case t1 := <-started:
			out = append(out, t1.Sub(t0))
		case <-time.After(10 * time.Second):
			return nil, errors.New("wake-up: handler did not start")
		}
	}
	return out, nil
}

// EnvWakeDB names the queue file of the wake-up child (RuntimeWakeChild).
const EnvWakeDB = "FAIRRELAY_BENCH_WAKE_DB"

// RuntimeWakeOtherProcess measures, n times, the time from an Enqueue made
// by another OS process (exe with args, running RuntimeWakeChild) to the
// start of the handler in this process. The relay learns of such work only
// by polling, every poll.
func RuntimeWakeOtherProcess(ctx context.Context, dir string, n int, poll time.Duration, exe string, args ...string) ([]time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "queue.db")
	q, err := openRuntimeQueue(path)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	started := make(chan relayrt.Event, 1)
	at := make(chan time.Time, 1)
	h := relayrt.HandlerFunc(func(_ context.Context, e relayrt.Event) error { at <- time.Now(); started <- e; return nil })
	r, err := relayrt.New(q, h, relayrt.Options{Poll: poll})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	var out []time.Duration
	for i := range n {
		// The child enqueues at a time that does not line up with the poll.
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Env = append(os.Environ(), EnvWakeDB+"="+path, "FAIRRELAY_BENCH_WAKE_ID="+strconv.Itoa(i))
		outb, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("wake child: %w", err)
		}
		var enq int64
		if _, err := fmt.Sscan(string(outb), &enq); err != nil {
			return nil, fmt.Errorf("wake child output %q: %w", outb, err)
		}
		select {
		case t1 := <-at:
			<-started
			out = append(out, t1.Sub(time.Unix(0, enq)))
		case <-time.After(10 * poll):
			return nil, errors.New("wake-up (other process): handler did not start")
		}
	}
	return out, nil
}

// RuntimeWakeChild is the other process of RuntimeWakeOtherProcess: it
// opens the queue, waits a pseudo-random part of a second so that its
// enqueue falls anywhere in the relay's poll interval, enqueues one event
// and prints the enqueue's end time in Unix nanoseconds.
func RuntimeWakeChild(ctx context.Context) error {
	path, id := os.Getenv(EnvWakeDB), os.Getenv("FAIRRELAY_BENCH_WAKE_ID")
	q, err := openRuntimeQueue(path)
	if err != nil {
		return err
	}
	defer q.Close()
	i, _ := strconv.Atoi(id)
	time.Sleep(time.Duration((i*7919)%1000) * time.Millisecond)
	if _, err := q.Enqueue(ctx, queuestore.Event{ID: "other-" + id, Flow: "other", Body: body}, clock.Wall{}.Now()); err != nil {
		return err
	}
	fmt.Println(time.Now().UnixNano())
	return nil
}

// RuntimeIdleCPU runs an idle relay (nothing to do, poll interval 1 s) for
// d and returns the CPU time this process used per second meanwhile. A
// garbage collection runs first, so that what the cases before it left to
// collect is not charged to the idle relay (benchrun measures it after
// them, in the same process).
func RuntimeIdleCPU(ctx context.Context, dir string, d time.Duration) (time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	q, err := openRuntimeQueue(filepath.Join(dir, "queue.db"))
	if err != nil {
		return 0, err
	}
	defer q.Close()
	r, err := relayrt.New(q, relayrt.HandlerFunc(func(context.Context, relayrt.Event) error { return nil }), relayrt.Options{})
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	time.Sleep(100 * time.Millisecond)
	runtime.GC()
	c0 := cpuTime()
	t0 := time.Now()
	time.Sleep(d)
	used, el := cpuTime()-c0, time.Since(t0)
	cancel()
	if err := <-done; err != nil {
		return 0, err
	}
	return time.Duration(float64(used) / el.Seconds()), nil
}

// cpuTime is this process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Percentile returns the p-th percentile (0..100) of ds, nearest rank.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(len(s)-1, k))]
}
