package queue

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/fairrelay/fairrelay/clock"
)

// The contract's default policy (docs/contract.md §2.3, §2.4).
const (
	// Lease is how long a claim holds its event: lease_until = now + Lease.
	Lease clock.Tick = 5
	// MaxAttempts is the number of claims in one round of an event.
	MaxAttempts = 3
	// BackoffBase is the backoff after the first failure.
	BackoffBase clock.Tick = 2
	// BackoffCap is the largest backoff.
	BackoffCap clock.Tick = 8
	// MaxPolicyAttempts is the largest MaxAttempts a policy may set.
	MaxPolicyAttempts = 100
)

// Fairness names the order in which a claim picks among ready flows.
type Fairness string

// The fairness orders.
const (
	// FairMinServed picks the flow served least, ties to the smallest flow
	// ID (fairness.MinServed): the default.
	FairMinServed Fairness = "min_served"
	// FairRotation is the opt-in order with bounded waiting and weights
	// (docs/contract.md §7.6).
	FairRotation Fairness = "rotation"
)

// Policy is a queue's lease, attempts, backoff, jitter and fairness
// (docs/contract.md §7.1). It is recorded in the store when the store is
// created.
type Policy struct {
	Lease       clock.Tick // > 0
	MaxAttempts int        // 1..MaxPolicyAttempts
	BackoffBase clock.Tick // > 0
	BackoffCap  clock.Tick // >= BackoffBase
	Jitter      bool       // deterministic full jitter in [0, Backoff(k)] from (event ID, generation, attempt)
	Fairness    Fairness   // "" or FairMinServed (the default) | FairRotation
}

// DefaultPolicy is the contract's default: Lease 5, MaxAttempts 3, backoff
// base 2 and cap 8, no jitter, min-served fairness.
func DefaultPolicy() Policy {
	return Policy{Lease: Lease, MaxAttempts: MaxAttempts, BackoffBase: BackoffBase, BackoffCap: BackoffCap,
		Fairness: FairMinServed}
}

// Validate checks the policy's ranges; the error wraps ErrInvalid.
func (p Policy) Validate() error {
	switch {
	case p.Lease <= 0:
		return fmt.Errorf("%w: policy lease %d, want > 0", ErrInvalid, p.Lease)
	case p.MaxAttempts < 1 || p.MaxAttempts > MaxPolicyAttempts:
		return fmt.Errorf("%w: policy max attempts %d, want 1..%d", ErrInvalid, p.MaxAttempts, MaxPolicyAttempts)
	case p.BackoffBase <= 0:
		return fmt.Errorf("%w: policy backoff base %d, want > 0", ErrInvalid, p.BackoffBase)
	case p.BackoffCap < p.BackoffBase:
		return fmt.Errorf("%w: policy backoff cap %d is below the base %d", ErrInvalid, p.BackoffCap, p.BackoffBase)
	case p.Fairness != "" && p.Fairness != FairMinServed && p.Fairness != FairRotation:
		return fmt.Errorf("%w: policy fairness %q, want %q or %q", ErrInvalid, p.Fairness, FairMinServed, FairRotation)
	}
	return nil
}

// Backoff returns the wait after the k-th failed attempt of a round:
// min(BackoffBase * 2^(k-1), BackoffCap), without overflow for any k. It
// panics for k < 1, a programmer error.
func (p Policy) Backoff(k int) clock.Tick {
	if k < 1 {
		panic(fmt.Sprintf("queue: Backoff(%d): k must be at least 1", k))
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

// Delay is the wait after the attempt-th failed attempt of the event's
// round at generation: Backoff(attempt), or, with Jitter, a value in
// [0, Backoff(attempt)] that depends only on (eventID, generation,
// attempt), so every backend and every test computes the same one.
func (p Policy) Delay(eventID string, generation int64, attempt int) clock.Tick {
	b := p.Backoff(attempt)
	if !p.Jitter {
		return b
	}
	h := fnv.New64a()
	h.Write([]byte(eventID))
	var buf [17]byte
	binary.BigEndian.PutUint64(buf[1:9], uint64(generation))
	binary.BigEndian.PutUint64(buf[9:17], uint64(attempt))
	h.Write(buf[:])
	return clock.Tick(h.Sum64() % uint64(b+1))
}
