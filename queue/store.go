package queue

import (
	"context"

	"github.com/fairrelay/fairrelay/clock"
)

// Store is the queue contract (docs/contract.md §2, §7.1–§7.3) as Go
// methods: what every queue backend has. queuestore.Store (SQLite) and
// pgqueuestore.Store (PostgreSQL) implement it and assert so at compile
// time; the conformance suite drives a Store and proves every clause on
// each backend.
//
// This is the one declaration of the full method set. A consumer that
// needs less (the relay runtime, the console, a CLI command) declares a
// narrow interface of its own, in these types; one that needs a capability
// beyond Store asks for it with a type assertion or in its own interface
// ([Weighter], [SettleClaimer], [Pager]).
//
// Every method takes the caller's tick now where it writes (the clock mark
// refuses a tick below the highest one recorded, ErrTimeRegression); bad
// input is ErrInvalid and changes nothing; the errors are this package's
// sentinels, wrapped.
type Store interface {
	// Enqueue appends an event to its flow (§2.1): the next sequence
	// number, or the existing one for an event ID already stored with the
	// same flow and body (Duplicate); another flow or body is ErrConflict.
	Enqueue(ctx context.Context, e Event, now clock.Tick) (Enqueued, error)
	// EnqueueBatch enqueues all events in one transaction: all or nothing.
	EnqueueBatch(ctx context.Context, es []Event, now clock.Tick) ([]Enqueued, error)
	// Claim hands out the head of the flow the fair order picks (§2.3),
	// with a lease and a new generation; ok is false when no head is
	// dispatchable at now.
	Claim(ctx context.Context, now clock.Tick) (c Claim, ok bool, err error)
	// ClaimBatch claims up to n heads of different flows in one
	// transaction, as n successive Claims would.
	ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]Claim, error)
	// Settle reports a claim's result (§2.4): Acked, RetryScheduled,
	// Quarantined, or Stale/Expired for a generation that lost its lease.
	Settle(ctx context.Context, eventID string, generation int64, r Result, now clock.Tick) (Outcome, error)
	// SettleBatch settles items in one transaction, each as Settle would.
	SettleBatch(ctx context.Context, items []SettleItem, now clock.Tick) ([]SettleResult, error)
	// Extend renews a live claim's lease (§7.2).
	Extend(ctx context.Context, eventID string, generation int64, now clock.Tick) (Outcome, error)
	// ExtendBatch extends items in one transaction, each as Extend would.
	ExtendBatch(ctx context.Context, items []ExtendItem, now clock.Tick) ([]SettleResult, error)
	// Redrive puts a quarantined event back as its flow's head with a new
	// round of attempts, audited with the operator's reason (§2.5).
	Redrive(ctx context.Context, eventID string, generation int64, reason string, now clock.Tick) error
	// RedriveAll redrives every quarantined event f matches, in chunks of
	// RedriveChunk, each audited (§7, "Also in this version").
	RedriveAll(ctx context.Context, f RedriveFilter, reason string, now clock.Tick) ([]Redriven, error)
	// QuarantinedMatching lists what RedriveAll with f would redrive.
	QuarantinedMatching(ctx context.Context, f RedriveFilter) ([]QuarantinedEvent, error)
	// NextDue is the earliest tick at which a head may become
	// dispatchable; ok is false when nothing waits.
	NextDue(ctx context.Context) (at clock.Tick, ok bool, err error)
	// OldestDue is the due tick of the longest-waiting head dispatchable
	// at now; ok is false when none is.
	OldestDue(ctx context.Context, now clock.Tick) (at clock.Tick, ok bool, err error)
	// Policy is the recorded policy (§7.1).
	Policy(ctx context.Context) (Policy, error)
	// SetPolicy records p with an audit row carrying reason.
	SetPolicy(ctx context.Context, p Policy, reason string, now clock.Tick) error
	// Event reads one event as it is now, its failure history included;
	// ErrNotFound for an unknown ID.
	Event(ctx context.Context, id string) (EventState, error)
	// FlowEvents reads every event of one flow in sequence order (without
	// their History).
	FlowEvents(ctx context.Context, flow string) ([]EventState, error)
	// Quarantined lists every quarantined event in flow and sequence order.
	Quarantined(ctx context.Context) ([]QuarantinedEvent, error)
	// Audit lists the redrive rows of the audit, oldest first.
	Audit(ctx context.Context) ([]AuditEntry, error)
	// AuditAll lists every audit row of every kind, oldest first.
	AuditAll(ctx context.Context) ([]AuditRecord, error)
	// Flows lists every flow as an operator sees it, by name.
	Flows(ctx context.Context) ([]FlowState, error)
	// Stats summarises the whole store.
	Stats(ctx context.Context) (Stats, error)
	// Snapshot reads every table in one transaction, in the form of the
	// experiment's golden files.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Close releases the store; it is not used after.
	Close() error
}

// Weighter is a Store that keeps flow weights (the rotation order,
// docs/contract.md §7.6). Both backends of this repository are Weighters.
type Weighter interface {
	// SetWeight sets a flow's weight (1..MaxWeight), audited with reason.
	SetWeight(ctx context.Context, flow string, weight int, reason string, now clock.Tick) error
}

// SettleClaimer is a Store that settles and claims in one transaction:
// SettleClaimBatch(ctx, items, now, n) answers what SettleBatch(ctx, items,
// now) followed at once by ClaimBatch(ctx, now, n) would (n = 0: settle
// only), in one commit instead of two. Both backends of this repository
// are SettleClaimers; the relay runtime uses it when the queue has it.
type SettleClaimer interface {
	SettleClaimBatch(ctx context.Context, items []SettleItem, now clock.Tick, n int) ([]SettleResult, []Claim, error)
}

// Pager is a Store with the paged reads of an operator's console: keyset
// pages, each a range of an index except the flows in an order other than
// by name, which read the flows (no enqueue, claim or ack pays for those
// orders). Both backends of this repository are Pagers.
type Pager interface {
	// ClockMark is the highest tick the store has recorded, one row read.
	ClockMark(ctx context.Context) (clock.Tick, error)
	// FlowsPage is one page of flows in the query's order.
	FlowsPage(ctx context.Context, q FlowQuery) (FlowPage, error)
	// QuarantinedPage is one page of quarantined events in flow and
	// sequence order, with the count of all that match.
	QuarantinedPage(ctx context.Context, q QuarantinedQuery) (QuarantinedPage, error)
	// QuarantinedReasons counts the quarantined events by reason, the most
	// common first (ties by reason).
	QuarantinedReasons(ctx context.Context) ([]ReasonCount, error)
	// AuditPage is one page of audit rows of every kind, newest first.
	AuditPage(ctx context.Context, q AuditQuery) (AuditPage, error)
	// FlowEventsFrom is one page of a flow's events, as FlowEvents reads
	// them: at most limit (1..MaxPageLimit, ErrInvalid otherwise) in
	// sequence order from the first whose seq is at least from. An
	// unknown flow is ErrNotFound. It reads one range of the flow's
	// events, however many the flow has.
	FlowEventsFrom(ctx context.Context, flow string, from int64, limit int) ([]EventState, error)
}

// Waiter is a Store that can tell how long its oldest event has waited
// (docs/contract.md §7.8), whatever blocks it. Both backends of this
// repository are Waiters.
type Waiter interface {
	// OldestWaiting is the enqueue tick of the oldest event not acked,
	// whatever blocks it (a head waiting for its backoff, in flight or
	// quarantined, or an event behind such a head); ok is false when every
	// event is acked. One index read, however many events and flows.
	OldestWaiting(ctx context.Context) (at clock.Tick, ok bool, err error)
}

// Pauser is a Store whose operator can pause and resume a flow
// (docs/contract.md §7.9). Both backends of this repository are Pausers.
//
// A paused flow's head is not dispatchable: no claim picks the flow until
// it is resumed (a claim already in flight settles or expires as usual,
// and an expired one is not claimed again while paused). Every other flow
// is untouched, enqueues into the paused flow go on, and the flow's
// fairness state (served count, weight, rotation pass) is kept; under
// FairRotation a resumed flow follows the rule for a flow that returns
// with a backlog. Each call writes an audit row (AuditPause, AuditResume)
// with the reason; an unknown flow is ErrNotFound, a pause of a paused
// flow ErrFlowPaused, a resume of one not paused ErrFlowNotPaused, and an
// empty reason ErrEmptyReason: each changes nothing.
type Pauser interface {
	PauseFlow(ctx context.Context, flow, reason string, now clock.Tick) error
	ResumeFlow(ctx context.Context, flow, reason string, now clock.Tick) error
}

// Pruner is a Store that deletes what its retention window no longer
// keeps (docs/contract.md §7.9). Both backends of this repository are
// Pruners.
//
// With the policy's Retention at 0 (the default) nothing is ever deleted.
// Otherwise Prune deletes, in one short transaction, at most limit acked
// events whose AckedAt is at or below now - Retention (with their attempt
// history) and at most limit audit rows whose tick is; pending, in-flight
// and quarantined events are never deleted, and each flow's sequence
// counter, served count, weight and pause survive, so numbering and
// fairness go on as before. Once an event is deleted its ID may be
// enqueued again as a new event: the window of duplicate detection is the
// retention window. Prune is a write: now is checked and recorded as any
// write's tick. limit is 1..MaxPruneBatch (ErrInvalid otherwise); each
// deletion is found through an index, never by scanning every event.
//
// Prunable counts, without deleting or recording anything, what Prune at
// now would delete in all its batches together.
type Pruner interface {
	Prune(ctx context.Context, now clock.Tick, limit int) (PruneResult, error)
	Prunable(ctx context.Context, now clock.Tick) (PruneResult, error)
}
