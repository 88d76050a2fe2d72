package receiverstore

import "github.com/fairrelay/fairrelay/receiver"

// The store speaks the shared vocabulary of the receiver module: these types
// are receiver's, so a value from this store is a value of every backend,
// and a program written against receiver's types (inbox, the conformance
// suite) takes a *Store as it is. See the receiver module for each type's
// documentation.
type (
	// Message is receiver.Message: one event as the receiver gets it.
	Message = receiver.Message
	// Outcome is receiver.Outcome: what a receive decided.
	Outcome = receiver.Outcome
	// BatchResult is receiver.BatchResult: the result of one message of a
	// ReceiveBatch.
	BatchResult = receiver.BatchResult
	// FlowState is receiver.FlowState: one flow's total and next expected
	// sequence number.
	FlowState = receiver.FlowState
	// Receipt is receiver.Receipt: one recorded receipt.
	Receipt = receiver.Receipt
	// ConflictRecord is receiver.ConflictRecord: one recorded conflict.
	ConflictRecord = receiver.ConflictRecord
	// Snapshot is receiver.Snapshot: the whole store, read in one
	// transaction.
	Snapshot = receiver.Snapshot
	// HookPoint is receiver.HookPoint: a point inside an operation where the
	// hook is called.
	HookPoint = receiver.HookPoint
)
