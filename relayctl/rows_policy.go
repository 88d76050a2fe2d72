package main

import (
	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// policyRow is a queue's policy as `policy` shows it (docs/contract.md §7.1,
// §7.8). Ticks are the queue's own: Unix milliseconds for a queue in real
// time.
type policyRow struct {
	Lease       int64  `json:"lease"`
	MaxAttempts int    `json:"max_attempts"`
	BackoffBase int64  `json:"backoff_base"`
	BackoffCap  int64  `json:"backoff_cap"`
	Jitter      bool   `json:"jitter"`
	Fairness    string `json:"fairness"` // the claim's flow order: min_served or rotation
	// Schedule is the explicit list of waits after each failed attempt of
	// a round ([] without one: the base doubling up to the cap);
	// MaxAttempts is then its length plus one.
	Schedule []int64 `json:"schedule"`
	// RetryAfterCap caps the wait a failure's retry-after may ask for; 0
	// means the policy's longest wait.
	RetryAfterCap int64 `json:"retry_after_cap"`
	// Retention is the window after which acked events and audit rows may
	// be pruned (docs/contract.md §7.9); 0 keeps everything forever.
	Retention int64 `json:"retention"`
}

// policy is p as the queue's type, for its derived values.
func (p policyRow) policy() queue.Policy {
	qp := queue.Policy{
		Lease: clock.Tick(p.Lease), MaxAttempts: p.MaxAttempts,
		BackoffBase: clock.Tick(p.BackoffBase), BackoffCap: clock.Tick(p.BackoffCap),
		Jitter: p.Jitter, Fairness: queue.Fairness(p.Fairness), RetryAfterCap: clock.Tick(p.RetryAfterCap),
		Retention: clock.Tick(p.Retention),
	}
	for _, w := range p.Schedule {
		qp.Schedule = append(qp.Schedule, clock.Tick(w))
	}
	return qp
}

// waits are the waits after failures 1 .. MaxAttempts-1 of a round, before
// jitter (queue.Policy.Backoff).
func (p policyRow) waits() []int64 {
	qp := p.policy()
	var out []int64
	for k := 1; k < p.MaxAttempts; k++ {
		out = append(out, int64(qp.Backoff(k)))
	}
	return out
}

// policyFullRow is what `policy --json` prints: the recorded policy and
// what it implies.
type policyFullRow struct {
	policyRow
	// RetryAfterLimit is the longest wait a retry-after may ask for:
	// RetryAfterCap, or the longest wait when it is 0.
	RetryAfterLimit int64 `json:"retry_after_limit"`
	// RetryWaits are the waits after failures 1 .. max_attempts-1 of a
	// round, before jitter ([] when one failure quarantines).
	RetryWaits []int64 `json:"retry_waits"`
	// Clock says how to read the ticks: "wall" (Unix milliseconds: the
	// spans are milliseconds) or "logical" (tick counts).
	Clock string `json:"clock"`
}

// full is p with what it implies, for --json; wall says the queue runs in
// real time.
func (p policyRow) full(wall bool) policyFullRow {
	r := policyFullRow{policyRow: p, RetryAfterLimit: int64(p.policy().RetryAfterLimit()),
		RetryWaits: nonNil(p.waits()), Clock: "logical"}
	r.Schedule = nonNil(r.Schedule)
	if wall {
		r.Clock = "wall"
	}
	return r
}

// redriveFilter selects quarantined events for `redrive --all`: "" matches
// any flow or reason.
type redriveFilter struct {
	Flow, Reason string
}

// redrivenRow is one event `redrive --all` redrove.
type redrivenRow struct {
	ID         string `json:"id"`
	Flow       string `json:"flow"`
	Seq        int64  `json:"seq"`
	Generation int64  `json:"generation"` // the generation the redrive gave it
}

// policyChangeRow is the old and new policy of a policy audit row.
type policyChangeRow struct {
	Old policyRow `json:"old"`
	New policyRow `json:"new"`
}
