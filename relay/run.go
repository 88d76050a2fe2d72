package relay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/webhook"
)

// noDue is a claim time that never comes by itself: only Notify, the poll
// interval or a NextDue answer move it.
const noDue = clock.Tick(math.MaxInt64)

// claimState is where a claim held by the relay stands.
type claimState int

const (
	parked   claimState = iota // claimed while a lost handler of its flow still runs
	running                    // its handler runs
	finished                   // its handler returned; the settle waits for its batch
)

// claim is one claim the relay holds.
type claim struct {
	c           queue.Claim
	lease       clock.Tick // the lease end the queue last granted
	margin      clock.Tick // extend when at most this much of it is left
	state       claimState
	cancel      context.CancelCauseFunc
	lost        bool // the lease is gone: never settled
	interrupted bool // cancelled at the end of the shutdown grace period
	res         queue.Result
	wave        *wave // the handlers started with this one, while it runs
}

// wave is a group of handlers started together (one claim call's, or a
// parked claim's). began and pub never change; running is the
// loop's, counted while any of them runs.
type wave struct {
	began   time.Time
	pub     Wave // what the handlers' contexts carry (WaveOf)
	running int
}

// outcome is what a handler goroutine reports.
type outcome struct {
	cl       *claim
	err      error
	panicked bool
	took     time.Duration
}

// loop is the state of one Run. Only Run's goroutine touches it; handler
// goroutines talk to it through done.
type loop struct {
	r    *Relay
	sctx context.Context // store calls: never cancelled, so a shutdown can still settle
	base context.Context // parent of the handler contexts

	holds      map[*claim]struct{} // claims whose lease the relay keeps
	byFlow     map[string]*claim   // the handler goroutine running per flow (perhaps lost)
	parked     map[string]*claim   // a claim waiting for its flow's lost handler to return
	goroutines int
	done       chan outcome
	gone       chan struct{} // closed when Run returns: nobody reads done any more
	waves      []*wave       // waves with a handler running, oldest first
	starting   []*claim      // the claims of the call in hand, to start as one wave

	pending      []*claim // finished, to settle
	pendingSince time.Time

	nextClaim clock.Tick // claim when now >= nextClaim
	freedAt   time.Time  // when the first slot freed since the last claim; zero when none
	lastAsk   time.Time  // the last ClaimBatch or NextDue
	retryAt   time.Time  // after a failed queue call, no queue call before this
	failures  int

	// recheck is the wait the last claim that left something out and came
	// back short set (nextClaim = recheckFrom + recheck), doubled from
	// destRecheck at each such claim that claimed nothing; 0 when something
	// changed here since (claimNow, recheckSoon, a claim that took events).
	recheck     clock.Tick
	recheckFrom clock.Tick

	untilIdle bool // RunUntilIdle: stop once idle
	idle      bool // the queue was seen idle (untilIdle only)

	pruneAt time.Time         // when the next prune pass starts (zero: at once)
	pruning bool              // a pass is under way: prune again at the next turn
	pruned  queue.PruneResult // what the pass under way deleted so far
	batches int               // the pass's Prune calls so far

	destRun       map[string]int // handlers running per destination (DestinationQueue only)
	destRefreshAt time.Time      // when to reread the registered destinations
	filtered      bool           // the last claim left something out
	allOut        bool           // the last claim found every known destination left out

	stopping   bool
	graceEnd   time.Time
	cancelled  bool
	abandonEnd time.Time
}

// Run claims, runs and settles until ctx ends, then shuts down: it stops
// claiming, drops claims not yet started (the queue hands them out again
// after their lease), keeps extending the leases of running handlers and
// waits for them up to Options.ShutdownGrace, settles what finished, and
// returns. Handlers still running at the end of the grace period get their
// contexts cancelled (cause ErrShutdown); a result they return after that is
// settled only when it is a success. Run returns nil after a complete
// shutdown, an error wrapping ErrAbandoned when handlers were still running
// AbandonWait after the cancellation, and an error when the last settle
// batch fails, or when ctx ends while the queue's policy still cannot be
// read (a relay that starts while its database is away waits for it,
// retrying as below). A Relay runs once (ErrRunning).
//
// Failed queue calls during the run are logged, counted
// (fairrelay_store_errors_total) and retried after a backoff that doubles
// from 10 ms up to Options.Poll; they do not end Run.
func (r *Relay) Run(ctx context.Context) error {
	_, err := r.run(ctx, false)
	return err
}

// run is Run, and RunUntilIdle when untilIdle; idle reports that it
// stopped because the queue was idle.
func (r *Relay) run(ctx context.Context, untilIdle bool) (idle bool, err error) {
	if !r.started.CompareAndSwap(false, true) {
		return false, ErrRunning
	}
	sctx := context.WithoutCancel(ctx)
	p, err := r.readPolicy(ctx)
	if err != nil {
		return false, err
	}
	if p.Lease <= 0 {
		return false, fmt.Errorf("%w: the queue's lease is %d ticks", ErrInvalid, p.Lease)
	}
	base, cancelAll := context.WithCancelCause(sctx)
	defer cancelAll(ErrShutdown)
	l := &loop{
		r:         r,
		sctx:      sctx,
		base:      base,
		holds:     make(map[*claim]struct{}),
		byFlow:    make(map[string]*claim),
		parked:    make(map[string]*claim),
		destRun:   make(map[string]int),
		done:      make(chan outcome, r.o.Concurrency),
		gone:      make(chan struct{}),
		nextClaim: math.MinInt64,
		untilIdle: untilIdle,
	}
	err = l.run(ctx)
	close(l.gone)
	return l.idle, err
}

// RunUntilIdle runs as Run does until the queue is idle, then shuts down
// as Run does at its context's end and returns: the library's form of
// 'relayctl relay --exit-when-idle', for a batch job, a test or a program
// that drains what it enqueued.
//
// The queue is idle when its NextDue says no head waits at all (ok false)
// while this relay holds no claim, runs no handler and has no result to
// settle: nothing is dispatchable, nothing is in flight in any process
// (a claimed head waits for its lease end, so NextDue still sees it), and
// nothing is due later. A head that waits for a backoff or a scheduled
// event (Event.NotBefore) not yet due is due later, so RunUntilIdle waits
// for it (with a ManualClock, until the clock is moved past it). What
// remains at an idle end is acked, quarantined, waiting behind a
// quarantined head, or in a paused flow (docs/contract.md §7.9).
//
// It returns nil when idle and everything was delivered: nothing was
// quarantined during this run and, when the queue is a StatsQueue, no
// event is left pending. Otherwise, still idle, it returns an
// *UndeliveredError (errors.Is ErrUndelivered) with the counts; Totals
// tells the rest. When ctx ends first, it returns an error wrapping
// context.Cause(ctx) after the shutdown. Run's own errors (ErrRunning, the
// policy, a last settle batch, ErrAbandoned) are returned as Run returns
// them.
func (r *Relay) RunUntilIdle(ctx context.Context) error {
	idle, err := r.run(ctx, true)
	if err != nil {
		return err
	}
	if !idle {
		return fmt.Errorf("relay: stopped before the queue was idle: %w", context.Cause(ctx))
	}
	u := &UndeliveredError{Quarantined: r.Totals().Quarantined}
	if sq, ok := r.q.(StatsQueue); ok {
		st, err := sq.Stats(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("relay: idle; read the queue's stats: %w", err)
		}
		u.Waiting = st.Events.Pending
	}
	if r.dq != nil {
		ds, err := r.dq.Destinations(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("relay: idle; read the queue's destinations: %w", err)
		}
		for _, d := range ds {
			if d.Paused && d.Backlog > 0 {
				u.PausedDestinations++
				u.InPausedDestinations += d.Backlog
			}
		}
	}
	if u.Quarantined > 0 || u.Waiting > 0 || u.InPausedDestinations > 0 {
		return u
	}
	return nil
}

// ErrUndelivered reports a RunUntilIdle that ended idle with events not
// delivered; the error is an *UndeliveredError.
var ErrUndelivered = errors.New("relay: idle with events not delivered")

// UndeliveredError is RunUntilIdle's answer when the queue went idle with
// events not delivered. An operator lists them ('relayctl quarantined',
// queue.Store.Quarantined) and redrives them, or resumes a paused flow or
// destination.
type UndeliveredError struct {
	// Quarantined counts the events this run quarantined (Totals.Quarantined).
	Quarantined int64
	// Waiting counts the events left pending in the whole queue: behind a
	// quarantined head (of this run or an earlier one), in a paused flow
	// or in the flows of a paused destination. It is 0 when the queue is
	// not a StatsQueue.
	Waiting int64
	// PausedDestinations counts the paused destinations with events not
	// delivered (docs/contract.md §7.11), and InPausedDestinations those
	// events: the sum of their DestinationState.Backlog (every event of
	// their flows not acked, a quarantined head included). Both are 0
	// when the queue is not a DestinationQueue.
	PausedDestinations   int
	InPausedDestinations int64
}

// Error says what was left and what to do.
func (u *UndeliveredError) Error() string {
	msg := fmt.Sprintf("relay: idle with events not delivered: %d quarantined during this run, %d waiting behind quarantined heads, "+
		"in paused flows or in paused destinations", u.Quarantined, u.Waiting)
	if u.PausedDestinations > 0 {
		msg += fmt.Sprintf(" (%d events in %d paused destinations)", u.InPausedDestinations, u.PausedDestinations)
	}
	return msg
}

// Is makes errors.Is(err, ErrUndelivered) true.
func (u *UndeliveredError) Is(target error) bool { return target == ErrUndelivered }

// grant records a lease the queue granted at now, ending at until. The
// margin is a third of that lease, rounded up, at least one tick: the
// relay extends it once no more than this is left. It follows each grant,
// not the policy read at start, since a SetPolicy of another process may
// change the Lease while this relay runs (§7.1).
func (cl *claim) grant(until, now clock.Tick) {
	lease := until - now
	cl.lease = until
	cl.margin = max(1, lease/3+min(1, lease%3))
}

func (l *loop) run(ctx context.Context) error {
	for {
		if !l.stopping && ctx.Err() != nil {
			l.beginShutdown()
		}
		var moved <-chan struct{}
		if l.r.moving != nil {
			moved = l.r.moving.Moved() // before reading now, so no move is missed
		}
		now := l.r.now()
		l.expire(now)
		l.extend(now)
		if !l.stopping {
			l.refreshDests()
			l.poll(now)
			l.settleClaim(now)
			l.claim(now)
		}
		l.flush(now, false)
		if !l.stopping {
			l.prune(now)
		}
		l.r.flog.summary(time.Now(), false)
		if l.idle && !l.stopping && !l.pruning { // a prune pass under way ends first
			l.r.log.Info("relay: idle: nothing dispatchable, in flight or waiting")
			l.beginShutdown()
		}
		if l.stopping {
			if l.goroutines == 0 {
				err := l.finalFlush()
				l.r.flog.summary(time.Now(), true)
				return err
			}
			if !l.cancelled && !time.Now().Before(l.graceEnd) {
				l.cancelRunning()
			}
			if l.cancelled && !time.Now().Before(l.abandonEnd) {
				err := l.finalFlush()
				l.abandon()
				l.r.flog.summary(time.Now(), true)
				l.r.log.Warn("relay: returning with handlers still running", "handlers", l.goroutines)
				return errors.Join(fmt.Errorf("%w: %d handlers", ErrAbandoned, l.goroutines), err)
			}
		}
		l.wait(ctx, now, moved)
	}
}

// wait blocks until a handler finishes, Notify, the context's end, the
// clock's next move (a MovingSource with a tick to wait for) or the earliest
// real-time deadline: the settle linger, the end of a claim's gathering (the
// first freed slot's Linger, or the youngest running wave's), a retry, the
// poll interval, a tick (as milliseconds), the breaker's next probe, the
// suppressed-failures log line or the shutdown deadlines. While the breaker
// is open or probing, only its next probe is waited for, not the queue's
// due tick nor the poll. While a queue call backs off, its retry is waited
// for instead of the claims' deadlines (the poll, a probe, the due tick, a
// gathering, a destinations refresh), the settle linger and the leases'
// margins. While a prune pass is under way, or when a
// deadline has passed already, it does not block: it takes what is ready
// (collect) and returns.
func (l *loop) wait(ctx context.Context, now clock.Tick, moved <-chan struct{}) {
	var deadline time.Time
	at := func(t time.Time) {
		if deadline.IsZero() || t.Before(deadline) {
			deadline = t
		}
	}
	tick := noDue
	blocked := l.blocked()
	if len(l.pending) > 0 && !blocked {
		at(l.pendingSince.Add(l.r.o.Linger))
	}
	if blocked {
		at(l.retryAt)
	} else {
		for cl := range l.holds {
			tick = min(tick, cl.lease-cl.margin)
		}
	}
	switch {
	case l.stopping || l.free() == 0 || blocked:
		// Nothing is claimed: no probe, poll or gathering to wait for.
		// While blocked, no call moves lastAsk or a probe's time, so
		// those deadlines would pass and stay past: a busy loop.
	case l.r.dq != nil:
		// Each destination's breaker: the others claim as usual.
		if next := l.nextProbe(); !next.IsZero() {
			at(next)
		}
		if !l.allOut {
			at(l.lastAsk.Add(l.r.o.Poll))
			if end, ok := l.gatherEnd(); ok {
				at(end)
			} else {
				tick = min(tick, l.nextClaim)
			}
		}
		if !l.destRefreshAt.IsZero() {
			at(l.destRefreshAt)
		}
	case l.r.br.state == BreakerOpen:
		at(l.r.br.next)
	case l.r.br.state == BreakerClosed:
		at(l.lastAsk.Add(l.r.o.Poll))
		if end, ok := l.gatherEnd(); ok {
			at(end)
		} else {
			tick = min(tick, l.nextClaim)
		}
	}
	if next := l.r.flog.deadline(); !next.IsZero() {
		at(next)
	}
	if l.r.pr != nil && !l.stopping && !blocked { // when blocked, the retry's time is waited for
		if l.pruning {
			l.collect() // the pass's next batch, after the next turn's claims and settles
			return
		}
		if !l.pruneAt.IsZero() {
			at(l.pruneAt)
		}
	}
	if l.stopping {
		if l.cancelled {
			at(l.abandonEnd)
		} else {
			at(l.graceEnd)
		}
	}
	if tick != noDue {
		if tick <= now {
			l.collect()
			return
		}
		if l.r.moving == nil {
			at(time.Now().Add(time.Duration(tick-now) * time.Millisecond))
		}
	}
	if l.r.moving == nil || tick == noDue {
		moved = nil
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			l.collect()
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	var ctxDone <-chan struct{}
	if !l.stopping {
		ctxDone = ctx.Done()
	}
	select {
	case o := <-l.done:
		l.finish(o)
		l.collect()
	case <-l.r.wake:
		l.claimNow()
	case <-ctxDone:
	case <-moved:
	case <-timeout:
	}
}

// collect takes, without waiting, the results of the handlers that have
// returned and a Notify: wait's part that a turn with nothing to wait for
// (a prune pass under way, a deadline passed) still needs, or the slots of
// finished handlers would stay taken and their results unsettled.
func (l *loop) collect() {
	for {
		select {
		case o := <-l.done:
			l.finish(o)
		case <-l.r.wake:
			l.claimNow()
		default:
			return
		}
	}
}

// free is the number of handler slots left; a parked claim holds one. In
// destination mode every destination the relay knows has
// Options.DestinationSlots slots of its own (docs/contract.md §7.11: a
// slow or dead destination never takes the capacity of the others), and
// free is the sum of what each has left.
func (l *loop) free() int {
	if !l.destMode() {
		return l.r.o.Concurrency - l.goroutines - len(l.parked)
	}
	used := l.destRun
	if len(l.parked) > 0 {
		used = maps.Clone(l.destRun)
		for _, cl := range l.parked {
			used[cl.c.Destination]++
		}
	}
	free := 0
	for name := range l.r.dests.loopView() {
		free += max(0, l.r.o.DestinationSlots-used[name])
	}
	return free
}

// blocked reports a queue-call backoff in progress.
func (l *loop) blocked() bool {
	return !l.retryAt.IsZero() && time.Now().Before(l.retryAt)
}

// readPolicy reads the queue's policy at the start of a run. A failed read
// is logged, counted (op "policy") and retried after the backoff of the
// run's queue calls (10 ms doubling up to Options.Poll), so a relay that
// starts while its database is away waits for it instead of ending; only
// ctx's end stops it, with the last error.
func (r *Relay) readPolicy(ctx context.Context) (queue.Policy, error) {
	for failures := 0; ; failures++ {
		p, err := r.q.Policy(context.WithoutCancel(ctx))
		if err == nil {
			if failures > 0 {
				r.log.Info("relay: queue calls work again", "after_failures", failures)
			}
			return p, nil
		}
		backoff := min(r.o.Poll, 10*time.Millisecond<<min(failures, 20))
		r.m.storeError("policy")
		r.log.Error("relay: queue call failed", "op", "policy", "err", RedactURLs(err.Error()), "retry_in", backoff)
		select {
		case <-ctx.Done():
			return queue.Policy{}, fmt.Errorf("relay: read policy: %w (stopped: %w)", err, context.Cause(ctx))
		case <-time.After(backoff):
		}
	}
}

func (l *loop) storeFailed(op string, err error) {
	l.failures++
	backoff := min(l.r.o.Poll, 10*time.Millisecond<<min(l.failures-1, 20))
	l.retryAt = time.Now().Add(backoff)
	l.r.m.storeError(op)
	l.r.log.Error("relay: queue call failed", "op", op, "err", RedactURLs(err.Error()), "retry_in", backoff)
}

func (l *loop) storeOK() {
	if l.failures > 0 {
		l.r.log.Info("relay: queue calls work again", "after_failures", l.failures)
	}
	l.failures = 0
	l.retryAt = time.Time{}
}

// poll asks the queue for the next due tick once Options.Poll has passed
// since the last question, to find work other processes made due.
func (l *loop) poll(now clock.Tick) {
	if l.blocked() || l.free() == 0 || now >= l.nextClaim || time.Since(l.lastAsk) < l.r.o.Poll ||
		(l.r.dq == nil && l.r.br.state != BreakerClosed) || (l.r.dq != nil && l.allOut) {
		return
	}
	l.askNextDue(now, false)
}

// askNextDue sets nextClaim from the queue's NextDue. Right after a claim
// that came back short (afterClaim), a due tick <= now means the queue's mark
// is ahead of this relay's clock: the relay then tries one tick later
// instead of claiming again at once.
func (l *loop) askNextDue(now clock.Tick, afterClaim bool) {
	due, ok, err := l.r.q.NextDue(l.sctx)
	l.lastAsk = time.Now()
	if err != nil {
		l.storeFailed("next_due", err)
		return
	}
	l.storeOK()
	switch {
	case !ok:
		l.nextClaim = noDue
		// Nothing is dispatchable, in flight (a held claim's head waits
		// for its lease end, so ok would be true) or due later, in any
		// process; with nothing of ours running or waiting to settle,
		// RunUntilIdle is done.
		if l.untilIdle && l.goroutines == 0 && len(l.pending) == 0 && len(l.holds) == 0 && len(l.parked) == 0 {
			l.idle = true
		}
	case afterClaim && due <= now && (l.filtered || l.destMode()):
		// The due head may be one the filter left out or, in destination
		// mode, one the store's own limits leave out (a destination at its
		// concurrency or rate limit counts as due in NextDue: that is
		// transient); claiming again at the next tick would spin. A paused
		// destination's heads are not due at all. While the claims keep
		// coming back empty (a breaker open for long, a destination's slots
		// held by slow handlers) the wait doubles, up to Poll: NextDue
		// cannot tell when the head left out will be claimable, and a claim
		// is a write.
		l.recheck = l.nextRecheck()
		l.recheckFrom = now
		l.nextClaim = now + l.recheck
	case afterClaim && due <= now:
		l.nextClaim = now + 1
	default:
		l.nextClaim = due
	}
}

// nextRecheck is the wait before the claim after one that left something
// out and came back short: destRecheck after something changed here,
// else twice the last wait, up to Options.Poll (as ticks: a tick is a
// millisecond), when the poll would claim anyway.
func (l *loop) nextRecheck() clock.Tick {
	if l.recheck <= 0 {
		return destRecheck
	}
	limit := max(destRecheck, clock.Tick(l.r.o.Poll/time.Millisecond))
	return min(2*l.recheck, limit)
}

// claimNow makes the next turn claim, without asking NextDue: something
// changed here (a settle, Notify, a breaker that closed).
func (l *loop) claimNow() {
	l.nextClaim = math.MinInt64
	l.recheck = 0
}

// recheckSoon ends the doubling of the wait after empty claims (nextRecheck)
// when a handler ends: its slot is free, and a probe's answer may have
// closed its breaker. A wait that has doubled is cut back to destRecheck
// after the last short claim, so a freed slot is claimed for as soon as
// before.
func (l *loop) recheckSoon() {
	if l.recheck > destRecheck {
		l.nextClaim = min(l.nextClaim, l.recheckFrom+destRecheck)
	}
	l.recheck = 0
}

// destMode reports whether the relay claims in destination mode: the queue
// is a DestinationQueue and the relay knows some registered destination
// (besides the default one, whose breaker it always has).
func (l *loop) destMode() bool {
	return l.r.dq != nil && len(l.r.dests.loopView()) > 1
}

// prune makes one Prune call of a pass, when a pass is under way or its
// time has come (Options.PruneEvery): the first call of a pass reads the
// policy and ends the pass at once when its Retention is 0. The pass goes
// on, one batch per turn of the loop, while a batch answers More; at its
// end the relay logs what it deleted at INFO and schedules the next one.
// A failed call ends the pass (it starts again after PruneEvery) and backs
// off the queue calls as any failed call does.
func (l *loop) prune(now clock.Tick) {
	if l.r.pr == nil || l.blocked() || (!l.pruning && time.Now().Before(l.pruneAt)) {
		return
	}
	if !l.pruning {
		p, err := l.r.q.Policy(l.sctx)
		if err != nil {
			l.pruneAt = time.Now().Add(l.r.o.PruneEvery)
			l.storeFailed("prune", err)
			return
		}
		if p.Retention <= 0 {
			l.pruneAt = time.Now().Add(l.r.o.PruneEvery)
			return
		}
		l.pruning, l.pruned, l.batches = true, queue.PruneResult{}, 0
	}
	res, err := l.r.pr.Prune(l.sctx, now, queue.DefaultPruneBatch)
	if err != nil {
		l.pruning = false
		l.pruneAt = time.Now().Add(l.r.o.PruneEvery)
		l.storeFailed("prune", err)
		return
	}
	l.storeOK()
	l.batches++
	l.pruned.Events += res.Events
	l.pruned.Audit += res.Audit
	l.r.m.prunedRows(res)
	if res.More {
		return
	}
	l.pruning = false
	l.pruneAt = time.Now().Add(l.r.o.PruneEvery)
	l.r.log.Info("relay: pruned", "events", l.pruned.Events, "audit", l.pruned.Audit, "batches", l.batches, "at", now)
}

// claim claims while slots are free and work is due, in batches of at most
// min(Batch, free slots), in the queue's order. While the breaker is open
// it claims nothing but its probe, one event, once the probe's time has
// come (whatever the queue's due tick: the probe finds what is due).
func (l *loop) claim(now clock.Tick) {
	if l.r.dq != nil {
		l.claimFor(now)
		return
	}
	b := l.r.br
	for !l.blocked() && l.free() > 0 {
		probe := b.state != BreakerClosed
		if probe && !b.probeDue(time.Now()) || !probe && (now < l.nextClaim || l.gathering()) {
			return
		}
		n := min(l.r.o.Batch, l.free())
		if probe {
			n = 1
			b.startProbe(time.Now())
		}
		cs, err := l.r.q.ClaimBatch(l.sctx, now, n)
		l.lastAsk = time.Now()
		l.freedAt = time.Time{}
		if err != nil {
			if probe {
				b.probeLost(time.Now())
			}
			l.storeFailed("claim", err)
			return
		}
		l.storeOK()
		more := l.took(now, cs, n)
		if probe {
			var cl *claim
			if len(cs) == 1 {
				cl = l.held(cs[0])
			}
			b.probeClaimed(cl, time.Now())
			if cl != nil {
				l.r.log.Info("relay: breaker probe", "event", cl.c.EventID, "flow", cl.c.Flow, "attempt", cl.c.Attempts)
			}
			return
		}
		if !more {
			return
		}
	}
}

// held returns the claim the relay holds for c (started or parked), nil
// when it holds none.
func (l *loop) held(c queue.Claim) *claim {
	for _, cl := range []*claim{l.byFlow[c.Flow], l.parked[c.Flow]} {
		if cl != nil && cl.c.EventID == c.EventID && cl.c.Generation == c.Generation {
			return cl
		}
	}
	return nil
}

// took starts (or parks) the claims of a batch that asked for n. When it
// came back short it asks NextDue and reports false: nothing else is
// dispatchable now.
func (l *loop) took(now clock.Tick, cs []queue.Claim, n int) bool {
	l.r.m.claimed(len(cs))
	l.r.tot.claimed.Add(int64(len(cs)))
	if len(cs) > 0 {
		l.recheck = 0 // a short claim after this one waits destRecheck
	}
	for _, c := range cs {
		l.take(c, now)
	}
	l.noteClaimed(l.starting)
	l.startWave(l.starting)
	clear(l.starting)
	l.starting = l.starting[:0]
	if len(cs) < n {
		// Nothing else is dispatchable now; ask when something will be.
		l.askNextDue(now, true)
		return false
	}
	return true
}

// settleClaim, when the queue is a SettleClaimer, makes the relay's settle
// and its claim one call (one commit) whenever it would make either alone:
// a claim is due (as in claim) or a settle batch is (flushDue). The call
// settles up to Batch finished results and claims min(Batch, free slots),
// the slots the settled handlers freed included; the claim sees the
// settles, so a flow whose head was just acked can hand out its next event
// at once. When only the settle was due the claim rides along all the same:
// it costs no commit. The results are taken before the claims, so a claim
// of a flow whose previous event was just settled starts at once; the
// handler of that event has returned already (finish), so no flow ever has
// two handlers.
func (l *loop) settleClaim(now clock.Tick) {
	if l.r.dq == nil && (l.r.sc == nil || l.r.br.state != BreakerClosed) {
		return // while the breaker is open, flush settles and claim probes
	}
	for len(l.pending) > 0 && !l.blocked() && l.free() > 0 {
		if !(now >= l.nextClaim && !l.gathering()) && !l.flushDue() {
			return
		}
		part, k, items := l.settleItems()
		n := min(l.r.o.Batch, l.free())
		var rs []queue.SettleResult
		var cs []queue.Claim
		var err error
		if l.r.dq != nil {
			// Probes are claimed by claimFor alone.
			f, _, ok := l.destFilter(n, time.Now(), false)
			if !ok {
				n, f = 0, queue.ClaimFilter{}
			}
			l.filtered = len(f.Exclude) > 0 || len(f.Room) > 0
			rs, cs, err = l.r.dq.SettleClaimFor(l.sctx, items, now, n, f)
		} else {
			rs, cs, err = l.r.sc.SettleClaimBatch(l.sctx, items, now, n)
		}
		l.lastAsk = time.Now()
		l.freedAt = time.Time{}
		if err == nil && len(rs) != len(items) {
			err = fmt.Errorf("%d results for %d items", len(rs), len(items))
		}
		if err == nil && len(cs) > n {
			err = fmt.Errorf("%d claims for n = %d", len(cs), n)
		}
		if err != nil {
			l.storeFailed("settle_claim", err)
			return
		}
		l.storeOK()
		l.settled(part, k, rs)
		if !l.took(now, cs, n) {
			return
		}
	}
}

// gathering reports that the relay waits for more free slots before it
// claims (gatherEnd).
func (l *loop) gathering() bool {
	_, ok := l.gatherEnd()
	return ok
}

// gatherEnd returns when the relay stops waiting for more free slots
// before it claims, and whether it waits now. It waits for at most Linger
// after the first slot freed and only while handlers still run (they will
// free more): while fewer than half of min(Batch, Concurrency) slots are
// free, and beyond that, up to all of them, while a handler that started
// less than Linger ago still runs. Such a handler is likely to finish
// within the wait, while one that has run longer (a slow call, a
// straggler) would only hold the others back. Claiming for every slot as
// it frees would split the handlers into small waves, each paying a claim
// and a settle transaction; a fast handler's waves grow to the whole
// min(Batch, Concurrency).
func (l *loop) gatherEnd() (time.Time, bool) {
	full := min(l.r.o.Batch, l.r.o.Concurrency)
	free := l.free()
	if l.goroutines == 0 || l.freedAt.IsZero() || free >= full {
		return time.Time{}, false
	}
	end := l.freedAt.Add(l.r.o.Linger)
	if free >= max(1, full/2) {
		if young := l.youngest().Add(l.r.o.Linger); young.Before(end) {
			end = young // beyond half, young handlers only
		}
	}
	return end, time.Now().Before(end)
}

// youngest returns when the most recently started wave that still runs
// began (the zero time when none runs).
func (l *loop) youngest() time.Time {
	if len(l.waves) == 0 {
		return time.Time{}
	}
	return l.waves[len(l.waves)-1].began
}

// take holds a new claim and adds it to the claims to start (starting),
// or parks it when a handler of its flow still runs. The queue hands out a
// flow whose head is in flight only after that lease expired, so any
// earlier claim of the flow that this relay still has is lost: its
// handler's context is cancelled (or, not started yet, it never starts)
// and it is never settled.
func (l *loop) take(c queue.Claim, now clock.Tick) {
	cl := &claim{c: c}
	cl.grant(c.LeaseUntil, now)
	l.holds[cl] = struct{}{}
	if i := slices.IndexFunc(l.starting, func(s *claim) bool { return s.c.Flow == c.Flow }); i >= 0 {
		l.lose(l.starting[i], "the flow was claimed again")
		l.starting = slices.Delete(l.starting, i, i+1)
	}
	if old := l.parked[c.Flow]; old != nil {
		l.lose(old, "the flow was claimed again")
	}
	if run := l.byFlow[c.Flow]; run != nil {
		if !run.lost {
			l.lose(run, "the flow was claimed again")
		}
		cl.state = parked
		l.parked[c.Flow] = cl
		l.r.log.Warn("relay: claim parked until the lost handler of its flow returns",
			"event", c.EventID, "flow", c.Flow, "lost_event", run.c.EventID)
		return
	}
	l.starting = append(l.starting, cl)
}

// lose gives up a claim whose lease is gone.
func (l *loop) lose(cl *claim, why string) {
	if cl.lost {
		return
	}
	cl.lost = true
	delete(l.holds, cl)
	l.r.m.leaseLost()
	l.r.tot.lost.Add(1)
	if b := l.brOf(cl); b.isProbe(cl) {
		b.probeLost(time.Now())
	}
	l.r.log.Warn("relay: lease lost", "event", cl.c.EventID, "flow", cl.c.Flow, "generation", cl.c.Generation, "why", why)
	switch cl.state {
	case parked:
		if l.parked[cl.c.Flow] == cl {
			delete(l.parked, cl.c.Flow)
		}
	case running:
		cl.cancel(ErrLeaseLost)
	}
}

// startWave starts the handlers of cls as one wave.
func (l *loop) startWave(cls []*claim) {
	if len(cls) == 0 {
		return
	}
	w := &wave{began: time.Now(), pub: newWave(waveSeq.Add(1), len(cls))}
	l.waves = append(l.waves, w)
	for _, cl := range cls {
		l.start(cl, w)
	}
}

// start starts cl's handler as a member of w.
func (l *loop) start(cl *claim, w *wave) {
	cl.state = running
	cl.wave = w
	w.running++
	ctx, cancel := context.WithCancelCause(webhook.WithWave(l.base, w.pub))
	cl.cancel = cancel
	l.byFlow[cl.c.Flow] = cl
	l.goroutines++
	l.r.m.running(l.goroutines)
	l.destRun[cl.c.Destination]++
	l.r.m.destRunning(cl.c.Destination, l.destRun[cl.c.Destination])
	l.r.dests.running(cl.c.Destination, l.destRun[cl.c.Destination])
	e := Event{ID: cl.c.EventID, Flow: cl.c.Flow, Seq: cl.c.Seq, Body: cl.c.Body, Attempt: cl.c.Attempts, Generation: cl.c.Generation, Destination: cl.c.Destination}
	h, log, done, gone := l.r.h, l.r.log, l.done, l.gone
	go func() {
		defer cancel(context.Canceled)
		began := time.Now()
		o := outcome{cl: cl}
		func() {
			defer func() {
				if v := recover(); v != nil {
					o.panicked = true
					o.err = panicError{v}
					log.Error("relay: handler panicked", "event", e.ID, "flow", e.Flow, "panic", v, "stack", string(debug.Stack()))
				}
			}()
			o.err = h.Handle(ctx, e)
		}()
		o.took = time.Since(began)
		// With destinations, more handlers than done's buffer may run; one
		// that Run abandoned (ErrAbandoned) must not wait for a reader.
		select {
		case done <- o:
		case <-gone:
		}
	}()
}

// finish takes a handler's result: a lost claim is dropped, an interrupted
// failure is dropped (the queue hands it out again after its lease), and
// anything else waits for its settle batch. A claim parked behind the
// handler starts now.
func (l *loop) finish(o outcome) {
	cl := o.cl
	if l.freedAt.IsZero() {
		l.freedAt = time.Now()
	}
	l.recheckSoon()
	l.goroutines--
	l.r.m.running(l.goroutines)
	if l.destRun[cl.c.Destination]--; l.destRun[cl.c.Destination] <= 0 {
		delete(l.destRun, cl.c.Destination)
	}
	l.r.m.destRunning(cl.c.Destination, l.destRun[cl.c.Destination])
	l.r.dests.running(cl.c.Destination, l.destRun[cl.c.Destination])
	l.ended(cl)
	if l.byFlow[cl.c.Flow] == cl {
		delete(l.byFlow, cl.c.Flow)
	}
	kind := "ok"
	switch {
	case o.panicked:
		kind = "panic"
	case o.err != nil:
		kind = "failure"
	}
	l.r.m.ran(kind, o.took)
	switch {
	case cl.lost:
	case cl.interrupted && o.err != nil:
		delete(l.holds, cl)
		l.r.tot.lost.Add(1)
		if b := l.brOf(cl); b.isProbe(cl) {
			b.probeLost(time.Now())
		}
		l.r.log.Info("relay: handler interrupted by shutdown, left to its lease", "event", cl.c.EventID, "err", RedactURLs(o.err.Error()))
	default:
		cl.state = finished
		if o.panicked {
			cl.res = queue.Result{Reason: ReasonPanic, Error: errorText(o.err)}
		} else {
			cl.res = result(o.err)
		}
		l.health(cl, o)
		if len(l.pending) == 0 {
			l.pendingSince = time.Now()
		}
		l.pending = append(l.pending, cl)
	}
	if p := l.parked[cl.c.Flow]; p != nil && l.byFlow[cl.c.Flow] == nil {
		delete(l.parked, cl.c.Flow)
		l.startWave([]*claim{p})
	}
}

// ended counts cl's handler out of its wave, and forgets the wave when it
// was the last of it that ran. The waves running are few (at most one per
// claim call since the oldest running handler started), so the search is
// short.
func (l *loop) ended(cl *claim) {
	w := cl.wave
	cl.wave = nil
	if w.running--; w.running > 0 {
		return
	}
	if i := slices.Index(l.waves, w); i >= 0 {
		l.waves = slices.Delete(l.waves, i, i+1)
	}
}

// expire gives up the claims whose lease ran out before an extension (a
// queue outage longer than the margin, or a clock that jumped).
func (l *loop) expire(now clock.Tick) {
	for cl := range l.holds {
		if cl.state != finished && cl.lease <= now {
			l.lose(cl, "the lease ran out")
		}
	}
}

// extend extends, in batches, every held lease with at most its margin
// left, together with those that will be there within half their margin.
func (l *loop) extend(now clock.Tick) {
	if l.blocked() {
		return
	}
	var due bool
	for cl := range l.holds {
		if cl.lease-cl.margin <= now {
			due = true
			break
		}
	}
	if !due {
		return
	}
	var batch []*claim
	for cl := range l.holds {
		if cl.lease-cl.margin <= now+cl.margin/2 {
			batch = append(batch, cl)
		}
	}
	for len(batch) > 0 {
		part := batch[:min(len(batch), l.r.o.Batch)]
		batch = batch[len(part):]
		items := make([]queue.ExtendItem, len(part))
		for i, cl := range part {
			items[i] = queue.ExtendItem{EventID: cl.c.EventID, Generation: cl.c.Generation}
		}
		rs, err := l.r.q.ExtendBatch(l.sctx, items, now)
		if err == nil && len(rs) != len(items) {
			err = fmt.Errorf("%d results for %d items", len(rs), len(items))
		}
		if err != nil {
			l.storeFailed("extend", err)
			return
		}
		l.storeOK()
		for i, cl := range part {
			switch {
			case rs[i].Err != nil:
				l.r.m.extended("error")
				l.lose(cl, rs[i].Err.Error())
			case rs[i].Outcome == queue.Extended:
				l.r.m.extended(string(rs[i].Outcome))
				cl.grant(rs[i].LeaseUntil, now)
			default:
				l.r.m.extended(string(rs[i].Outcome))
				l.lose(cl, "extend answered "+string(rs[i].Outcome))
			}
		}
	}
}

// flush settles finished claims in one batch when it holds
// min(Batch, Concurrency) results (a full set of slots), the oldest has
// lingered for Linger, no handler is running (nothing else is coming soon),
// or force.
func (l *loop) flush(now clock.Tick, force bool) {
	for len(l.pending) > 0 && !l.blocked() {
		if !force && !l.flushDue() {
			return
		}
		if err := l.settleBatch(now); err != nil {
			return
		}
	}
}

// flushDue reports that the pending results make a settle batch now: they
// hold min(Batch, Concurrency) results (a full set of slots), the oldest
// has lingered for Linger, or no handler is running (nothing else is coming
// soon).
func (l *loop) flushDue() bool {
	return len(l.pending) >= min(l.r.o.Batch, l.r.o.Concurrency) || time.Since(l.pendingSince) >= l.r.o.Linger || l.goroutines == 0
}

// settleBatch settles up to Batch pending claims. Lost claims are dropped
// unsettled.
func (l *loop) settleBatch(now clock.Tick) error {
	part, k, items := l.settleItems()
	if len(part) > 0 {
		rs, err := l.r.q.SettleBatch(l.sctx, items, now)
		if err == nil && len(rs) != len(items) {
			err = fmt.Errorf("%d results for %d items", len(rs), len(items))
		}
		if err != nil {
			l.storeFailed("settle", err)
			return err
		}
		l.storeOK()
		l.settled(part, k, rs)
		return nil
	}
	l.settled(nil, k, nil)
	return nil
}

// settleItems picks the next settle batch: the first k pending claims, of
// which part (at most Batch, lost claims left out) are to be settled as
// items.
func (l *loop) settleItems() (part []*claim, k int, items []queue.SettleItem) {
	for k < len(l.pending) && len(part) < l.r.o.Batch {
		if cl := l.pending[k]; !cl.lost {
			part = append(part, cl)
		}
		k++
	}
	items = make([]queue.SettleItem, len(part))
	for i, cl := range part {
		items[i] = queue.SettleItem{EventID: cl.c.EventID, Generation: cl.c.Generation, Result: cl.res}
	}
	return part, k, items
}

// settled takes the results rs of the items of part, and drops the first k
// pending claims (part and the lost ones among them).
func (l *loop) settled(part []*claim, k int, rs []queue.SettleResult) {
	for i, cl := range part {
		delete(l.holds, cl)
		if rs[i].Err != nil {
			l.r.tot.settleErrors.Add(1)
			l.r.m.settled("error", cl.res.Reason)
			l.r.log.Error("relay: settle refused", "event", cl.c.EventID, "err", rs[i].Err)
			continue
		}
		l.r.m.settled(string(rs[i].Outcome), cl.res.Reason)
		l.r.m.destSettled(cl.c.Destination, rs[i].Outcome)
		l.r.dests.settled(cl.c.Destination, rs[i].Outcome)
		switch rs[i].Outcome {
		case queue.Acked:
			l.r.tot.delivered.Add(1)
		case queue.RetryScheduled:
			l.r.tot.retried.Add(1)
			l.logFailure(cl, rs[i].Outcome)
		case queue.Quarantined:
			l.r.tot.quarantined.Add(1)
			if cl.res.Permanent {
				l.r.tot.permanent.Add(1)
			}
			l.logFailure(cl, rs[i].Outcome)
		default: // Stale, Expired
			l.r.tot.lost.Add(1)
		}
		if rs[i].Outcome != queue.Stale && rs[i].Outcome != queue.Expired {
			// The flow's head moved (or waits for a backoff): what is
			// due changed, so claim again before trusting NextDue.
			l.claimNow()
		}
		if rs[i].Outcome == queue.Stale || rs[i].Outcome == queue.Expired {
			l.r.log.Info("relay: late settle", "event", cl.c.EventID, "outcome", rs[i].Outcome)
		}
	}
	l.pending = l.pending[k:]
	l.pendingSince = time.Now()
}

// finalFlush settles everything finished, retrying a failed batch up to
// three times (the backoff of storeFailed in between).
func (l *loop) finalFlush() error {
	var err error
	for try := 0; len(l.pending) > 0 && try < 3; try++ {
		if l.blocked() {
			time.Sleep(time.Until(l.retryAt))
		}
		if err = l.settleBatch(l.r.now()); err == nil {
			try = -1
		}
	}
	if len(l.pending) > 0 {
		return fmt.Errorf("relay: %d results not settled at shutdown: %w", len(l.pending), err)
	}
	return nil
}

// beginShutdown stops claiming and drops the parked claims, which never
// started: the queue hands them out again after their lease.
func (l *loop) beginShutdown() {
	l.stopping = true
	l.graceEnd = time.Now().Add(l.r.o.ShutdownGrace)
	for flow, cl := range l.parked {
		delete(l.parked, flow)
		delete(l.holds, cl)
		l.r.tot.lost.Add(1)
		if b := l.brOf(cl); b.isProbe(cl) {
			b.probeLost(time.Now())
		}
	}
	l.r.log.Info("relay: shutting down", "handlers", l.goroutines, "grace", l.r.o.ShutdownGrace)
}

// abandon gives up the claims of the handlers still running when Run
// returns ErrAbandoned: their results will never be read, and the queue
// hands the events out again after their lease. They are counted in
// Totals.LeasesLost, as a claim interrupted by the shutdown is, so that
// nothing is left in flight once Run has returned (but the results of a
// last settle batch that failed).
func (l *loop) abandon() {
	for cl := range l.holds {
		if cl.state == running {
			delete(l.holds, cl)
			l.r.tot.lost.Add(1)
		}
	}
}

// cancelRunning ends the grace period: every running handler's context is
// cancelled with ErrShutdown.
func (l *loop) cancelRunning() {
	l.cancelled = true
	l.abandonEnd = time.Now().Add(AbandonWait)
	for cl := range l.holds {
		if cl.state == running {
			cl.interrupted = true
			cl.cancel(ErrShutdown)
		}
	}
	l.r.log.Warn("relay: grace period over, handler contexts cancelled", "handlers", l.goroutines)
}

// health feeds the breaker with a finished handler's result: a success or
// an event failure says the destination answers, a destination failure
// counts towards opening; a panic or an error that is not a Failure says
// nothing about the destination (a probe that ends so is tried again after
// the same interval). On the success path of a closed breaker with no
// failures counted it does nothing.
func (l *loop) health(cl *claim, o outcome) {
	b := l.brOf(cl)
	if o.err == nil {
		if b.answered(cl, time.Now()) {
			l.closed(cl, b)
		}
		return
	}
	var f *Failure
	switch {
	case o.panicked || !errors.As(o.err, &f):
		if b.isProbe(cl) {
			b.probeLost(time.Now())
		}
	case !f.Destination:
		if b.answered(cl, time.Now()) {
			l.closed(cl, b)
		}
	default:
		now := time.Now()
		// Other flows' claims held now: their answers may yet show the
		// destination up (cl's own entry is gone from byFlow).
		others := l.othersHeld(cl)
		switch b.failed(cl, f, cl.res.Error, others, now) {
		case "opened":
			l.r.log.Warn("relay: destination down, breaker open: claiming only probes",
				"destination", DestinationLabel(cl.c.Destination), "failures", b.failures, "reason", f.Reason, "error", cl.res.Error, "next_probe", b.next.Sub(now).Round(time.Millisecond).String())
		case "probe":
			l.r.log.Warn("relay: breaker probe failed, breaker stays open",
				"destination", DestinationLabel(cl.c.Destination), "event", cl.c.EventID, "reason", f.Reason, "error", cl.res.Error, "next_probe", b.next.Sub(now).Round(time.Millisecond).String())
		}
	}
}

// closed claims at once after the breaker closed, and says so.
func (l *loop) closed(cl *claim, b *breaker) {
	l.claimNow()
	l.r.log.Info("relay: destination answers, breaker closed", "destination", DestinationLabel(cl.c.Destination), "opens", b.opens, "probes", b.probes)
}

// logFailure logs a settled failure at WARN, unless its reason's lines
// are being suppressed (then it is counted, and the count logged later).
func (l *loop) logFailure(cl *claim, o queue.Outcome) {
	if !l.r.flog.allow(cl.res.Reason, time.Now()) {
		return
	}
	l.r.log.Warn("relay: delivery failed", "event", cl.c.EventID, "flow", cl.c.Flow, "attempt", cl.c.Attempts,
		"generation", cl.c.Generation, "reason", cl.res.Reason, "error", cl.res.Error, "outcome", string(o),
		"permanent", cl.res.Permanent, "retry_after", cl.res.RetryAfter)
}
