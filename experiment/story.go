package experiment

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// This file holds the small traced steps the scenarios are written with:
// each does one store call, adds a line to the trace and returns what the
// store returned.

// Body is an event body carrying delta: {"delta":N}.
func Body(delta int) []byte {
	return fmt.Appendf(nil, `{"delta":%d}`, delta)
}

// Ev is an event of flow with the body {"delta":delta}.
func Ev(id, flow string, delta int) queue.Event {
	return queue.Event{ID: id, Flow: flow, Body: Body(delta)}
}

func (l *Lab) enqueue(ctx context.Context, q QueueStore, e queue.Event, now clock.Tick) (queue.Enqueued, error) {
	got, err := q.Enqueue(ctx, e, now)
	sched := ""
	if e.NotBefore != 0 {
		sched = fmt.Sprintf(", not before %d", e.NotBefore)
	}
	if err != nil {
		l.Trace("t=%d enqueue %s (flow %s, body %s%s) -> %s", now, e.ID, e.Flow, e.Body, sched, errText(err))
		return got, err
	}
	dup := ""
	if got.Duplicate {
		dup = ", duplicate"
	}
	l.Trace("t=%d enqueue %s (flow %s, body %s%s) -> seq %d%s", now, e.ID, e.Flow, e.Body, sched, got.Seq, dup)
	return got, nil
}

// enqueueAll enqueues events one by one at now and stops at the first error.
func (l *Lab) enqueueAll(ctx context.Context, q QueueStore, now clock.Tick, es ...queue.Event) error {
	for _, e := range es {
		if _, err := l.enqueue(ctx, q, e, now); err != nil {
			return err
		}
	}
	return nil
}

// step runs one relay step and traces it.
func (l *Lab) step(ctx context.Context, r *Relay, now clock.Tick) (Step, bool, error) {
	st, ok, err := r.Step(ctx, now)
	switch {
	case err != nil:
		return st, ok, err
	case !ok:
		l.Trace("t=%d claim: nothing dispatchable", now)
	default:
		l.Trace("t=%d %s", now, st)
	}
	return st, ok, nil
}

// claim claims without delivering: a worker that holds the event.
func (l *Lab) claim(ctx context.Context, q QueueStore, now clock.Tick) (queue.Claim, bool, error) {
	c, ok, err := q.Claim(ctx, now)
	switch {
	case err != nil:
		l.Trace("t=%d claim -> %s", now, errText(err))
	case !ok:
		l.Trace("t=%d claim: nothing dispatchable", now)
	default:
		l.Trace("t=%d claim %s (%s#%d) ticket %d gen %d attempt %d lease %d, held by a worker",
			now, c.EventID, c.Flow, c.Seq, c.Ticket, c.Generation, c.Attempts, c.LeaseUntil)
	}
	return c, ok, err
}

// deliver sends a held claim and settles it, traced.
func (l *Lab) deliver(ctx context.Context, r *Relay, c queue.Claim, now clock.Tick) (Step, error) {
	st, err := r.Deliver(ctx, c, now)
	if err != nil {
		return st, err
	}
	l.Trace("t=%d deliver %s gen %d (held since ticket %d) -> %s -> %s",
		now, c.EventID, c.Generation, c.Ticket, orNotSent(st.Received), st.Settled)
	return st, nil
}

func orNotSent(o receiver.Outcome) string {
	if o == "" {
		return "not sent (" + Unavailable + ")"
	}
	return string(o)
}

// settle settles directly, traced.
func (l *Lab) settle(ctx context.Context, q QueueStore, id string, gen int64, res queue.Result, now clock.Tick) (queue.Outcome, error) {
	out, err := q.Settle(ctx, id, gen, res, now)
	what := "ok"
	if !res.OK {
		what = "failure " + res.Reason
		if res.Permanent {
			what += " permanent"
		}
		if res.RetryAfter > 0 {
			what += fmt.Sprintf(" retry-after %d", res.RetryAfter)
		}
		if res.Error != "" {
			what += fmt.Sprintf(" error %q", res.Error)
		}
	}
	if err != nil {
		l.Trace("t=%d settle %s gen %d %s -> %s", now, id, gen, what, errText(err))
		return out, err
	}
	l.Trace("t=%d settle %s gen %d %s -> %s", now, id, gen, what, out)
	return out, nil
}

// receive sends a message straight to the receiver, traced.
func (l *Lab) receive(ctx context.Context, r ReceiverStore, m receiver.Message) (receiver.Outcome, error) {
	out, err := r.Receive(ctx, m)
	if err != nil {
		l.Trace("receive %s (flow %s, seq %d, body %s) -> %s", m.ID, m.Flow, m.Seq, m.Body, errText(err))
		return out, err
	}
	l.Trace("receive %s (flow %s, seq %d, body %s) -> %s", m.ID, m.Flow, m.Seq, m.Body, out)
	return out, nil
}

// Describe summarises an event's state for a check: the fields the contract
// predicts, with the lease only while in flight and the availability only
// while pending.
func Describe(e queue.EventState) string {
	s := fmt.Sprintf("%s gen %d attempts %d lifetime %d", e.State, e.Generation, e.Attempts, e.LifetimeAttempts)
	switch e.State {
	case "pending":
		s += fmt.Sprintf(" available %d", e.AvailableAt)
	case "inflight":
		s += fmt.Sprintf(" lease %d", e.LeaseUntil)
	}
	if e.Reason != "" {
		s += " reason " + e.Reason
	}
	return s
}

// expectEvent checks an event's state against Describe's summary.
func (l *Lab) expectEvent(ctx context.Context, q QueueStore, name, id, want string) error {
	e, err := q.Event(ctx, id)
	if err != nil {
		return fmt.Errorf("event %s: %w", id, err)
	}
	l.Equal(name, Describe(e), want)
	return nil
}

// sentinels are the stores' typed errors, in the order errText tries them.
var sentinels = []error{
	queue.ErrTimeRegression, queue.ErrConflict, queue.ErrNotFound,
	queue.ErrEmptyReason, queue.ErrNotQuarantined, queue.ErrStaleGeneration,
	queue.ErrInvalid, receiver.ErrInvalidBody, receiver.ErrInvalid,
	queue.ErrTimeAhead, queue.ErrTickOverflow, queue.ErrPolicyMismatch,
	queue.ErrFlowPaused, queue.ErrFlowNotPaused,
}

// errText names an error for a trace line by its sentinel ("refused:
// queuestore: time went backwards") or by the experiment's trigger, so that
// golden files do not depend on the stores' wording of the context or on
// SQLite's error codes. Any other error is shown as it is.
func errText(err error) string {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return "refused: " + s.Error()
		}
	}
	msg := err.Error()
	if i := strings.Index(msg, triggerPrefix); i >= 0 {
		rest := msg[i:]
		if j := strings.Index(rest, " fails"); j >= 0 {
			return "aborted by " + rest[:j+len(" fails")]
		}
	}
	return "error: " + err.Error()
}

// expectErr checks that err wraps target.
func (l *Lab) expectErr(name string, err, target error) bool {
	if errors.Is(err, target) {
		return l.Check(name, true, "refused: %v", target)
	}
	return l.Check(name, false, "error %v, want %v", err, target)
}

// expectTotal checks a flow's total at the receiver.
func (l *Lab) expectTotal(ctx context.Context, r ReceiverStore, flow string, want int64) error {
	got, err := r.Total(ctx, flow)
	if err != nil {
		return err
	}
	l.Equal("receiver total of "+flow, got, want)
	return nil
}

// expectNothing checks that a claim at now finds nothing dispatchable.
func (l *Lab) expectNothing(ctx context.Context, r *Relay, now clock.Tick, name string) error {
	st, ok, err := l.step(ctx, r, now)
	if err != nil {
		return err
	}
	if ok {
		l.Check(name, false, "claimed %s at t=%d, want nothing dispatchable", st.Claim.EventID, now)
		return nil
	}
	l.Check(name, true, "nothing dispatchable at t=%d", now)
	return nil
}

// expectServed checks a flow's served count in the queue.
func (l *Lab) expectServed(ctx context.Context, q QueueStore, name, flow string, want int64) error {
	flows, err := q.Flows(ctx)
	if err != nil {
		return err
	}
	for _, f := range flows {
		if f.Flow == flow {
			l.Equal(name, f.Served, want)
			return nil
		}
	}
	l.Check(name, false, "no flow %q", flow)
	return nil
}
