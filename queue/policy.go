package queue

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

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
	// Schedule, when not empty, is an explicit list of waits
	// (docs/contract.md §7.8): the wait after the k-th failed attempt of a
	// round is Schedule[k-1] instead of the BackoffBase·2^(k-1) formula, and
	// MaxAttempts must be len(Schedule)+1 (WithSchedule sets it). Each wait
	// is >= 1; at most MaxPolicyAttempts-1 of them. BackoffBase and
	// BackoffCap stay recorded and valid but are not used. Omitted from JSON
	// when empty, so a policy without one writes the bytes it always did.
	Schedule []clock.Tick `json:"schedule,omitempty"`
	// RetryAfterCap caps the wait a failure asks for with
	// Result.RetryAfter (docs/contract.md §7.8); 0 means the policy's
	// longest wait (LongestWait). >= 0.
	RetryAfterCap clock.Tick `json:"retry_after_cap,omitempty"`
	// Retention is the window after which acked events and audit rows may
	// be deleted by Prune (docs/contract.md §7.9); 0 (the default) keeps
	// everything forever. >= 0.
	Retention clock.Tick `json:"retention,omitempty"`
}

// WithSchedule returns p with the explicit list of waits and MaxAttempts
// set to len(waits)+1 (docs/contract.md §7.8). An empty list returns p with
// no schedule and MaxAttempts unchanged.
func (p Policy) WithSchedule(waits ...clock.Tick) Policy {
	if len(waits) == 0 {
		p.Schedule = nil
		return p
	}
	p.Schedule = append([]clock.Tick(nil), waits...)
	p.MaxAttempts = len(waits) + 1
	return p
}

// LongestWait is the longest wait after a failed attempt the policy can
// give without a retry-after: the largest Schedule entry, or BackoffCap
// without a schedule.
func (p Policy) LongestWait() clock.Tick {
	if len(p.Schedule) == 0 {
		return p.BackoffCap
	}
	return slices.Max(p.Schedule)
}

// RetryAfterLimit is the longest wait a failure's RetryAfter may ask for:
// RetryAfterCap, or LongestWait when RetryAfterCap is 0.
func (p Policy) RetryAfterLimit() clock.Tick {
	if p.RetryAfterCap > 0 {
		return p.RetryAfterCap
	}
	return p.LongestWait()
}

// Equal reports whether p and o are the same policy (Schedule compared
// element by element; a nil and an empty Schedule are equal).
func (p Policy) Equal(o Policy) bool {
	p, o = p.Normal(), o.Normal()
	return p.Lease == o.Lease && p.MaxAttempts == o.MaxAttempts &&
		p.BackoffBase == o.BackoffBase && p.BackoffCap == o.BackoffCap &&
		p.Jitter == o.Jitter && p.Fairness == o.Fairness &&
		slices.Equal(p.Schedule, o.Schedule) && p.RetryAfterCap == o.RetryAfterCap &&
		p.Retention == o.Retention
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
	if len(p.Schedule) > 0 {
		if len(p.Schedule) > MaxPolicyAttempts-1 {
			return fmt.Errorf("%w: policy Schedule has %d waits, want at most %d", ErrInvalid, len(p.Schedule), MaxPolicyAttempts-1)
		}
		for i, w := range p.Schedule {
			if w < 1 {
				return fmt.Errorf("%w: policy Schedule wait %d is %d, want >= 1", ErrInvalid, i+1, w)
			}
		}
		if p.MaxAttempts != len(p.Schedule)+1 {
			return fmt.Errorf("%w: policy MaxAttempts is %d with a Schedule of %d waits, want %d (the waits plus one)", ErrInvalid, p.MaxAttempts, len(p.Schedule), len(p.Schedule)+1)
		}
	}
	if p.RetryAfterCap < 0 {
		return fmt.Errorf("%w: policy RetryAfterCap is %d, want >= 0", ErrInvalid, p.RetryAfterCap)
	}
	if p.Retention < 0 {
		return fmt.Errorf("%w: policy Retention is %d, want >= 0", ErrInvalid, p.Retention)
	}
	switch p.Fairness {
	case "", FairMinServed, FairRotation:
	default:
		return fmt.Errorf("%w: policy Fairness is %q, want %q or %q", ErrInvalid, p.Fairness, FairMinServed, FairRotation)
	}
	return nil
}

// Backoff returns the wait after the k-th failed attempt of a round:
// Schedule[k-1] with a schedule (its last wait for k past its end), and
// otherwise min(BackoffBase * 2^(k-1), BackoffCap), computed without
// overflow. It panics for k < 1, a programmer error.
func (p Policy) Backoff(k int) clock.Tick {
	if k < 1 {
		panic(fmt.Sprintf("queuestore: Policy.Backoff(%d): k must be at least 1", k))
	}
	if n := len(p.Schedule); n > 0 {
		return p.Schedule[min(k, n)-1]
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

// RetryDelay is the wait a failure of the attempt-th claim of a round
// (made at generation) sets before the event may be claimed again, given
// the failure's retryAfter (0: none): max(Delay, min(retryAfter,
// RetryAfterLimit)) (docs/contract.md §7.8).
func (p Policy) RetryDelay(eventID string, generation int64, attempt int, retryAfter clock.Tick) clock.Tick {
	d := p.Delay(eventID, generation, attempt)
	if retryAfter > 0 {
		d = max(d, min(retryAfter, p.RetryAfterLimit()))
	}
	return d
}

// span is the longest time a write may add to its tick: a lease, a
// backoff or a retry-after.
func (p Policy) span() clock.Tick {
	return max(p.Lease, p.BackoffCap, p.LongestWait(), p.RetryAfterLimit())
}

// CheckTick refuses a tick that is negative (ErrTickOverflow, also
// ErrTimeRegression: it is below every mark) or that a lease or backoff
// would push past math.MaxInt64 (ErrTickOverflow): the largest accepted
// tick is MaxTick.
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
// math.MaxInt64 - max(Lease, BackoffCap, LongestWait, RetryAfterLimit).
// Larger ticks, and negative ones, are ErrTickOverflow.
func (p Policy) MaxTick() clock.Tick { return clock.Tick(math.MaxInt64) - p.span() }

// PolicyChange is the detail of a 'policy' audit row: the policy before and
// after SetPolicy, as JSON.
type PolicyChange struct {
	Old Policy `json:"old"`
	New Policy `json:"new"`
}
