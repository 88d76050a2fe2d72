package main

// policyRow is a queue's policy as `policy` shows it (docs/contract.md §7.1).
// Ticks are the queue's own: Unix milliseconds for a queue in real time.
type policyRow struct {
	Lease       int64  `json:"lease"`
	MaxAttempts int    `json:"max_attempts"`
	BackoffBase int64  `json:"backoff_base"`
	BackoffCap  int64  `json:"backoff_cap"`
	Jitter      bool   `json:"jitter"`
	Fairness    string `json:"fairness"` // the claim's flow order: min_served or rotation
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
