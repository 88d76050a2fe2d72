package experiment

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/crashpoint"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// Unavailable is the failure reason of a synthetic "no answer before sending"
// (docs/contract.md §3): the relay gives up on the attempt without calling the receiver.
const Unavailable = "unavailable"

// Relay moves one event at a time from the queue to the receiver. It is not a
// daemon: each [Relay.Step] is one claim, at most one delivery and one
// settle, at a tick the caller hands in.
type Relay struct {
	Queue    QueueStore
	Receiver ReceiverStore
	// Trap is hit at [crashpoint.ReceiveCommitted], after the receiver
	// returned and before the settle. The zero Trap does nothing.
	Trap crashpoint.Trap
	// Unavailable, when set, is asked before each delivery; true makes the
	// attempt a synthetic failure with reason [Unavailable] and the receiver
	// is not called.
	Unavailable func(queue.Claim) bool
}

// Step is what one relay step did.
type Step struct {
	Claim queue.Claim
	// Received is the receiver's outcome, "" when the attempt was
	// unavailable and nothing was sent.
	Received receiver.Outcome
	// Result is what the relay settled with.
	Result queue.Result
	// Settled is the queue's answer to the settle.
	Settled queue.Outcome
}

// String describes the step for a scenario's trace.
func (s Step) String() string {
	c := s.Claim
	sent := string(s.Received)
	if sent == "" {
		sent = "not sent (" + Unavailable + ")"
	}
	return fmt.Sprintf("claim %s (%s#%d) ticket %d gen %d attempt %d lease %d -> %s -> %s",
		c.EventID, c.Flow, c.Seq, c.Ticket, c.Generation, c.Attempts, c.LeaseUntil, sent, s.Settled)
}

// Message is the receiver message for a claim: the event's ID, flow,
// sequence number and body bytes, unchanged.
func Message(c queue.Claim) receiver.Message {
	return receiver.Message{ID: c.EventID, Flow: c.Flow, Seq: c.Seq, Body: c.Body}
}

// ResultFor maps a receiver outcome onto the settle result: accepted,
// duplicate and pruned are a success (the effect is applied, once: pruned
// says its receipt was deleted by retention, docs/contract.md §7.9); conflict, gap and
// unsupported_delta are a failure with the outcome as its reason.
func ResultFor(o receiver.Outcome) (queue.Result, error) {
	if o.Applied() {
		return queue.Result{OK: true}, nil
	}
	switch o {
	case receiver.Conflict, receiver.Gap, receiver.UnsupportedDelta:
		return queue.Result{Reason: string(o)}, nil
	}
	return queue.Result{}, fmt.Errorf("relay: unknown receiver outcome %q", o)
}

// Step claims one event at now, delivers it (unless it is unavailable) and
// settles it at now. ok is false when nothing was dispatchable.
func (r *Relay) Step(ctx context.Context, now clock.Tick) (Step, bool, error) {
	c, ok, err := r.Queue.Claim(ctx, now)
	if err != nil || !ok {
		return Step{}, false, err
	}
	st, err := r.Deliver(ctx, c, now)
	return st, true, err
}

// Deliver sends a claim that is already made and settles it at now: the
// second half of [Relay.Step], for a worker that claimed earlier.
func (r *Relay) Deliver(ctx context.Context, c queue.Claim, now clock.Tick) (Step, error) {
	st := Step{Claim: c}
	if r.Unavailable != nil && r.Unavailable(c) {
		st.Result = queue.Result{Reason: Unavailable}
	} else {
		out, err := r.Receiver.Receive(ctx, Message(c))
		if err != nil {
			return st, fmt.Errorf("relay %s: %w", c.EventID, err)
		}
		r.Trap.Hit(crashpoint.ReceiveCommitted)
		st.Received = out
		if st.Result, err = ResultFor(out); err != nil {
			return st, err
		}
	}
	out, err := r.Queue.Settle(ctx, c.EventID, c.Generation, st.Result, now)
	if err != nil {
		return st, fmt.Errorf("relay %s: %w", c.EventID, err)
	}
	st.Settled = out
	return st, nil
}

// Drain runs steps at now until nothing is dispatchable and returns how many
// events it handled.
func (r *Relay) Drain(ctx context.Context, now clock.Tick) (int, error) {
	n := 0
	for {
		_, ok, err := r.Step(ctx, now)
		if err != nil || !ok {
			return n, err
		}
		n++
	}
}
