package queue

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/fairrelay/fairrelay/clock"
)

// Snapshot is every table of the store, read in one read transaction, rows
// in a stable order, ready for encoding/json (golden files are made from
// it). It is a consistent view of this one file only.
//
// A snapshot shows the contract's state of a queue in the layout of
// SnapshotFormat. The columns schema version 2 added are shown only when
// they differ from a default queue's (Policy, OperatorAudit), so that the
// snapshot of a queue with the default policy is the same as before them.
type Snapshot struct {
	// SchemaVersion is the version of the snapshot's layout,
	// SnapshotFormat; the file's schema version is Stats.SchemaVersion.
	SchemaVersion int             `json:"schema_version"`
	ClockMark     clock.Tick      `json:"clock_mark"` // meta.clock_mark
	Ticket        int64           `json:"ticket"`     // meta.ticket: the last ticket handed out
	Flows         []SnapshotFlow  `json:"flows"`      // ordered by flow
	Events        []SnapshotEvent `json:"events"`     // ordered by flow, then seq
	Audit         []AuditEntry    `json:"audit"`      // the redrive audit rows, ordered by id (write order)
	// Policy is the recorded policy when it is not DefaultPolicy; nil
	// otherwise.
	Policy *Policy `json:"policy,omitempty"`
	// OperatorAudit holds the audit rows of the other kinds (AuditPolicy,
	// AuditWeight), ordered by id; nil when there are none.
	OperatorAudit []AuditRecord `json:"operator_audit,omitempty"`
	// Rotation is the rotation's virtual time under FairRotation; nil
	// under FairMinServed.
	Rotation *RotationState `json:"rotation,omitempty"`
	// Failures is the attempt history of every event (docs/contract.md
	// §7.8), ordered by event ID, then generation; nil when no attempt
	// ever failed.
	Failures []SnapshotAttempt `json:"failures,omitempty"`
	// Destinations is every registered destination by name, without
	// secrets (docs/contract.md §7.11); nil when none is.
	Destinations []SnapshotDestination `json:"destinations,omitempty"`
}

// SnapshotAttempt is one row of the attempt history: a failed attempt of
// the event EventID.
type SnapshotAttempt struct {
	EventID string `json:"event_id"`
	Attempt
}

// RotationState is the queue-wide state of FairRotation (docs/fairness.md):
// meta.vnow, meta.vtail and meta.joins.
type RotationState struct {
	VNow  int64 `json:"vnow"`  // the pass of the flow claimed last
	VTail int64 `json:"vtail"` // the largest pass ever assigned
	Joins int64 `json:"joins"` // arrivals so far
}

// SnapshotFormat is the layout version a Snapshot reports in its
// SchemaVersion field: 1, the layout of schema version 1, which schema
// version 2 keeps for every queue with the default policy.
const SnapshotFormat = 1

// SnapshotFlow is one row of the flows table.
type SnapshotFlow struct {
	Flow    string      `json:"flow"`
	LastSeq int64       `json:"last_seq"`
	Served  int64       `json:"served"`
	HeadSeq *int64      `json:"head_seq"` // nil: every event acked
	ReadyAt *clock.Tick `json:"ready_at"` // nil: head quarantined or no head
	// Ready caches ready_at <= the clock mark as of the last claim or head
	// change; it is an index key, not part of the contract.
	Ready bool `json:"ready"`
	// Weight is the flow's weight, shown under FairRotation and whenever
	// it is not 1; 0 (omitted) otherwise.
	Weight int `json:"weight,omitempty"`
	// Pass and Joined are the flow's rotation state (docs/fairness.md),
	// shown under FairRotation only.
	Pass   *int64 `json:"pass,omitempty"`
	Joined *int64 `json:"joined,omitempty"`
	// Paused is the reason of the operator's pause while the flow is
	// paused (docs/contract.md §7.9); "" (omitted) otherwise.
	Paused string `json:"paused,omitempty"`
	// Destination is the flow's destination; "" (omitted) is
	// DefaultDestination.
	Destination string `json:"destination,omitempty"`
}

// SnapshotEvent is one row of the events table.
type SnapshotEvent struct {
	ID               string     `json:"id"`
	Flow             string     `json:"flow"`
	Seq              int64      `json:"seq"`
	Body             Bytes      `json:"body"`
	State            string     `json:"state"`
	Generation       int64      `json:"generation"`
	Attempts         int        `json:"attempts"`
	LifetimeAttempts int        `json:"lifetime_attempts"`
	AvailableAt      clock.Tick `json:"available_at"`
	LeaseUntil       clock.Tick `json:"lease_until"`
	Ticket           int64      `json:"ticket"` // the ticket of the last claim; 0: never claimed
	Reason           string     `json:"reason"`
	EnqueuedAt       clock.Tick `json:"enqueued_at"`
}

// Bytes is a body in a snapshot. It encodes to JSON as a string when the
// bytes are valid UTF-8 (the usual case: bodies are JSON text), so golden
// files stay readable and byte-exact ({"delta": 5} with its space is
// "{\"delta\": 5}"); any other bytes encode as an object {"base64": "…"}
// (standard encoding, with padding). Both forms decode back to the same
// bytes.
type Bytes []byte

// MarshalJSON implements json.Marshaler.
func (b Bytes) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(struct {
		Base64 string `json:"base64"`
	}{base64.StdEncoding.EncodeToString(b)})
}

// UnmarshalJSON implements json.Unmarshaler.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*b = Bytes(s)
		return nil
	}
	var o struct {
		Base64 *string `json:"base64"`
	}
	if err := json.Unmarshal(data, &o); err != nil || o.Base64 == nil {
		return fmt.Errorf("queuestore: body is neither a string nor {\"base64\": …}")
	}
	raw, err := base64.StdEncoding.DecodeString(*o.Base64)
	if err != nil {
		return fmt.Errorf("queuestore: body: %w", err)
	}
	*b = raw
	return nil
}
