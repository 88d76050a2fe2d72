package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/inbox"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/relay"
)

// Real-time policy defaults of 'relayctl relay' (ticks are milliseconds).
const (
	defaultLease       = 30 * time.Second
	defaultBackoffBase = time.Second
	defaultBackoffCap  = time.Minute
)

// cmdRelay runs the relay runtime over the queue until it is interrupted
// (or, with --exit-when-idle, until nothing is left to deliver).
func cmdRelay(e *env, args []string) (err error) {
	c := newFlags(e, "relay", "relay (--to URL [--secret S] | --receiver PATH) [flags]",
		"Runs the relay over queue.db: claims events fairly, delivers each one and settles the result,\n"+
			"with --concurrency deliveries at once. --to URL delivers over HTTP, signed with the secret\n"+
			"(--secret or $"+secretEnv+"), to the URL that 'relayctl receive' prints; without --to it\n"+
			"delivers in this process to the receiver database (--receiver, created if missing).\n"+
			"Ticks are wall-clock milliseconds. A queue still on the default logical policy (lease 5 ticks)\n"+
			"is given the real-time policy below, with an audit row; --lease, --max-attempts, --backoff-base\n"+
			"and --backoff-cap, when given, set the queue's policy (audited) if it differs.\n"+
			"Ctrl-C or SIGTERM stops claiming, lets deliveries in flight finish (up to --grace), settles them\n"+
			"and exits 0. On a terminal a live line shows delivered/s, backlog, in flight and quarantined.\n"+
			"On a postgres:// queue the relay also LISTENs for the queue's wake-ups: another process's enqueue\n"+
			"wakes it at once; --poll stays the bound (a lost listener is retried with backoff).").withQueue()
	to := c.String("to", "", "deliver over HTTP to `URL` (the URL 'relayctl receive' prints)")
	secretFlag := c.String("secret", "", "signing secret `S` for --to (default $"+secretEnv+")")
	c.withReceiver(false)
	concurrency := c.Int("concurrency", relay.DefaultConcurrency, "deliveries in flight at once, at most `N`")
	batch := c.Int("batch", relay.DefaultBatch, "claim and settle up to `N` events per queue transaction")
	idle := c.Bool("exit-when-idle", false, "exit 0 once nothing is dispatchable, in flight or waiting for a retry")
	metricsAddr := c.String("metrics", "", "serve Prometheus metrics on `ADDR` (host:port) at /metrics")
	jsonLogs := c.Bool("json", false, "log JSON lines (log/slog) on stderr; no live line")
	grace := c.Duration("grace", relay.DefaultShutdownGrace, "how long deliveries in flight may take to finish at shutdown")
	poll := c.Duration("poll", relay.DefaultPoll, "the longest wait before looking for work that another process made due")
	timeout := c.Duration("timeout", relay.DefaultHTTPTimeout, "the longest one HTTP delivery may take (--to)")
	skew := c.Duration("skew", time.Second, "how far behind the queue's clock mark this clock may be (several processes)")
	lease := c.Duration("lease", defaultLease, "policy: how long a claim holds its event (extended while it runs)")
	attempts := c.Int("max-attempts", queuestore.MaxAttempts, "policy: failed claims before an event is quarantined")
	base := c.Duration("backoff-base", defaultBackoffBase, "policy: the wait after the first failure (doubling)")
	capd := c.Duration("backoff-cap", defaultBackoffCap, "policy: the longest wait between attempts")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	switch {
	case *concurrency < 1:
		return usagef("--concurrency %d is below 1", *concurrency)
	case *batch < 1:
		return usagef("--batch %d is below 1", *batch)
	case *grace < 0 || *poll <= 0 || *timeout <= 0 || *skew < 0:
		return usagef("--grace and --skew must not be negative, --poll and --timeout must be positive")
	case *to == "" && c.isSet("secret"):
		return usagef("--secret is for --to URL; in-process delivery (--receiver) is not signed")
	}
	want := queuestore.Policy{Lease: ms(*lease), MaxAttempts: *attempts, BackoffBase: ms(*base), BackoffCap: ms(*capd),
		Fairness: queuestore.FairMinServed}
	if err := want.Validate(); err != nil {
		return usagef("%v", err)
	}
	explicitPolicy := c.isSet("lease") || c.isSet("max-attempts") || c.isSet("backoff-base") || c.isSet("backoff-cap")
	log := newLogger(e.stderr, *jsonLogs)

	// The handler: HTTP to --to, or the receiver in this process. Usage
	// errors first, then the queue must exist (only enqueue creates one: a
	// typo must not relay from a new empty queue), then the receiver opens.
	var h relay.Handler
	if *to != "" {
		secret, err := secretFrom(*secretFlag, c.isSet("secret"))
		if err != nil {
			return err
		}
		hh, err := relay.NewHTTP(*to, secret, relay.HTTPOptions{MaxIdleConns: *concurrency, Timeout: *timeout})
		if err != nil {
			return usagef("--to: %v", err)
		}
		h = hh
	} else if e.receiverPath == "" {
		return usagef("--receiver is empty (give --to URL or --receiver PATH)")
	}
	pg := isPostgres(e.queuePath)
	if !pg {
		if err := e.mustExist(e.queuePath, "queue", "queue"); err != nil {
			return err
		}
	}
	var (
		q      relayQueue
		listen func(context.Context) (waiter, error)
	)
	if pg {
		// One connection more than the relay's own for the LISTEN.
		pq, oerr := openPGQueue(e.ctx, e.queuePath, false, 5, pgqueuestore.WithRealTime(clock.Wall{}, ms(*skew)))
		if oerr != nil {
			return fmt.Errorf("open queue %s: %w", shown(e.queuePath), oerr)
		}
		q = pq
		listen = func(ctx context.Context) (waiter, error) { return pq.Listen(ctx) }
	} else {
		sq, oerr := queuestore.Open(e.abs(e.queuePath), queuestore.WithRealTime(clock.Wall{}, ms(*skew)))
		if oerr != nil {
			return fmt.Errorf("open queue %s: %w", e.queuePath, oerr)
		}
		q = sq
	}
	defer closeWith(q, &err)
	// The receiver after the queue: a queue that does not exist (a missing
	// file or schema) creates no receiver.
	if h == nil {
		r, oerr := e.relayReceiver()
		if oerr != nil {
			return fmt.Errorf("open receiver %s: %w", shown(e.receiverPath), oerr)
		}
		defer closeWith(r, &err)
		// Group commit: the concurrent handlers' receives share one
		// transaction (docs/runtime.md, "In-process delivery"). Closed
		// before the receiver (deferred after it), once the relay has
		// returned and every handler has its result.
		b := inbox.NewBatcher(r, inbox.BatcherOptions{})
		defer b.Close()
		h = relay.NewLocal(b)
	}
	if err := ensurePolicy(e.ctx, q, want, explicitPolicy, log); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	var count countingHandler
	count.h = h
	rl, err := relay.New(q, &count, relay.Options{
		Concurrency: *concurrency, Batch: *batch, Clock: clock.Wall{}, Poll: *poll,
		ShutdownGrace: *grace, Logger: log, Metrics: reg,
	})
	if err != nil {
		return usagef("%v", err)
	}
	if *metricsAddr != "" {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		stop, url, err := serveMetrics(*metricsAddr, reg, log)
		if err != nil {
			return err
		}
		defer stop()
		log.Info("metrics", "url", url)
	}

	ctx, cancel := context.WithCancelCause(e.ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	if *idle {
		go watchIdle(ctx, q, *poll, cancel, done, log)
	}
	listening := make(chan struct{})
	if listen != nil {
		// Wake-ups from other processes' writes (pgqueuestore's LISTEN/NOTIFY,
		// wake.go); Poll stays the bound when none arrives.
		go func() { wakeOnNotify(ctx, listen, rl.Notify, log, wakeBackoff); close(listening) }()
	} else {
		close(listening)
	}
	live := !*jsonLogs && e.isTerminal(e.stderr)
	liveStop, liveDone := make(chan struct{}), make(chan struct{})
	if live {
		go func() { liveLine(e.stderr, q, &count, liveStop); close(liveDone) }()
	}
	start := time.Now()
	log.Info("relaying", "queue", shown(e.queuePath), "to", target(*to, e.receiverPath), "concurrency", *concurrency, "batch", *batch)
	runErr := rl.Run(ctx)
	cancel(nil)
	<-listening
	if live {
		close(liveStop)
		<-liveDone // no redraw after this
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	why := "interrupted"
	if errors.Is(context.Cause(ctx), errIdle) {
		why = "idle"
	}
	el := time.Since(start)
	fmt.Fprintf(e.stdout, "relay stopped (%s): %d delivered, %d failed in %s\n", why, count.ok.Load(), count.failed.Load(), el.Round(time.Millisecond))
	if runErr != nil {
		return fmt.Errorf("relay: %w", runErr)
	}
	return nil
}

// relayQueue is what 'relayctl relay' needs of its queue: the relay's own
// queue with Stats (metrics, live line), SetPolicy (ensurePolicy) and Close.
// *queuestore.Store and pgQueue have it.
type relayQueue interface {
	relay.StatsQueue
	SetPolicy(ctx context.Context, p queue.Policy, reason string, now clock.Tick) error
	Close() error
}

// Both stores give the relay's oldest-due gauge an exact reading
// (relay.OldestDueQueue); a queue without it falls back to NextDue.
var (
	_ relay.OldestDueQueue = (*queuestore.Store)(nil)
	_ relay.OldestDueQueue = pgQueue{}
)

// relayReceiver opens the receiver of in-process delivery, creating it if
// missing: a SQLite file or a postgres:// schema. Both have ReceiveBatch,
// which the relay's inbox.Batcher uses.
func (e *env) relayReceiver() (interface {
	inbox.BatchReceiver
	Close() error
}, error) {
	if isPostgres(e.receiverPath) {
		return openPGReceiver(e.ctx, e.receiverPath, true)
	}
	return receiverstore.Open(e.abs(e.receiverPath))
}

// ms converts a duration to millisecond ticks.
func ms(d time.Duration) clock.Tick { return clock.Tick(d / time.Millisecond) }

func target(to, receiver string) string {
	if to != "" {
		return to
	}
	return "receiver " + shown(receiver) + " (in process)"
}

// ensurePolicy gives the queue the real-time policy want when it still has
// the default logical one (lease 5 ticks is 5 ms on a wall clock), or when
// the operator gave policy flags (explicit) and the queue's policy differs.
// Either change writes an audit row. Otherwise the queue's policy stays.
func ensurePolicy(ctx context.Context, q relayQueue, want queuestore.Policy, explicit bool, log *slog.Logger) error {
	have, err := q.Policy(ctx)
	if err != nil {
		return fmt.Errorf("read the queue's policy: %w", err)
	}
	if have.Equal(want) || (!explicit && !have.Equal(queuestore.DefaultPolicy())) {
		return nil
	}
	reason := fmt.Sprintf("relayctl relay: real-time policy (lease %s, %d attempts, backoff %s..%s)",
		time.Duration(want.Lease)*time.Millisecond, want.MaxAttempts,
		time.Duration(want.BackoffBase)*time.Millisecond, time.Duration(want.BackoffCap)*time.Millisecond)
	if err := q.SetPolicy(ctx, want, reason, clock.Wall{}.Now()); err != nil {
		return fmt.Errorf("set the queue's policy: %w", err)
	}
	log.Info("queue policy set", "reason", reason)
	return nil
}

// errIdle is the cause of the relay's end under --exit-when-idle.
var errIdle = errors.New("idle")

// watchIdle ends the run (cause errIdle) once the queue says that no head
// is dispatchable and none waits for a tick: every event is acked or
// quarantined, or waits behind a quarantined head, in every process.
// (An event this relay holds is in flight, and so a head that waits for its
// lease end: NextDue's ok stays true until it is settled.)
func watchIdle(ctx context.Context, q relayQueue, poll time.Duration, cancel context.CancelCauseFunc, done <-chan struct{}, log *slog.Logger) {
	every := min(poll, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_, ok, err := q.NextDue(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("exit-when-idle: read the next due tick", "err", err)
		case err == nil && !ok:
			log.Info("idle: nothing dispatchable, in flight or waiting")
			cancel(errIdle)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-t.C:
		}
	}
}

// countingHandler counts the deliveries of this process by result.
type countingHandler struct {
	h          relay.Handler
	ok, failed atomic.Int64
}

func (c *countingHandler) Handle(ctx context.Context, ev relay.Event) error {
	err := c.h.Handle(ctx, ev)
	if err == nil {
		c.ok.Add(1)
	} else {
		c.failed.Add(1)
	}
	return err
}

// liveLine redraws one status line on w every second until done: this
// process's deliveries per second, and the queue's backlog (pending and in
// flight, every process), in flight and quarantined events.
func liveLine(w io.Writer, q relayQueue, c *countingHandler, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, at := c.ok.Load(), time.Now()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			st, err := q.Stats(context.Background())
			n := c.ok.Load()
			rate := float64(n-last) / now.Sub(at).Seconds()
			last, at = n, now
			if err != nil {
				fmt.Fprintf(w, "\r\033[K%d delivered  %.0f/s  (queue unreadable: %v)", n, rate, err)
				continue
			}
			fmt.Fprintf(w, "\r\033[K%d delivered  %.0f/s  backlog %d  in flight %d  quarantined %d",
				n, rate, st.Events.Pending+st.Events.Inflight, st.Events.Inflight, st.Events.Quarantined)
		}
	}
}

// serveMetrics serves reg at http://addr/metrics until stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), url string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, "http://" + ln.Addr().String() + "/metrics", nil
}
