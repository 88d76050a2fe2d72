package relay

import (
	"sync"
	"time"
)

// Defaults of the zero BreakerOptions.
const (
	DefaultBreakerThreshold = 5
	DefaultMinProbe         = time.Second
	DefaultMaxProbe         = time.Minute
)

// Breaker states (BreakerState.State and the fairrelay_breaker_state gauge:
// 0, 1, 2).
const (
	BreakerClosed  = "closed"  // claiming as usual
	BreakerOpen    = "open"    // the destination is down: no claims until the next probe
	BreakerProbing = "probing" // one probe (a claim of one event) is in flight
)

// BreakerOptions tune the relay's breaker (docs/contract.md §7.8,
// docs/runtime.md "The breaker"). The zero value of every field means its
// default.
type BreakerOptions struct {
	// Threshold is the number of consecutive destination failures
	// (Failure.Destination) that opens the breaker (default 5). They must
	// come from at least two flows, unless every claim since the first of
	// them was of one flow (a queue with one active flow). A success or an
	// event failure (the destination answered) resets the count.
	Threshold int
	// MinProbe is the wait before the first probe after the breaker opens
	// (default 1 s); each probe that fails with a destination failure
	// doubles it, up to MaxProbe (default 1 min). A failure's RetryAfter,
	// when given, sets the next probe's wait instead, capped by MaxProbe.
	MinProbe time.Duration
	MaxProbe time.Duration
}

// BreakerState is a snapshot of the relay's breaker ((*Relay).Breaker).
type BreakerState struct {
	State               string    // BreakerClosed, BreakerOpen or BreakerProbing
	Since               time.Time // when it entered State (zero: closed since the start)
	ConsecutiveFailures int       // destination failures since the last success or event failure
	NextProbe           time.Time // open: when the next probe is claimed; zero otherwise
	LastReason          string    // the reason of the last destination failure ("" when none yet)
	LastError           string    // its error text (user info in URLs redacted)
	Opens               int64     // times it opened since the relay was made
	Probes              int64     // probes that claimed an event since the relay was made
}

// breaker is the loop's breaker. The loop's goroutine alone changes it;
// every change is published under mu for Breaker.
type breaker struct {
	o BreakerOptions

	state    string
	since    time.Time
	failures int    // consecutive destination failures
	flow     string // the flow of the first of them
	twoFlows bool   // they came from at least two flows
	other    bool   // a claim of a flow other than flow held since the first of them
	interval time.Duration
	next     time.Time // open: when to probe
	probe    *claim    // probing: the probe
	reason   string
	errText  string
	opens    int64
	probes   int64

	mu  sync.Mutex
	pub BreakerState
}

func newBreaker(o BreakerOptions) *breaker {
	b := &breaker{o: o, state: BreakerClosed}
	b.pub = BreakerState{State: BreakerClosed}
	return b
}

// publish copies the state for Breaker.
func (b *breaker) publish() {
	s := BreakerState{State: b.state, Since: b.since, ConsecutiveFailures: b.failures, NextProbe: b.next,
		LastReason: b.reason, LastError: b.errText, Opens: b.opens, Probes: b.probes}
	if b.state != BreakerOpen {
		s.NextProbe = time.Time{}
	}
	b.mu.Lock()
	b.pub = s
	b.mu.Unlock()
}

// snapshot returns the last published state.
func (b *breaker) snapshot() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pub
}

// Breaker returns the state of the relay's breaker. It is safe to call at
// any time, from any goroutine.
func (r *Relay) Breaker() BreakerState {
	return r.br.snapshot()
}

// isProbe reports whether cl is the breaker's probe in flight.
func (b *breaker) isProbe(cl *claim) bool {
	return b.probe != nil && b.probe == cl
}

// probeDue reports that the breaker is open and its next probe's time has
// come.
func (b *breaker) probeDue(now time.Time) bool {
	return b.state == BreakerOpen && !now.Before(b.next)
}

// claimed notes the claims of a call: a claim of another flow than the
// first failure's, while failures are counted, lets the count open the
// breaker only once it spans two flows. Nothing is done while the count
// is 0 (the success path).
func (b *breaker) claimed(cs []*claim) {
	if b.failures == 0 || b.other {
		return
	}
	for _, cl := range cs {
		if cl.c.Flow != b.flow {
			b.other = true
			return
		}
	}
}

// startProbe moves an open breaker to probing, for a claim of one event.
func (b *breaker) startProbe(now time.Time) {
	b.state, b.since = BreakerProbing, now
	b.publish()
}

// probeClaimed takes the probe's claim (nil: the queue had nothing due, so
// the breaker waits one more interval, not doubled). Only a probe that
// claimed an event is counted (Probes): it is an attempt charged while the
// breaker is open; one that claimed nothing charged nothing.
func (b *breaker) probeClaimed(cl *claim, now time.Time) {
	if cl != nil {
		b.probe = cl
		b.probes++
		b.publish()
		return
	}
	b.reopen(now, b.interval)
}

// probeLost ends a probe that brought no answer from the destination (its
// lease was lost, its handler panicked or returned an error that is not a
// Failure, the claim call failed): the breaker waits one more interval.
func (b *breaker) probeLost(now time.Time) {
	if b.state != BreakerProbing {
		return
	}
	b.probe = nil
	b.reopen(now, b.interval)
}

// reopen returns a probing breaker to open, the next probe wait later.
func (b *breaker) reopen(now time.Time, wait time.Duration) {
	b.state, b.since = BreakerOpen, now
	b.next = now.Add(wait)
	b.publish()
}

// answered notes that the destination answered cl (a success or an event
// failure): the count starts over, and a probing breaker whose probe cl is
// closes. While the breaker is open, only the probe's answer counts: the
// answer of a delivery that began before the breaker opened says nothing of
// the destination now (closing on it would let a full wave of claims meet
// a destination that is still down). It reports whether it closed.
func (b *breaker) answered(cl *claim, now time.Time) bool {
	if b.failures == 0 && b.state == BreakerClosed {
		return false
	}
	if b.state != BreakerClosed && !b.isProbe(cl) {
		return false
	}
	b.failures, b.twoFlows, b.other = 0, false, false
	if b.state == BreakerClosed {
		b.publish()
		return false
	}
	b.state, b.since, b.probe, b.next, b.interval = BreakerClosed, now, nil, time.Time{}, 0
	b.publish()
	return true
}

// failed counts a destination failure of cl; others says that claims of
// other flows are held (running or parked) as it is counted. It reports
// "opened" when the breaker opened, "probe" when it was the probe's
// failure (the breaker stays open, the interval doubled or set by
// RetryAfter), "" otherwise.
func (b *breaker) failed(cl *claim, f *Failure, text string, others bool, now time.Time) string {
	if b.failures == 0 {
		b.flow, b.twoFlows, b.other = cl.c.Flow, false, false
	} else if cl.c.Flow != b.flow {
		b.twoFlows = true
	}
	b.failures++
	b.other = b.other || others
	b.reason, b.errText = f.Reason, text
	switch {
	case b.state == BreakerClosed && b.failures >= b.o.Threshold && (b.twoFlows || !b.other):
		b.opens++
		b.interval = b.o.MinProbe
		b.state, b.since = BreakerOpen, now
		b.next = now.Add(b.wait(f))
		b.publish()
		return "opened"
	case b.isProbe(cl):
		b.probe = nil
		b.interval = min(2*b.interval, b.o.MaxProbe)
		b.reopen(now, b.wait(f))
		return "probe"
	}
	b.publish()
	return ""
}

// wait is the wait before the next probe after f: its RetryAfter when it
// has one, else the interval; capped by MaxProbe.
func (b *breaker) wait(f *Failure) time.Duration {
	if f.RetryAfter > 0 {
		return min(f.RetryAfter, b.o.MaxProbe)
	}
	return b.interval
}
