package queue

import (
	"context"

	"github.com/fairrelay/fairrelay/clock"
)

// Shards (docs/contract.md §7.10): a sharded queue is N complete queues,
// each flow in exactly one of them. A store knows nothing of hashing or of
// the other shards; it records its label, so that no process opens the
// set with another N, and it hands whole flows out and in, so that an
// offline reshard moves them without losing or doubling anything.

// MaxShards is the most shards of one queue.
const MaxShards = 256

// AuditShard is the audit kind of SetShardLabel and of a reshard's import
// (Detail is ShardLabelChange as JSON).
const AuditShard AuditKind = "shard"

// ShardLabel is what a shard records of its place in a sharded queue.
type ShardLabel struct {
	// Index is the shard's place, 0..Count-1.
	Index int `json:"index"`
	// Count is the number of shards of the queue, 1..MaxShards.
	Count int `json:"count"`
	// Epoch counts the reshards the queue went through (0: none): shards
	// of one set share it, so a shard left over from before a reshard is
	// never mixed with the new set.
	Epoch int64 `json:"epoch"`
}

// ShardLabelChange is the Detail, as JSON, of an AuditShard row.
type ShardLabelChange struct {
	Old *ShardLabel `json:"old,omitempty"`
	New ShardLabel  `json:"new"`
}

// ShardMember is a Store that records its shard label. Both backends of
// this repository are ShardMembers.
type ShardMember interface {
	// ShardLabel reads the label; ok is false for a store never labeled
	// (a queue that is not sharded).
	ShardLabel(ctx context.Context) (l ShardLabel, ok bool, err error)
	// SetShardLabel records l, audited with reason. Like every write it
	// refuses a tick below the clock mark (ErrTimeRegression) before
	// looking at the label, and records now (docs/contract.md §2.6). A
	// store already labeled with another label is ErrShardLabel (labels
	// never change in place: a reshard makes a new set); the same label
	// again changes nothing but the mark; Index outside 0..Count-1 or
	// Count outside 1..MaxShards is ErrInvalid.
	SetShardLabel(ctx context.Context, l ShardLabel, reason string, now clock.Tick) error
}

// FlowExport is one flow with everything a store keeps of it: what
// ExportFlow reads and ImportFlow writes.
type FlowExport struct {
	// Flow is the flow's row: counters, served count, weight, pause and
	// destination (FlowState's fields; Backlog, Position and the head
	// fields are derived and ignored by ImportFlow).
	Flow FlowState `json:"flow"`
	// Events is every event the store still keeps of the flow, in
	// sequence order, each with its attempt history.
	Events []ExportedEvent `json:"events"`
	// Audit is every audit row about the flow or its events (redrive,
	// weight, pause, resume, flow_destination), oldest first.
	Audit []AuditRecord `json:"audit,omitempty"`
}

// ExportedEvent is one event of a FlowExport: its state, with the columns
// EventState does not show.
type ExportedEvent struct {
	EventState
	Ticket     int64      `json:"ticket"`
	EnqueuedAt clock.Tick `json:"enqueued_at"`
	// Dest is, for an event in flight, the destination its claim counts
	// against (docs/contract.md §7.11): the flow's destination when it was
	// claimed, which SetFlowDestination may have changed since. It is ""
	// for the default destination and for an event not in flight.
	Dest string `json:"dest,omitempty"`
}

// Transplanter is a Store whose flows can be moved whole to another store
// of the same backend or another. Both backends of this repository are
// Transplanters. It is the store's part of an offline reshard
// (docs/contract.md §7.10); nothing else uses it.
type Transplanter interface {
	// FlowNames lists the names of every flow, in byte order, at most
	// limit after the name after ("" from the first): one index range.
	FlowNames(ctx context.Context, after string, limit int) ([]string, error)
	// ExportFlow reads one flow whole, in one read transaction; an
	// unknown flow is ErrNotFound.
	ExportFlow(ctx context.Context, flow string) (FlowExport, error)
	// ImportFlow writes x into this store in one transaction, exactly as
	// it was: sequence numbers, states, generations, attempts, leases,
	// tickets, history, served count, weight, pause and destination (a
	// destination must be registered here: ErrUnknownDestination), its
	// audit rows appended in order. A flow or event ID the store already
	// has is ErrConflict; an inconsistent x (events out of sequence, a
	// head that is not the lowest event not acked, a state the schema
	// refuses) is ErrInvalid: both change nothing. The store's ticket and
	// clock mark are raised to at least the highest in x, now is recorded
	// as any write's tick, and under FairRotation the flow joins the
	// rotation as a flow returning with a backlog does.
	ImportFlow(ctx context.Context, x FlowExport, now clock.Tick) error
	// ImportAudit appends queue-wide audit rows (policy, destination,
	// shard) in order, as they were; rows about a flow go with ImportFlow.
	ImportAudit(ctx context.Context, rows []AuditRecord, now clock.Tick) error
}
