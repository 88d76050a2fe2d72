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
	Probes              int64     // probes claimed since the relay was made
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
	other    bool   // a claim of a flow other than flow since the first of them
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
