package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
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

// Real-time policy defaults of 'relayctl relay' (ticks are milliseconds):
// docs/decisions/relay-real-time-schedule.md says why these.
const (
	defaultLease         = 30 * time.Second
	defaultBackoffBase   = time.Second
	defaultBackoffCap    = time.Minute
	defaultRetryAfterCap = time.Hour
)

// defaultSchedule is the real-time policy's list of waits: an event's
// transient failures are retried for about 7 h 43 min (10 attempts) before
// it is quarantined. While the destination is down the breaker stops
// claiming, so an outage charges only its probes to the flows
// (docs/contract.md §7.8).
var defaultSchedule = []time.Duration{
	time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour,
}

// defaultScheduleArgs is defaultSchedule as --schedule's default value.
func defaultScheduleArgs() []spanArg {
	out := make([]spanArg, len(defaultSchedule))
	for i, d := range defaultSchedule {
		out[i] = spanArg{text: shortDuration(d), dur: true, d: d}
	}
	return out
}

// cmdRelay runs the relay runtime over the queue until it is interrupted
// (or, with --exit-when-idle, until nothing is left to deliver).
func cmdRelay(e *env, args []string) (err error) {
	c := newFlags(e, "relay", "relay (--to URL [--secret S]... | --receiver PATH) [flags]",
		"Runs the relay over queue.db: claims events fairly, delivers each one and settles the result,\n"+
			"with --concurrency deliveries at once. --to URL delivers over HTTP, signed with the secret\n"+
			"(--secret or $"+secretEnv+"; --secret again adds a secret to sign with too, for a rotation),\n"+
			"to the URL that 'relayctl receive' prints; without --to it delivers in this process to the\n"+
			"receiver database (--receiver, created if missing).\n"+
			"Ticks are wall-clock milliseconds. A queue still on the default logical policy (lease 5 ticks)\n"+
			"is given the real-time policy below (--schedule's waits: an event's transient failures are\n"+
			"retried for hours), with an audit row; --lease, --schedule, --retry-after-cap, --max-attempts,\n"+
			"--backoff-base and --backoff-cap, when given, set the queue's policy (audited) if it differs\n"+
			"(--schedule none, or --max-attempts or --backoff-* without --schedule: the doubling formula).\n"+
			"Consecutive failures of the destination (refused, timeouts, 5xx, 401/403/404, 429) open a breaker:\n"+
			"no claims but one probe at a time until the destination answers (--breaker-threshold, --probe-max).\n"+
			"Ctrl-C or SIGTERM stops claiming, lets deliveries in flight finish (up to --grace), settles them\n"+
			"and exits 0. --exit-when-idle exits 0 once nothing is left to do and every event was delivered,\n"+
			"3 when events were quarantined during the run or wait behind quarantined heads.\n"+
			"On a terminal a live line shows delivered/s, backlog, in flight and quarantined.\n"+
			"--metrics ADDR serves /metrics and /status (breaker and totals; 'relayctl status --relay ADDR').\n"+
			"On a postgres:// queue the relay also LISTENs for the queue's wake-ups: another process's enqueue\n"+
			"wakes it at once; --poll stays the bound (a lost listener is retried with backoff).\n"+
			"Destinations ('relayctl destinations', docs/destinations.md): a flow whose first event named a\n"+
			"registered destination is delivered to its URL, signed with its secrets; --to is the default\n"+
			"destination of every other flow. Each destination has its own breaker, metrics and\n"+
			"--destination-slots handler slots, and the queue's limits and pauses apply over every relay.\n"+
			"The relay reads the destinations again every --destination-refresh.").withQueue()
	to := c.String("to", "", "deliver over HTTP to `URL` (the URL 'relayctl receive' prints)")
	var secrets repeatedFlag
	c.Var(&secrets, "secret", "signing secret `S` for --to (default $"+secretEnv+"); repeat it to sign with each (a rotation)")
	c.withReceiver(false)
	concurrency := c.Int("concurrency", relay.DefaultConcurrency, "deliveries in flight at once, at most `N`")
	batch := c.Int("batch", relay.DefaultBatch, "claim and settle up to `N` events per queue transaction")
	idle := c.Bool("exit-when-idle", false, "exit once nothing is dispatchable, in flight or waiting for a retry: 0 if all was delivered, 3 if not")
	metricsAddr := c.String("metrics", "", "serve Prometheus metrics on `ADDR` (host:port) at /metrics, and the relay's status at /status")
	jsonLogs := c.Bool("json", false, "log JSON lines (log/slog) on stderr; no live line")
	grace := c.Duration("grace", relay.DefaultShutdownGrace, "how long deliveries in flight may take to finish at shutdown")
	poll := c.Duration("poll", relay.DefaultPoll, "the longest wait before looking for work that another process made due")
	timeout := c.Duration("timeout", relay.DefaultHTTPTimeout, "the longest one HTTP delivery may take (--to)")
	skew := c.Duration("skew", time.Second, "how far behind the queue's clock mark this clock may be (several processes)")
	lease := c.Duration("lease", defaultLease, "policy: how long a claim holds its event (extended while it runs)")
	schedule := defaultScheduleArgs()
	c.Var(scheduleValue{&schedule}, "schedule", "policy: the `WAITS` after each failed attempt, Go durations such as 5s,30s,2m,1h (none: the doubling formula)")
	retryAfterCap := c.Duration("retry-after-cap", defaultRetryAfterCap, "policy: the longest wait a receiver's Retry-After may ask for")
	attempts := c.Int("max-attempts", 0, "policy: failed claims before an event is quarantined (default: the schedule's waits plus one; 3 with the formula)")
	base := c.Duration("backoff-base", defaultBackoffBase, "policy: the wait after the first failure (doubling) without a schedule")
	capd := c.Duration("backoff-cap", defaultBackoffCap, "policy: the longest wait between attempts without a schedule")
	threshold := c.Int("breaker-threshold", 0, "consecutive destination failures that open the breaker (0: the relay's default, 5)")
	probeMin := c.Duration("probe-min", 0, "the first wait between probes of an open breaker, doubling (0: the relay's default, 1s)")
	pruneEvery := c.Duration("prune-every", 0, "delete what the policy's retention no longer keeps, every `D` (0: never; 'relayctl policy set --retention D' sets the window)")
	probeMax := c.Duration("probe-max", 0, "the longest wait between probes of an open breaker (0: the relay's default, 1m)")
	destSlots := c.Int("destination-slots", 0, "with destinations: the handler slots of each destination, its own (0: the relay's default, --concurrency)")
	destRefresh := c.Duration("destination-refresh", relay.DefaultDestinationRefresh, "with destinations: how often the relay reads them again (new URLs, secrets, destinations)")
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
	case *threshold < 0 || *probeMin < 0 || *probeMax < 0:
		return usagef("--breaker-threshold, --probe-min and --probe-max must not be negative")
	case *destSlots < 0 || *destRefresh <= 0:
		return usagef("--destination-slots must not be negative, --destination-refresh must be positive")
	case *pruneEvery < 0:
		return usagef("--prune-every %s is negative (0: never)", shortDuration(*pruneEvery))
	case *probeMin > 0 && *probeMax > 0 && *probeMin > *probeMax:
		return usagef("--probe-min %s is above --probe-max %s", *probeMin, *probeMax)
	}
	want, err := relayPolicy(c, *lease, schedule, *retryAfterCap, *attempts, *base, *capd)
	if err != nil {
		return err
	}
	explicitPolicy := false
	for _, name := range []string{"lease", "schedule", "retry-after-cap", "max-attempts", "backoff-base", "backoff-cap"} {
		explicitPolicy = explicitPolicy || c.isSet(name)
	}
	log := newLogger(e.stderr, *jsonLogs)
	e.log = log // a lost hold on a sharded queue is logged here (shardlock.go)

	// The handler: HTTP to --to, or the receiver in this process. Usage
	// errors first, then the queue must exist (only enqueue creates one: a
	// typo must not relay from a new empty queue), then the receiver opens.
	var (
		h   relay.Handler
		def *relay.HTTP // the default destination's handler (--to)
	)
	if *to != "" {
		keys, err := secretsFrom(secrets)
		if err != nil {
			return err
		}
		hh, err := relay.NewHTTP(*to, keys[0], relay.HTTPOptions{MaxIdleConns: *concurrency, Timeout: *timeout, ExtraSecrets: keys[1:]})
		if err != nil {
			return usagef("--to: %s", relay.RedactURLs(err.Error()))
		}
		h, def = hh, hh
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
	if sq, sl, ok, oerr := e.relayShards(ms(*skew)); ok {
		// A sharded queue (shardrelay.go).
		if oerr != nil {
			return oerr
		}
		q, listen = sq, sl
	} else if pg {
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
	if h, err = routeDestinations(e.ctx, q, h, def, relay.DestinationsOptions{
		HTTP: relay.HTTPOptions{MaxIdleConns: *concurrency, Timeout: *timeout}, Refresh: *destRefresh,
	}, log); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	registerShards(reg, q)
	rl, err := relay.New(q, h, relay.Options{
		Concurrency: *concurrency, Batch: *batch, Clock: clock.Wall{}, Poll: *poll,
		ShutdownGrace: *grace, Logger: log, Metrics: reg,
		Breaker:    relay.BreakerOptions{Threshold: *threshold, MinProbe: *probeMin, MaxProbe: *probeMax},
		PruneEvery: *pruneEvery, DestinationSlots: *destSlots, DestinationRefresh: *destRefresh,
	})
	if err != nil {
		return usagef("%v", err)
	}
	dest := target(*to, e.receiverPath)
	started := time.Now()
	if *metricsAddr != "" {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		status := func() relayStatus {
			return newRelayStatus(shown(e.queuePath), dest, started, rl.Breaker(), rl.Totals(), rl.DestinationStatus())
		}
		stop, url, err := serveMetrics(*metricsAddr, reg, status, log)
		if err != nil {
			return err
		}
		defer stop()
		log.Info("metrics", "url", url, "status", strings.TrimSuffix(url, "/metrics")+"/status")
	}

	ctx, cancel := context.WithCancelCause(e.ctx)
	defer cancel(nil)
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
		delivered := func() int64 { return rl.Totals().Delivered }
		go func() { liveLine(e.stderr, q, delivered, liveStop); close(liveDone) }()
	}
	log.Info("relaying", "queue", shown(e.queuePath), "to", dest, "concurrency", *concurrency, "batch", *batch)
	// After "relaying", which supervisors (the soak) wait for: a server
	// that stops answering here delays the start, never refuses it.
	if *to == "" {
		warnAutovacuum(e.ctx, log, e.queuePath, e.receiverPath)
	} else {
		warnAutovacuum(e.ctx, log, e.queuePath)
	}
	// --exit-when-idle is the library's RunUntilIdle: idle, it returns nil
	// or an *relay.UndeliveredError (exit 3,
	// docs/decisions/relayctl-exit-status.md).
	var runErr error
	var undelivered *relay.UndeliveredError
	why := "interrupted"
	if *idle {
		runErr = rl.RunUntilIdle(ctx)
		if runErr == nil || errors.As(runErr, &undelivered) {
			why, runErr = "idle", nil
		} else if errors.Is(runErr, context.Cause(ctx)) {
			runErr = nil // interrupted, as Run's end at a signal
		}
	} else {
		runErr = rl.Run(ctx)
	}
	if errors.Is(context.Cause(e.ctx), errHoldLost) {
		why = "lost its hold on the sharded queue"
	}
	cancel(nil)
	<-listening
	if live {
		close(liveStop)
		<-liveDone // no redraw after this
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	tot := totalsOf(rl.Totals())
	fmt.Fprintf(e.stdout, "relay stopped (%s): %s in %s\n", why, tot.summary(), time.Since(started).Round(time.Millisecond))
	if runErr != nil {
		return fmt.Errorf("relay: %w", runErr)
	}
	if undelivered != nil {
		return &undeliveredError{quarantined: undelivered.Quarantined, waiting: undelivered.Waiting,
			pausedDests: undelivered.PausedDestinations, inPausedDests: undelivered.InPausedDestinations}
	}
	return nil
}

// relayPolicy is the policy the relay's flags ask for: the lease, the
// retry-after cap and, with a schedule, its waits (MaxAttempts = waits+1);
// --max-attempts or --backoff-* without --schedule (or --schedule none)
// ask for the doubling formula instead. A bad combination is a usage error.
func relayPolicy(c *cmdFlags, lease time.Duration, schedule []spanArg, retryAfterCap time.Duration,
	attempts int, base, capd time.Duration) (queuestore.Policy, error) {
	formula := c.isSet("max-attempts") || c.isSet("backoff-base") || c.isSet("backoff-cap")
	if !c.isSet("schedule") && formula {
		schedule = nil
	}
	p := queuestore.Policy{Lease: ms(lease), MaxAttempts: attempts, BackoffBase: ms(base), BackoffCap: ms(capd),
		Fairness: queuestore.FairMinServed, RetryAfterCap: ms(retryAfterCap)}
	if retryAfterCap < 0 {
		return p, usagef("--retry-after-cap %s is negative", retryAfterCap)
	}
	if len(schedule) > 0 {
		waits := make([]clock.Tick, len(schedule))
		for i, a := range schedule {
			n, err := a.ticksFor("schedule", true) // the relay's ticks are milliseconds
			if err != nil {
				return p, err
			}
			waits[i] = clock.Tick(n)
		}
		if c.isSet("max-attempts") && attempts != len(schedule)+1 {
			return p, usagef("--max-attempts %d does not fit --schedule's %d waits: leave it out (it is the waits plus one)", attempts, len(schedule))
		}
		p = p.WithSchedule(waits...)
	} else if !c.isSet("max-attempts") {
		p.MaxAttempts = queuestore.MaxAttempts
	}
	if err := p.Validate(); err != nil {
		return p, usagef("%v", err)
	}
	return p, nil
}

// undeliveredError ends an idle run that leaves events undelivered: exit
// status 3 (exitUndelivered).
type undeliveredError struct {
	quarantined, waiting int64
	pausedDests          int   // paused destinations with events waiting
	inPausedDests        int64 // their events not delivered
}

func (u *undeliveredError) Error() string {
	msg := fmt.Sprintf("not everything was delivered: %d quarantined during this run, %d waiting behind quarantined heads, "+
		"in paused flows or in paused destinations; run 'relayctl quarantined' to see why, then 'relayctl redrive'", u.quarantined, u.waiting)
	if u.pausedDests > 0 {
		msg += fmt.Sprintf("; %d events wait in %d paused destinations: 'relayctl destinations list' shows them, 'relayctl destinations resume' delivers them",
			u.inPausedDests, u.pausedDests)
	}
	return msg
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

// target names where the relay delivers, for logs, the summary and
// /status: --to without its user info (relay.RedactURLs), or the receiver in
// process.
func target(to, receiver string) string {
	if to != "" {
		return relay.RedactURLs(to)
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
	// The relay's flags say nothing of retention: the recorded window
	// stays ('relayctl policy set --retention' changes it).
	want.Retention = have.Retention
	if have.Equal(want) || (!explicit && !have.Equal(queuestore.DefaultPolicy())) {
		return nil
	}
	reason := "relayctl relay: real-time policy (" + describePolicy(want) + ")"
	if err := q.SetPolicy(ctx, want, reason, clock.Wall{}.Now()); err != nil {
		return fmt.Errorf("set the queue's policy: %w", err)
	}
	log.Info("queue policy set", "reason", reason)
	return nil
}

// describePolicy says a real-time policy in words for the audit and the
// log: "lease 30s, schedule 1s,5s,…,4h (10 attempts), retry-after cap 1h",
// or with the formula "lease 30s, 3 attempts, backoff 1s..1m".
func describePolicy(p queuestore.Policy) string {
	d := func(t clock.Tick) time.Duration { return time.Duration(t) * time.Millisecond }
	var b strings.Builder
	fmt.Fprintf(&b, "lease %s, ", shortDuration(d(p.Lease)))
	if len(p.Schedule) > 0 {
		parts := make([]string, len(p.Schedule))
		for i, w := range p.Schedule {
			parts[i] = shortDuration(d(w))
		}
		fmt.Fprintf(&b, "schedule %s (%d attempts)", strings.Join(parts, ","), p.MaxAttempts)
	} else {
		fmt.Fprintf(&b, "%d attempts, backoff %s..%s", p.MaxAttempts, shortDuration(d(p.BackoffBase)), shortDuration(d(p.BackoffCap)))
	}
	if p.RetryAfterCap > 0 {
		fmt.Fprintf(&b, ", retry-after cap %s", shortDuration(d(p.RetryAfterCap)))
	}
	return b.String()
}

// liveLine redraws one status line on w every second until done: this
// process's deliveries (acknowledged) per second, and the queue's backlog (pending and in
// flight, every process), in flight and quarantined events.
func liveLine(w io.Writer, q relayQueue, delivered func() int64, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, at := delivered(), time.Now()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			st, err := q.Stats(context.Background())
			n := delivered()
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

// serveMetrics serves reg at http://addr/metrics, and the relay's status
// (breaker and totals, as JSON: 'relayctl status --relay ADDR') at
// http://addr/status, until stop is called. Both answer GET (and HEAD)
// only.
func serveMetrics(addr string, reg *prometheus.Registry, status func() relayStatus, log *slog.Logger) (stop func(), url string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = writeJSON(w, status())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, "http://" + ln.Addr().String() + "/metrics", nil
}
