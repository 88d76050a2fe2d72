// Package demo seeds a realistic queue and receiver for the console's
// browser tests and screenshots: several tenants, events delivered through a
// real receiver, events quarantined for different reasons, a redrive in the
// audit and a conflict at the receiver. Everything goes through the stores'
// public API (queue.Store, receiver.Store: either backend), as a relay
// would.
package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// MaxDelta is the receiver's largest delta: open the receiver given to Seed
// with the backend's WithMaxDelta(MaxDelta) (receiverstore, pgreceiverstore).
const MaxDelta = 500

// Tenants and their flows. A flow's events carry {"delta": N}; the
// receiver's MaxDelta refuses the big ones (unsupported_delta).
var flows = []struct {
	name   string
	events int
	delta  int
	// unavailable fails the first claims of the flow's head with
	// "unavailable" (a receiver that did not answer).
	unavailable bool
}{
	{"acme/orders", 18, 3, false},
	{"acme/invoices", 9, 40, false},
	{"acme/refunds", 4, 900, false}, // over MaxDelta: unsupported_delta
	{"globex/chat-17", 24, 1, false},
	{"globex/chat-18", 12, 1, false},
	{"globex/chat-19", 6, 1, true},     // receiver down: unavailable
	{"initech/billing", 7, 750, false}, // over MaxDelta too
	{"initech/reports", 15, 7, false},
	{"umbrella/sensors", 30, 2, false},
	{"umbrella/alerts", 5, 9, true},
	{"hooli/signup", 11, 4, false},
	{"hooli/search", 8, 6, false},
}

// Seed fills q and r, which must be new (r opened with MaxDelta): a few hundred events over twelve
// flows of five tenants, delivered round by round until every flow is either
// done, stuck in quarantine, or waiting; every failure records an error
// text, as an HTTP relay would; one quarantined event is redriven
// (an audit row) and fails again, the receiver records a conflict, and the
// lease is changed (a policy audit row). It returns the clock mark it
// reached.
func Seed(ctx context.Context, q queue.Store, r receiver.Store) (clock.Tick, error) {
	var es []queue.Event
	for _, f := range flows {
		for i := 1; i <= f.events; i++ {
			es = append(es, queue.Event{
				ID:   fmt.Sprintf("%s-%03d", strings.ReplaceAll(f.name, "/", "-"), i),
				Flow: f.name,
				Body: fmt.Appendf(nil, `{"delta": %d}`, f.delta),
			})
		}
	}
	if _, err := q.EnqueueBatch(ctx, es, 0); err != nil {
		return 0, fmt.Errorf("seed: enqueue: %w", err)
	}
	unavailable := map[string]bool{}
	delta := map[string]int{}
	for _, f := range flows {
		unavailable[f.name] = f.unavailable
		delta[f.name] = f.delta
	}
	now := clock.Tick(1)
	deliver := func(rounds int, claimsPerTick int) error {
		for range rounds {
			cs, err := q.ClaimBatch(ctx, now, claimsPerTick)
			if err != nil {
				return err
			}
			var items []queue.SettleItem
			for _, c := range cs {
				res := queue.Result{OK: true}
				if unavailable[c.Flow] {
					res = queue.Result{Reason: "unavailable", Error: unavailableError(c.Flow, c.Attempts)}
				} else {
					out, err := r.Receive(ctx, receiver.Message{ID: c.EventID, Flow: c.Flow, Seq: c.Seq, Body: c.Body})
					if err != nil {
						return err
					}
					if out != receiver.Accepted && out != receiver.Duplicate {
						res = queue.Result{Reason: string(out), Error: refusalError(out, delta[c.Flow])}
					}
				}
				items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: res})
			}
			if _, err := q.SettleBatch(ctx, items, now); err != nil {
				return err
			}
			now++
		}
		return nil
	}
	// Eight claims a tick among twelve flows: the fair selector shares them.
	if err := deliver(30, 8); err != nil {
		return 0, fmt.Errorf("seed: deliver: %w", err)
	}
	// An operator redrives the stuck refund without fixing anything; it
	// fails three more times (the audit keeps the redrive).
	qs, err := q.Quarantined(ctx)
	if err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	for _, e := range qs {
		if e.Flow == "acme/refunds" {
			if err := q.Redrive(ctx, e.EventID, e.Generation, "retry after the deploy of 14:05 (ticket OPS-1182)", now); err != nil {
				return 0, fmt.Errorf("seed: redrive: %w", err)
			}
		}
	}
	if err := deliver(12, 8); err != nil {
		return 0, fmt.Errorf("seed: deliver: %w", err)
	}
	// A misconfigured second sender reuses an event ID with another body:
	// the receiver records the conflict and refuses it.
	out, err := r.Receive(ctx, receiver.Message{ID: "acme-orders-001", Flow: "acme/orders", Seq: 1, Body: []byte(`{"delta": 300}`)})
	if err != nil {
		return 0, fmt.Errorf("seed: conflict: %w", err)
	}
	if out != receiver.Conflict {
		return 0, errors.New("seed: the reused ID was not a conflict")
	}
	// Late arrivals: new events the relay has not claimed yet.
	var late []queue.Event
	for i := 1; i <= 6; i++ {
		late = append(late, queue.Event{ID: fmt.Sprintf("hooli-search-late-%d", i), Flow: "hooli/search", Body: []byte(`{"delta": 1}`)})
	}
	if _, err := q.EnqueueBatch(ctx, late, now); err != nil {
		return 0, fmt.Errorf("seed: enqueue late: %w", err)
	}
	// The operator lengthens the lease for the slow receiver (a policy row
	// in the audit).
	p, err := q.Policy(ctx)
	if err != nil {
		return 0, fmt.Errorf("seed: policy: %w", err)
	}
	p.Lease = 8
	if err := q.SetPolicy(ctx, p, "longer lease for the slow billing receiver (OPS-1185)", now); err != nil {
		return 0, fmt.Errorf("seed: set policy: %w", err)
	}
	// One more claim leaves an event in flight with a live lease.
	if _, err := q.ClaimBatch(ctx, now, 1); err != nil {
		return 0, fmt.Errorf("seed: claim: %w", err)
	}
	return now, nil
}

// unavailableError is the error text of the attempt-th failed delivery to
// a flow's endpoint that is down, as an HTTP relay records it: the
// connection refused, then a timeout, then the proxy's 503.
func unavailableError(flow string, attempt int) string {
	url := "https://hooks.example.com/" + flow
	switch attempt % 3 {
	case 1:
		return `Post "` + url + `": dial tcp 203.0.113.19:443: connect: connection refused`
	case 2:
		return `Post "` + url + `": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`
	}
	return "503 Service Unavailable: upstream connect error or disconnect/reset before headers"
}

// refusalError is the error text of a receiver's refusal.
func refusalError(out receiver.Outcome, delta int) string {
	if out == receiver.UnsupportedDelta {
		return fmt.Sprintf("422 Unprocessable Entity: delta %d is beyond the receiver's limit of %d", delta, MaxDelta)
	}
	return "the receiver refused the event: " + string(out)
}
