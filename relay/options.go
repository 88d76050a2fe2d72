package relay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// Queue is what the relay needs of a queue store, in the queue module's
// vocabulary: a part of queue.Store, so every backend that keeps the queue
// contract (docs/contract.md §2, §7) satisfies it, queuestore.Store
// (SQLite) and pgqueuestore.Store (PostgreSQL) among them.
type Queue interface {
	ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error)
	SettleBatch(ctx context.Context, items []queue.SettleItem, now clock.Tick) ([]queue.SettleResult, error)
	ExtendBatch(ctx context.Context, items []queue.ExtendItem, now clock.Tick) ([]queue.SettleResult, error)
	NextDue(ctx context.Context) (clock.Tick, bool, error)
	Policy(ctx context.Context) (queue.Policy, error)
}

// StatsQueue is a Queue that can also summarise itself. When the queue
// given to New is one and Options.Metrics is set, the backlog and
// quarantined gauges are read from Stats at scrape time.
type StatsQueue interface {
	Queue
	Stats(ctx context.Context) (queue.Stats, error)
}

// OldestDueQueue is a Queue that can tell the due tick of its
// longest-waiting head dispatchable at now (queuestore.Store.OldestDue).
// The fairrelay_oldest_due_age_seconds gauge uses OldestDue when the queue
// has it, and NextDue otherwise. NextDue answers the clock mark, not the
// head's own due tick, for a head already marked dispatchable, so the gauge
// is then a lower bound.
type OldestDueQueue interface {
	Queue
	OldestDue(ctx context.Context, now clock.Tick) (clock.Tick, bool, error)
}

// SettleClaimer is a Queue that can settle results and claim in one
// transaction: SettleClaimBatch(ctx, items, now, n) answers what
// SettleBatch(ctx, items, now) followed at once by ClaimBatch(ctx, now, n)
// would (n = 0: settle only), in one commit instead of two.
// *queuestore.Store and *pgqueuestore.Store are. When the queue given to
// New is one, the relay settles its finished handlers and claims for the
// slots they freed in one call whenever it would make either call alone;
// otherwise it makes the two calls apart.
type SettleClaimer interface {
	Queue
	queue.SettleClaimer
}

// Defaults of the zero Options.
const (
	DefaultConcurrency   = 16
	DefaultBatch         = 64
	DefaultPoll          = time.Second
	DefaultLinger        = 2 * time.Millisecond
	DefaultShutdownGrace = 10 * time.Second
	// AbandonWait is how long Run still waits for handlers after it has
	// cancelled their contexts at the end of the shutdown grace period.
	AbandonWait = time.Second
)

// Options tune a Relay. The zero value of every field means its default.
type Options struct {
	// Concurrency is the most handlers running at once (default 16). The
	// relay never claims more events than it has free handler slots.
	Concurrency int
	// Batch is the most events one ClaimBatch asks for, and the most
	// items one SettleBatch or ExtendBatch carries (default 64).
	Batch int
	// Clock tells the ticks the relay hands to the queue (default
	// clock.Wall: Unix milliseconds, for a store opened with the real-time
	// option). A MovingSource (such as ManualClock) is waited on by its
	// Moved channel; with any other source a tick is one millisecond.
	Clock clock.Source
	// Poll is the longest the relay sleeps without asking the queue
	// whether another process made work due (default 1 s). Work enqueued
	// by this process is seen at once through Notify.
	Poll time.Duration
	// Linger is how long a finished handler's result may wait for others
	// to share its SettleBatch, and how long a freed handler slot may wait
	// for others to share a ClaimBatch (default 2 ms). A settle batch is
	// flushed earlier when it holds min(Batch, Concurrency) results or no
	// handler is running; a claim is made earlier when no handler is
	// running, when min(Batch, Concurrency) slots are free, or when half of
	// them are and every running handler started at least Linger ago (one
	// that has run that long is not waited for).
	Linger time.Duration
	// ShutdownGrace is how long Run waits for running handlers once its
	// context ends (default 10 s). Then their contexts are cancelled
	// (cause ErrShutdown) and Run waits at most AbandonWait more.
	ShutdownGrace time.Duration
	// Breaker tunes the breaker that stops claiming while the destination
	// is down and probes it (docs/contract.md §7.8; see BreakerOptions).
	Breaker BreakerOptions
	// Logger receives the relay's logs (default: none). Failures are
	// logged at WARN, at most a few lines per second per reason, with a
	// line counting those left out (docs/runtime.md "Logs").
	Logger *slog.Logger
	// Metrics registers the relay's Prometheus collectors (default: none).
	Metrics prometheus.Registerer
	// PruneEvery is how often the relay deletes what the queue's retention
	// window no longer keeps (docs/contract.md §7.9); 0, the default, never.
	// It works when the queue is a queue.Pruner (both stores are) and the
	// policy's Retention is above 0 (the policy is read at every pass, so a
	// SetPolicy takes effect at the next one). A pass calls Prune with
	// queue.DefaultPruneBatch, one batch per turn of the relay's loop, so
	// claims and settles run between the batches, and batches again while
	// the last one answered More. The first pass is at Run's start. See
	// docs/relay-library.md "Retention".
	PruneEvery time.Duration
	// DestinationSlots is the number of handler slots of each destination
	// while the relay knows more than one destination (docs/runtime.md
	// "Destinations"): each has that many slots of its own, which no other
	// destination's handlers ever take, so the relay runs at most
	// DestinationSlots handlers per destination it knows; default
	// Concurrency. It applies only when the queue is a DestinationQueue.
	DestinationSlots int
	// DestinationRefresh is how often the relay rereads the queue's
	// registered destinations (DestinationQueue.Destinations) to cap
	// and break each one (default 10 s; also at Run's start).
	DestinationRefresh time.Duration
}

// Relay is the runtime: it claims events from a Queue in the queue's order,
// runs the Handler on each with bounded concurrency, keeps their leases
// alive and settles their results. Make one with New and start it with Run.
type Relay struct {
	q       Queue
	sc      SettleClaimer    // q when it is one, else nil
	dq      DestinationQueue // q when it is one, else nil
	dests   destBreakers     // the breakers of the named destinations (dq only)
	pr      queue.Pruner     // q when it is one and PruneEvery > 0, else nil
	h       Handler
	o       Options
	src     clock.Source
	moving  MovingSource // src when it is one, else nil
	log     *slog.Logger
	m       *metrics
	br      *breaker
	tot     totals
	flog    *failureLog
	wake    chan struct{}
	started atomic.Bool
	last    atomic.Int64 // the highest tick handed to the queue
}

// New returns a Relay for q and h. It refuses a nil queue or handler,
// negative options and a Breaker.MaxProbe below MinProbe (ErrInvalid), and reports a Metrics registration that
// fails (for example collectors already registered).
func New(q Queue, h Handler, o Options) (*Relay, error) {
	if q == nil || h == nil {
		return nil, fmt.Errorf("%w: nil queue or handler", ErrInvalid)
	}
	if o.Concurrency < 0 || o.Batch < 0 || o.Poll < 0 || o.Linger < 0 || o.ShutdownGrace < 0 || o.PruneEvery < 0 ||
		o.DestinationSlots < 0 || o.DestinationRefresh < 0 {
		return nil, fmt.Errorf("%w: negative Concurrency, Batch, Poll, Linger, ShutdownGrace, PruneEvery, DestinationSlots or DestinationRefresh", ErrInvalid)
	}
	b := &o.Breaker
	if b.Threshold < 0 || b.MinProbe < 0 || b.MaxProbe < 0 {
		return nil, fmt.Errorf("%w: negative Breaker option", ErrInvalid)
	}
	if b.Threshold == 0 {
		b.Threshold = DefaultBreakerThreshold
	}
	if b.MinProbe == 0 {
		b.MinProbe = min(DefaultMinProbe, max(b.MaxProbe, 1))
		if b.MaxProbe == 0 {
			b.MinProbe = DefaultMinProbe
		}
	}
	if b.MaxProbe == 0 {
		b.MaxProbe = max(DefaultMaxProbe, b.MinProbe)
	}
	if b.MaxProbe < b.MinProbe {
		return nil, fmt.Errorf("%w: Breaker.MaxProbe %v is below MinProbe %v", ErrInvalid, b.MaxProbe, b.MinProbe)
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.DestinationSlots == 0 {
		o.DestinationSlots = o.Concurrency
	}
	if o.DestinationRefresh == 0 {
		o.DestinationRefresh = DefaultDestinationRefresh
	}
	if o.Batch == 0 {
		o.Batch = DefaultBatch
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = DefaultShutdownGrace
	}
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r := &Relay{q: q, h: h, o: o, src: o.Clock, log: o.Logger, wake: make(chan struct{}, 1), br: newBreaker(o.Breaker)}
	r.flog = newFailureLog(r.log)
	if sc, ok := q.(SettleClaimer); ok {
		r.sc = sc
	}
	if dq, ok := q.(DestinationQueue); ok {
		r.dq = dq
	}
	r.dests.init(r.br)
	if pr, ok := q.(queue.Pruner); ok && o.PruneEvery > 0 {
		r.pr = pr
	}
	if ms, ok := o.Clock.(MovingSource); ok {
		r.moving = ms
	}
	m, err := newMetrics(o.Metrics, r)
	if err != nil {
		return nil, err
	}
	r.m = m
	return r, nil
}

// Notify wakes the relay to claim at once. Call it after enqueueing in the
// same process; work enqueued by other processes is found within Options.Poll.
// It never blocks and is safe to call at any time, from any goroutine.
func (r *Relay) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// now returns the source's tick, never below one already handed to the
// queue, so that the relay itself never makes the queue's clock regress.
func (r *Relay) now() clock.Tick {
	t := r.src.Now()
	for {
		last := r.last.Load()
		if int64(t) <= last {
			return clock.Tick(last)
		}
		if r.last.CompareAndSwap(last, int64(t)) {
			return t
		}
	}
}
