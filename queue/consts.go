package queue

import (
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
)

// The contract's constants (docs/contract.md §2.3, §2.4): the default
// policy's values (DefaultPolicy). A store uses the policy recorded in it,
// which may differ.
const (
	// Lease is how long a claim holds its event: lease_until = now + Lease.
	Lease clock.Tick = 5
	// MaxAttempts is the number of claims in one round of an event.
	MaxAttempts = 3
	// BackoffBase is the backoff after the first failure.
	BackoffBase clock.Tick = 2
	// BackoffCap is the largest backoff.
	BackoffCap clock.Tick = 8
)

// Backoff returns the default policy's wait after the k-th failed attempt
// of a round: min(BackoffBase * 2^(k-1), BackoffCap); 2, 4, 8, 8, … It
// panics for k < 1, a programmer error. DefaultPolicy().Backoff(k) is the
// same.
func Backoff(k int) clock.Tick {
	if k < 1 {
		panic(fmt.Sprintf("queuestore: Backoff(%d): k must be at least 1", k))
	}
	return DefaultPolicy().Backoff(k)
}

// RedriveChunk is the number of events RedriveAll redrives per transaction:
// large enough that the chunk's commit is a small part of its cost, small
// enough that it holds the single write turn for tens of milliseconds only.
const RedriveChunk = 1000
