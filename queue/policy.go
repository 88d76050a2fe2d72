package queue

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/fairrelay/fairrelay/clock"
)

// Fairness names the order in which a claim picks flows (docs/contract.md
// §7.1, §7.6).
type Fairness string

const (
	// FairMinServed is the default: the flow served least, ties to the
	// smallest flow ID (fairness.MinServed).
	FairMinServed Fairness = "min_served"
	// FairRotation is the opt-in order with bounded waiting and weights
	// (docs/contract.md §7.6): stride scheduling in integer virtual time,
	// new flows joining at the tail (fairness.Rotation is its model). Both
	// backends implement it; a backend that does not must refuse it with
	// ErrInvalid.
	FairRotation Fairness = "rotation"
)

// Policy is a queue's policy (docs/contract.md §7.1): how long a claim
// holds its event, how many claims a round has, the backoff after a failed
// attempt, whether that backoff is jittered, and the claim's flow order.
// It is recorded in the file when the file is created (WithPolicy, or
// DefaultPolicy) and every process that opens the file uses it; SetPolicy
// changes it, with an audit row.
type Policy struct {
	Lease       clock.Tick `json:"lease"`        // how long a claim holds its event: lease_until = now + Lease; > 0
	MaxAttempts int        `json:"max_attempts"` // claims in one round of an event: 1..MaxPolicyAttempts
	BackoffBase clock.Tick `json:"backoff_base"` // the backoff after the first failed attempt; > 0
	BackoffCap  clock.Tick `json:"backoff_cap"`  // the largest backoff; >= BackoffBase
	// Jitter makes the wait after a failure a deterministic "full jitter"
	// value in [0, Backoff(k)] instead of Backoff(k): see Delay.
	Jitter bool `json:"jitter"`
	// Fairness is the claim's flow order; "" means FairMinServed.
	Fairness Fairness `json:"fairness"`
}

// MaxPolicyAttempts is the largest MaxAttempts a policy may have.
const MaxPolicyAttempts = 100

// DefaultPolicy returns the contract's default policy: Lease 5, MaxAttempts
// 3, BackoffBase 2, BackoffCap 8, no jitter, FairMinServed. The constants
// Lease, MaxAttempts, BackoffBase and BackoffCap are its values.
func DefaultPolicy() Policy {
	return Policy{Lease: Lease, MaxAttempts: MaxAttempts, BackoffBase: BackoffBase, BackoffCap: BackoffCap, Fairness: FairMinServed}
}

// Normal returns p with an empty Fairness read as FairMinServed.
func (p Policy) Normal() Policy {
	if p.Fairness == "" {
		p.Fairness = FairMinServed
	}
	return p
}

// Validate checks p against the limits in Policy's field comments. A bad
// policy is ErrInvalid.
func (p Policy) Validate() error {
	switch {
	case p.Lease <= 0:
		return fmt.Errorf("%w: policy Lease is %d, want > 0", ErrInvalid, p.Lease)
	case p.MaxAttempts < 1 || p.MaxAttempts > MaxPolicyAttempts:
		return fmt.Errorf("%w: policy MaxAttempts is %d, want 1..%d", ErrInvalid, p.MaxAttempts, MaxPolicyAttempts)
	case p.BackoffBase <= 0:
		return fmt.Errorf("%w: policy BackoffBase is %d, want > 0", ErrInvalid, p.BackoffBase)
	case p.BackoffCap < p.BackoffBase:
		return fmt.Errorf("%w: policy BackoffCap is %d, want >= BackoffBase %d", ErrInvalid, p.BackoffCap, p.BackoffBase)
	}
	switch p.Fairness {
	case "", FairMinServed, FairRotation:
	default:
		return fmt.Errorf("%w: policy Fairness is %q, want %q or %q", ErrInvalid, p.Fairness, FairMinServed, FairRotation)
	}
	return nil
}

// Backoff returns the wait after the k-th failed attempt of a round:
// min(BackoffBase * 2^(k-1), BackoffCap), computed without overflow. It
// panics for k < 1, a programmer error.
func (p Policy) Backoff(k int) clock.Tick {
	if k < 1 {
		panic(fmt.Sprintf("queuestore: Policy.Backoff(%d): k must be at least 1", k))
	}
	d := p.BackoffBase
	for i := 1; i < k && d < p.BackoffCap; i++ {
		if d > p.BackoffCap/2 {
			return p.BackoffCap
		}
		d *= 2
	}
	return min(d, p.BackoffCap)
}

// Delay returns the wait before the event may be claimed again after its
// attempt-th claim of the round failed; the claim was made at generation.
// Without Jitter it is Backoff(attempt). With Jitter it is "full jitter",
// deterministic so that a test, or another backend, computes the same value:
//
//	h     = FNV-1a 64-bit hash of: the event ID's bytes, one 0x00 byte,
//	        generation as 8 bytes big-endian (two's complement),
//	        attempt as 8 bytes big-endian
//	Delay = h mod (Backoff(attempt) + 1)     (unsigned arithmetic)
//
// so Delay is in [0, Backoff(attempt)]. This formula is part of the contract
// (docs/contract.md §7.1).
func (p Policy) Delay(eventID string, generation int64, attempt int) clock.Tick {
	b := p.Backoff(attempt)
	if !p.Jitter {
		return b
	}
	return clock.Tick(jitterHash(eventID, generation, attempt) % (uint64(b) + 1))
}

// jitterHash is the hash Delay documents.
func jitterHash(eventID string, generation int64, attempt int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(eventID))
	var buf [17]byte
	binary.BigEndian.PutUint64(buf[1:9], uint64(generation))
	binary.BigEndian.PutUint64(buf[9:17], uint64(int64(attempt)))
	h.Write(buf[:])
	return h.Sum64()
}

// span is the longest time a write may add to its tick: a lease or a
// backoff.
func (p Policy) span() clock.Tick { return max(p.Lease, p.BackoffCap) }

// CheckTick refuses a tick that is negative (ErrTickOverflow, also
// ErrTimeRegression: it is below every mark) or that a lease or backoff
// would push past math.MaxInt64 (ErrTickOverflow): the largest accepted
// tick is math.MaxInt64 - max(Lease, BackoffCap).
func (p Policy) CheckTick(now clock.Tick) error {
	if now < 0 {
		// Below every clock mark too: without real time this was, and
		// stays, ErrTimeRegression (docs/contract.md §2.6).
		return fmt.Errorf("%w: %w: %w: tick %d is negative", ErrTickOverflow, ErrTimeRegression, clock.ErrRegression, now)
	}
	if now > clock.Tick(math.MaxInt64)-p.span() {
		return fmt.Errorf("%w: tick %d + %d (the policy's longest lease or backoff) overflows", ErrTickOverflow, now, p.span())
	}
	return nil
}

// MaxTick returns the largest tick a write accepts under p:
// math.MaxInt64 - max(Lease, BackoffCap). Larger ticks, and negative ones,
// are ErrTickOverflow.
func (p Policy) MaxTick() clock.Tick { return clock.Tick(math.MaxInt64) - p.span() }

// PolicyChange is the detail of a 'policy' audit row: the policy before and
// after SetPolicy, as JSON.
type PolicyChange struct {
	Old Policy `json:"old"`
	New Policy `json:"new"`
}
