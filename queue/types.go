package queue

import "github.com/fairrelay/fairrelay/clock"

// Event is what a producer enqueues: an ID unique in the store, the flow it
// belongs to, and an opaque body.
type Event struct {
	ID, Flow string // 1..MaxNameLen bytes of printable UTF-8 each
	Body     []byte // 1..MaxBodyLen bytes
	// Weight is the flow's weight (docs/contract.md §7.6): 0 keeps the
	// flow's weight (1 for a new flow); MinWeight..MaxWeight sets it, on a
	// backend that keeps weights. Anything else is ErrInvalid.
	Weight int
	// NotBefore schedules the event (docs/contract.md §7.9): when it is
	// above the enqueue's tick, the event is stored with available_at =
	// NotBefore, so as its flow's head it is not dispatchable before that
	// tick and blocks only its own flow, as a backoff does; 0 (or a tick at
	// or below the enqueue's) means at once. Like Weight it is not part of
	// the event's identity: a retry with another NotBefore is a Duplicate
	// and changes nothing. Negative is ErrInvalid; a tick the policy's
	// lease would push past math.MaxInt64 is ErrTickOverflow.
	NotBefore clock.Tick
	// Destination names the registered destination the event's flow
	// delivers to (docs/contract.md §7.11). It is recorded with the flow's
	// first event; "" (DefaultDestination) on that event keeps the
	// default, and "" on a later event means the flow's own. A later event
	// naming another destination than the flow's is ErrDestinationMismatch,
	// an unregistered name ErrUnknownDestination. Like Weight it is not part
	// of the event's identity.
	Destination string
}

// Enqueued is the result of an enqueue: the event's sequence number in its
// flow, and whether the event was already stored (a byte-identical retry).
type Enqueued struct {
	Seq       int64 // the event's sequence number in its flow
	Duplicate bool  // the event was already stored: nothing was added
}

// Claim is one event handed to a sender: the event, the generation the
// settle must quote, the round's attempts so far, the global ticket of this
// claim and the end of its lease.
type Claim struct {
	EventID, Flow string     // the event and its flow
	Seq           int64      // the event's sequence number in its flow
	Body          []byte     // the event's body, byte-exact
	Generation    int64      // the generation Settle must quote
	Attempts      int        // attempts used in this round, this claim included
	Ticket        int64      // the global ticket of this claim (the first claim gets 1)
	LeaseUntil    clock.Tick // now + Lease; a settle at or after it is Expired
	// Destination is the flow's destination when it was claimed
	// (docs/contract.md §7.11); "" is DefaultDestination.
	Destination string
}

// Event states, as stored and as EventState.State reports them.
const (
	StatePending     = "pending"
	StateInflight    = "inflight"
	StateAcked       = "acked"
	StateQuarantined = "quarantined"
)

// ReasonLeaseExpired is the reason a claim records when it quarantines an
// event whose last attempt of the round let its lease expire.
const ReasonLeaseExpired = "lease_expired"

// ReasonEnqueueWeight is the reason of the 'weight' audit row an enqueue
// writes when its Event.Weight changes the weight of an existing flow.
const ReasonEnqueueWeight = "enqueue"

// WeightChange is the detail of a 'weight' audit row, as JSON: every backend
// writes these fields, names and order, so they all write the same bytes.
type WeightChange struct {
	Flow string `json:"flow"`
	Old  int    `json:"old"`
	New  int    `json:"new"`
}

// Result is what the sender reports for a claim: success, or failure with a
// non-empty reason (for example "unsupported_delta", "unavailable",
// "conflict", "gap"). Every other field is ignored when OK.
//
// A failure may say more (docs/contract.md §7.8): that it is permanent (the
// event is quarantined at once, whatever attempts remain), that the event
// should not be tried again before a wait (RetryAfter, capped by the
// policy's RetryAfterLimit), and what went wrong in words (Error, kept in
// the event's attempt history). The zero values of these fields are the
// default contract's failure.
type Result struct {
	OK     bool   // the receiver applied (or already had) the event
	Reason string // required when !OK: the short, bounded vocabulary of §2.4
	// Permanent quarantines the event at once: retrying cannot help (the
	// receiver refused this body for good).
	Permanent bool
	// RetryAfter, when > 0, is the least wait before the event may be
	// claimed again: the event becomes available at now + max(the policy's
	// Delay, min(RetryAfter, RetryAfterLimit)). Ignored when the failure
	// quarantines. >= 0.
	RetryAfter clock.Tick
	// Error is the failure's error text: 0..MaxErrorLen bytes of printable
	// UTF-8 (ErrorText makes one from any string), never a secret.
	Error string
}

// MaxErrorLen is the longest error text a failure records, in bytes.
const MaxErrorLen = 512

// MaxHistory is the number of failed attempts an event keeps in its
// history (docs/contract.md §7.8): the latest ones; older ones are deleted
// as new ones are written.
const MaxHistory = 10

// Attempt is one failed attempt in an event's history (docs/contract.md
// §7.8): when the failure was recorded, the claim's generation and its
// attempt number in the round, what the settle (or the claim that found the
// lease expired on the round's last attempt) did, and why.
type Attempt struct {
	At         clock.Tick `json:"at"`
	Generation int64      `json:"generation"`
	Attempt    int        `json:"attempt"`
	Outcome    Outcome    `json:"outcome"` // RetryScheduled or Quarantined
	Reason     string     `json:"reason"`
	Error      string     `json:"error,omitempty"`
}

// Outcome is what a settle did.
type Outcome string

// The outcomes of Settle (docs/contract.md §2.4); Extend answers Stale,
// Expired or Extended.
//
// After Expired (or Stale) the caller stops working on that claim and does
// not settle or extend it again: the event is, or will be, claimed again
// with a higher generation, and only that claim's settle counts. A handler
// that needs longer than Lease extends its claim (Extend) before the lease
// runs out.
const (
	Acked          Outcome = "acked"           // success: the flow's next event becomes its head
	RetryScheduled Outcome = "retry_scheduled" // failure with attempts left: pending again after the policy's Delay
	Quarantined    Outcome = "quarantined"     // failure on the round's last attempt
	Stale          Outcome = "stale"           // wrong generation, or the event is not in flight: nothing changed
	Expired        Outcome = "expired"         // the lease had run out (now >= lease_until): nothing changed
)

// Extended is the outcome of an Extend that renewed the lease.
const Extended Outcome = "extended"

// Wrote reports whether a settle with this outcome changed the event
// (Acked, RetryScheduled, Quarantined).
func (o Outcome) Wrote() bool {
	return o == Acked || o == RetryScheduled || o == Quarantined
}

// SettleItem is one claim to settle in a SettleBatch.
type SettleItem struct {
	EventID    string // the claimed event
	Generation int64  // the claim's generation
	Result     Result // what the sender reports
}

// SettleResult is the result of one SettleItem (or ExtendItem): its Outcome,
// or Err when the item itself was bad (ErrInvalid, ErrNotFound); such an
// item changed nothing.
type SettleResult struct {
	Outcome Outcome // "" when Err is set
	Err     error   // the item's own error; nil for a settled item
	// LeaseUntil is, for an Extended item, the lease's new end: now plus
	// the Lease of the policy in force when it was extended (§7.2), which
	// may differ from the one in force at the claim. Zero otherwise.
	LeaseUntil clock.Tick
}

// ExtendItem names one claim to extend: the event and the generation its
// claim returned.
type ExtendItem struct {
	EventID    string
	Generation int64
}

// EventState reads one event as it is now.
type EventState struct {
	ID, Flow         string
	Seq              int64
	Body             []byte
	State            string // "pending", "inflight", "acked", "quarantined"
	Generation       int64
	Attempts         int
	LifetimeAttempts int
	AvailableAt      clock.Tick
	LeaseUntil       clock.Tick // 0 when not in flight
	Reason           string
	// AckedAt is the tick of the settle that acked the event; 0 unless
	// acked. Retention (docs/contract.md §7.9) counts from it.
	AckedAt clock.Tick
	// Error is the error text of the failure recorded at the event's
	// current generation (the newest History entry when its Generation is
	// the event's); "" otherwise: in flight again, acked, redriven, or a
	// failure that gave none.
	Error string
	// History is the event's failed attempts, oldest first, at most
	// MaxHistory (the latest); a redrive keeps it. Event fills it;
	// FlowEvents leaves it nil.
	History []Attempt
}

// QuarantinedEvent is a quarantined event as an operator sees it: what to
// redrive (ID and generation) and why it stopped.
type QuarantinedEvent struct {
	EventID          string `json:"event_id"`
	Flow             string `json:"flow"`
	Seq              int64  `json:"seq"`
	Generation       int64  `json:"generation"`
	LifetimeAttempts int    `json:"lifetime_attempts"`
	Reason           string `json:"reason"`
	// Error is the error text of the failure that quarantined the event
	// ("" when it gave none).
	Error string `json:"error,omitempty"`
}

// AuditEntry is one redrive: the event, its new generation, the operator's
// reason and the tick. ID orders the entries as they were written.
type AuditEntry struct {
	ID         int64      `json:"id"`
	EventID    string     `json:"event_id"`
	Generation int64      `json:"generation"`
	Reason     string     `json:"reason"`
	At         clock.Tick `json:"at"`
}

// FlowState is one flow as an operator sees it.
type FlowState struct {
	Flow   string `json:"flow"`
	Served int64  `json:"served"`
	// LastSeq is the highest sequence number handed out in the flow.
	LastSeq int64 `json:"last_seq"`
	// HeadSeq is the flow's lowest event that is not acked; 0 when every
	// event is acked.
	HeadSeq int64 `json:"head_seq"`
	// HeadState is the head's state; "" when there is no head.
	HeadState string `json:"head_state"`
	// ReadyAt is the tick from which the head is dispatchable (its
	// available_at when pending, its lease end when in flight); nil when the
	// head is quarantined or there is no head.
	ReadyAt *clock.Tick `json:"ready_at"`
	// Backlog counts the flow's events that are not acked.
	Backlog int64 `json:"backlog"`
	// Weight is the flow's weight (docs/contract.md §7.6): 1 unless set.
	Weight int `json:"weight"`
	// Paused is set while an operator has paused the flow
	// (docs/contract.md §7.9): its head is not dispatchable until it is
	// resumed; PauseReason is the reason the pause gave.
	Paused      bool   `json:"paused,omitempty"`
	PauseReason string `json:"pause_reason,omitempty"`
	// Destination is the flow's destination (docs/contract.md §7.11); ""
	// (omitted) is DefaultDestination.
	Destination string `json:"destination,omitempty"`
	// Position is the flow's place in the rotation under FairRotation: 1
	// for the flow a claim would pick next if every head were dispatchable
	// now, 2 for the one after it, …; 0 for a flow without a backlog and
	// under FairMinServed.
	Position int64 `json:"position,omitempty"`
}

// EventCounts counts events by state.
type EventCounts struct {
	Pending     int64 `json:"pending"`
	Inflight    int64 `json:"inflight"`
	Acked       int64 `json:"acked"`
	Quarantined int64 `json:"quarantined"`
}

// Stats is a summary of the whole store, read in one transaction.
type Stats struct {
	SchemaVersion int         `json:"schema_version"`
	ClockMark     clock.Tick  `json:"clock_mark"` // the highest tick recorded
	Ticket        int64       `json:"ticket"`     // the last claim ticket handed out; 0 before the first
	Flows         int64       `json:"flows"`
	Events        EventCounts `json:"events"`
	Quarantined   int64       `json:"quarantined"` // the same as Events.Quarantined
	AuditRows     int64       `json:"audit_rows"`
	// PausedFlows counts the flows an operator has paused (docs/contract.md
	// §7.9).
	PausedFlows int64 `json:"paused_flows,omitempty"`
	// Destinations counts the registered destinations (docs/contract.md
	// §7.11).
	Destinations int64 `json:"destinations,omitempty"`
}

// RedriveFilter selects quarantined events for RedriveAll and
// QuarantinedMatching. An empty field matches everything; a set field must
// be a valid flow or reason (ErrInvalid otherwise) and matches it exactly.
type RedriveFilter struct {
	Flow   string // the event's flow
	Reason string // the event's failure reason (for example ReasonLeaseExpired)
}

// Redriven is one event that RedriveAll put back: the event, its flow and
// sequence number, and its NEW generation (the one its audit row names).
type Redriven struct {
	EventID, Flow   string
	Seq, Generation int64
}

// AuditKind names what an audit row records.
type AuditKind string

// The audit kinds.
const (
	AuditRedrive AuditKind = "redrive" // Redrive, RedriveAll: EventID and its new Generation
	AuditPolicy  AuditKind = "policy"  // SetPolicy: Detail is PolicyChange as JSON
	AuditWeight  AuditKind = "weight"  // a flow's weight changed (FairRotation): Detail says which
	AuditPause   AuditKind = "pause"   // PauseFlow: Detail is FlowChange as JSON
	AuditResume  AuditKind = "resume"  // ResumeFlow: Detail is FlowChange as JSON
)

// FlowChange is the detail of a 'pause' or 'resume' audit row, as JSON:
// every backend writes this field, so they all write the same bytes.
type FlowChange struct {
	Flow string `json:"flow"`
}

// PruneResult is what a Prune deleted (or, from Prunable, would delete):
// acked events (with their attempt history) and audit rows older than the
// policy's retention window (docs/contract.md §7.9).
type PruneResult struct {
	Events int64 `json:"events"` // acked events deleted, with their history rows
	Audit  int64 `json:"audit"`  // audit rows deleted, of every kind
	// More is set when a kind filled the batch's limit: more rows may be
	// prunable at the same tick, and the caller prunes again.
	More bool `json:"more,omitempty"`
}

// Batch sizes of Prune (docs/contract.md §7.9): each batch is one short
// transaction.
const (
	DefaultPruneBatch = 1000  // what the relay runtime and relayctl prune use
	MaxPruneBatch     = 10000 // the largest limit Prune accepts
)

// AuditRecord is one audit row of any kind. EventID and Generation are set
// for AuditRedrive rows only; Detail for the other kinds only.
type AuditRecord struct {
	ID         int64      `json:"id"`
	Kind       AuditKind  `json:"kind"`
	EventID    string     `json:"event_id,omitempty"`
	Generation int64      `json:"generation,omitempty"`
	Reason     string     `json:"reason"`
	Detail     string     `json:"detail,omitempty"`
	At         clock.Tick `json:"at"`
}

// HookPoint names a point inside a store operation where the hook is called.
type HookPoint string

// The hook points. The crash injector arms them in a child process.
const (
	HookEnqueueSeqTaken    HookPoint = "queue.enqueue.seq_taken"    // inside the enqueue tx, after the flow's seq number is taken, before commit
	HookClaimCommitted     HookPoint = "queue.claim.committed"      // after a claim's tx commits, before Claim returns (only when a claim was made)
	HookSettleBeforeCommit HookPoint = "queue.settle.before_commit" // inside the settle tx, after its writes are made (or queued to go with COMMIT), before commit (only for acked/retry/quarantined)
	HookRedriveBeforeAudit HookPoint = "queue.redrive.before_audit" // inside the redrive tx, after the event update, before the audit insert
)
