package main

import (
	"encoding/json"
	"unicode/utf8"
)

// The rows below are relayctl's output format: what --json prints and what
// the tables show. Field names are snake_case and stable.

// statsRow is the queue half of `status`.
type statsRow struct {
	ClockMark     int64       `json:"clock_mark"`
	GlobalTicket  int64       `json:"global_ticket"`
	Flows         int64       `json:"flows"`
	EventsByState eventCounts `json:"events_by_state"`
	Quarantined   int64       `json:"quarantined"`
	// PausedFlows counts the flows an operator has paused
	// (docs/contract.md §7.9).
	PausedFlows int64 `json:"paused_flows"`
}

// eventCounts counts events by state.
type eventCounts struct {
	Pending     int64 `json:"pending"`
	Inflight    int64 `json:"inflight"`
	Acked       int64 `json:"acked"`
	Quarantined int64 `json:"quarantined"`
}

// flowRow is one line of `flows`.
type flowRow struct {
	Flow      string `json:"flow"`
	Served    int64  `json:"served"`
	HeadSeq   int64  `json:"head_seq"`   // 0 when every event is acked
	HeadState string `json:"head_state"` // "" when every event is acked
	// ReadyTick is the tick from which the head can be claimed: its
	// available_at when pending, its lease end when in flight; null when the
	// head is quarantined, its flow paused, or there is no head.
	ReadyTick *int64 `json:"ready_tick"`
	Backlog   int64  `json:"backlog"` // events not yet acked, head included
	// Blocked says why the head holds the flow back at the clock mark
	// (docs/contract.md §2.2): "paused" (an operator paused the flow,
	// docs/contract.md §7.9), "quarantined", "inflight" (a live lease) or
	// "backoff" (pending, not yet available: a backoff or a scheduled
	// event); "" when it does not.
	Blocked string `json:"blocked"`
	// Paused is set while the flow is paused; PauseReason is the reason
	// the pause gave. Both are omitted for a flow that is not paused.
	Paused      bool   `json:"paused,omitempty"`
	PauseReason string `json:"pause_reason,omitempty"`
	// Weight is the flow's weight (docs/contract.md §7.6), shown under the
	// rotation policy, or under min_served when it is not 1; omitted
	// otherwise.
	Weight int `json:"weight,omitempty"`
	// Position is the flow's place in the rotation under the rotation
	// policy (1: next if every head were dispatchable now); omitted for a
	// flow without backlog and under min_served.
	Position int64 `json:"position,omitempty"`
	// Destination is the registered destination the flow delivers to
	// (docs/contract.md §7.11); omitted for the default one (the relay's
	// own --to URL).
	Destination string `json:"destination,omitempty"`
}

// eventRow is one event as `events`, `quarantined` and `redrive` show it.
type eventRow struct {
	ID               string `json:"id"`
	Flow             string `json:"flow"`
	Seq              int64  `json:"seq"`
	State            string `json:"state"`
	Generation       int64  `json:"generation"`
	Attempts         int    `json:"attempts"`
	LifetimeAttempts int    `json:"lifetime_attempts"`
	AvailableAt      int64  `json:"available_at"`
	LeaseUntil       int64  `json:"lease_until"`
	Reason           string `json:"reason"`
	// AckedAt is the tick of the settle that acked the event (retention
	// counts from it, docs/contract.md §7.9); omitted unless acked.
	AckedAt int64 `json:"acked_at,omitempty"`
	// Error is the error text of the failure at the event's current
	// generation (docs/contract.md §7.8), in full; "" when there is none.
	Error string `json:"error"`
	Body  body   `json:"body"`
}

// eventDetailRow is one event as `event ID` shows it: the event and the
// history of its failed attempts (the latest queue.MaxHistory, oldest
// first; [] when it never failed).
type eventDetailRow struct {
	eventRow
	History []attemptRow `json:"history"`
}

// attemptRow is one failed attempt of an event's history
// (docs/contract.md §7.8): when it was recorded, the claim's generation and
// attempt number in its round, what the failure did (retry_scheduled or
// quarantined), its reason and its error text.
type attemptRow struct {
	At         int64  `json:"at"`
	Generation int64  `json:"generation"`
	Attempt    int    `json:"attempt"`
	Outcome    string `json:"outcome"`
	Reason     string `json:"reason"`
	Error      string `json:"error"`
}

// body prints an event body as a JSON string when it is UTF-8 text and as
// {"base64": "..."} otherwise, so that no byte is lost.
type body []byte

// MarshalJSON implements json.Marshaler.
func (b body) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(struct {
		Base64 []byte `json:"base64"`
	}{b})
}

// UnmarshalJSON implements json.Unmarshaler (the tests read --json back).
func (b *body) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*b = body(s)
		return nil
	}
	var v struct {
		Base64 []byte `json:"base64"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*b = v.Base64
	return nil
}

// quarantinedRow is one line of `quarantined`: what to redrive (ID and
// generation) and why the event stopped.
type quarantinedRow struct {
	ID               string `json:"id"`
	Flow             string `json:"flow"`
	Seq              int64  `json:"seq"`
	Generation       int64  `json:"generation"`
	LifetimeAttempts int    `json:"lifetime_attempts"`
	Reason           string `json:"reason"`
	// Error is the error text of the failure that quarantined the event,
	// in full; "" when it gave none.
	Error string `json:"error"`
}

// auditRow is one row of the audit: a redrive (kind "redrive", with the
// event and the generation the redrive gave it), a policy change (kind
// "policy", with the old and new policy) or another operator action.
type auditRow struct {
	Kind       string `json:"kind"`
	EventID    string `json:"event_id"`
	Generation int64  `json:"generation"` // the generation the redrive gave the event
	Reason     string `json:"reason"`
	Tick       int64  `json:"tick"`
	// Change says in words what a row other than a redrive changed
	// ("lease 5 -> 30"); Policy is a policy change's old and new policy.
	Change string           `json:"change,omitempty"`
	Policy *policyChangeRow `json:"policy,omitempty"`
}

// newEvent is one event to enqueue.
type newEvent struct {
	ID, Flow string
	Body     []byte
	// NotBefore schedules the event (docs/contract.md §7.9): 0 is at once.
	NotBefore int64
	// To names the destination of the event's flow (docs/contract.md
	// §7.11): enqueue --to, a line's "to"; "" is the flow's own (or the
	// default for a new flow).
	To string
}

// enqueuedRow is the result of enqueueing one event.
type enqueuedRow struct {
	ID        string `json:"id"`
	Flow      string `json:"flow"`
	Seq       int64  `json:"seq"`
	Duplicate bool   `json:"duplicate"`
}

// totalRow is one flow of `receiver totals`.
type totalRow struct {
	Flow    string `json:"flow"`
	Total   int64  `json:"total"`
	NextSeq int64  `json:"next_seq"` // the next sequence number the receiver expects
}

// conflictRow is one recorded conflict of `receiver conflicts`: the message
// and the rule it broke (id_reused and seq_taken name the receipt it clashed
// with; seq_behind the next sequence number the flow expected).
type conflictRow struct {
	ID           string `json:"id"`
	Flow         string `json:"flow"`
	Seq          int64  `json:"seq"`
	Body         body   `json:"body"`
	Rule         string `json:"rule"`
	WithID       string `json:"with_id,omitempty"`
	WithFlow     string `json:"with_flow,omitempty"`
	WithSeq      int64  `json:"with_seq,omitempty"`
	NextExpected int64  `json:"next_expected,omitempty"`
}
