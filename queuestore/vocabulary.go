package queuestore

import "github.com/fairrelay/fairrelay/queue"

// The store speaks the shared vocabulary of the queue module: these types
// are queue's, so a value from this store is a value of every backend, and a
// program written against queue's types (relay, the conformance suite) takes
// a *Store as it is. See the queue module for each type's documentation.
type (
	// Event is queue.Event: what a producer enqueues.
	Event = queue.Event
	// Enqueued is queue.Enqueued: an enqueue's sequence number and whether
	// it was a duplicate.
	Enqueued = queue.Enqueued
	// Claim is queue.Claim: one event handed to a sender.
	Claim = queue.Claim
	// Result is queue.Result: what the sender reports for a claim.
	Result = queue.Result
	// Outcome is queue.Outcome: what a settle or an extension did.
	Outcome = queue.Outcome
	// SettleItem is queue.SettleItem: one claim to settle in a SettleBatch.
	SettleItem = queue.SettleItem
	// SettleResult is queue.SettleResult: the result of one SettleItem or
	// ExtendItem.
	SettleResult = queue.SettleResult
	// ExtendItem is queue.ExtendItem: one claim to extend.
	ExtendItem = queue.ExtendItem
	// EventState is queue.EventState: one event as it is now.
	EventState = queue.EventState
	// QuarantinedEvent is queue.QuarantinedEvent: a quarantined event as an
	// operator sees it.
	QuarantinedEvent = queue.QuarantinedEvent
	// AuditEntry is queue.AuditEntry: one redrive.
	AuditEntry = queue.AuditEntry
	// AuditKind is queue.AuditKind: what an audit row records.
	AuditKind = queue.AuditKind
	// AuditRecord is queue.AuditRecord: one audit row of any kind.
	AuditRecord = queue.AuditRecord
	// FlowState is queue.FlowState: one flow as an operator sees it.
	FlowState = queue.FlowState
	// EventCounts is queue.EventCounts: events by state.
	EventCounts = queue.EventCounts
	// Stats is queue.Stats: a summary of the whole store.
	Stats = queue.Stats
	// RedriveFilter is queue.RedriveFilter: which quarantined events
	// RedriveAll and QuarantinedMatching select.
	RedriveFilter = queue.RedriveFilter
	// Redriven is queue.Redriven: one event RedriveAll put back.
	Redriven = queue.Redriven
	// HookPoint is queue.HookPoint: a point inside an operation where the
	// hook is called.
	HookPoint = queue.HookPoint
	// Policy is queue.Policy: the queue's policy (docs/contract.md §7.1).
	Policy = queue.Policy
	// PolicyChange is queue.PolicyChange: the detail of a 'policy' audit row.
	PolicyChange = queue.PolicyChange
	// Fairness is queue.Fairness: the claim's flow order.
	Fairness = queue.Fairness
	// Snapshot is queue.Snapshot: every table of the store, read in one
	// transaction.
	Snapshot = queue.Snapshot
	// SnapshotFlow is queue.SnapshotFlow: one row of the flows table.
	SnapshotFlow = queue.SnapshotFlow
	// SnapshotEvent is queue.SnapshotEvent: one row of the events table.
	SnapshotEvent = queue.SnapshotEvent
	// RotationState is queue.RotationState: the queue-wide state of the
	// rotation order.
	RotationState = queue.RotationState
	// Bytes is queue.Bytes: a body in a snapshot, JSON as a string when it
	// is valid UTF-8.
	Bytes = queue.Bytes
	// Attempt is queue.Attempt: one failed attempt in an event's history
	// (docs/contract.md §7.8).
	Attempt = queue.Attempt
	// SnapshotAttempt is queue.SnapshotAttempt: one row of the attempt
	// history in a snapshot.
	SnapshotAttempt = queue.SnapshotAttempt
)
