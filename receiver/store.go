package receiver

import (
	"context"
	"time"
)

// Store is the receiver contract (docs/contract.md §3) as Go methods: what
// every receiver backend has. receiverstore.Store (SQLite) and
// pgreceiverstore.Store (PostgreSQL) implement it and assert so at compile
// time; the conformance suite drives a Store and proves every clause on
// each backend.
//
// This is the one declaration of the full method set. A consumer that
// needs less (the receiver server, the console, a CLI command) declares a
// narrow interface of its own, in these types.
type Store interface {
	// Receive applies one message exactly once (§3): Accepted, or
	// Duplicate for one already applied, or a refusal (Conflict, Gap,
	// UnsupportedDelta) that changes nothing but the conflict record.
	// Bad input is ErrInvalid or ErrInvalidBody and changes nothing.
	Receive(ctx context.Context, m Message) (Outcome, error)
	// ReceiveBatch receives ms in one transaction, each as Receive would
	// in order; a message's own error is in its BatchResult.
	ReceiveBatch(ctx context.Context, ms []Message) ([]BatchResult, error)
	// Total is a flow's sum of applied deltas; 0 for an unknown flow.
	Total(ctx context.Context, flow string) (int64, error)
	// NextExpected is the sequence number a flow accepts next; 1 for an
	// unknown flow.
	NextExpected(ctx context.Context, flow string) (int64, error)
	// Flows lists every flow with its total and next expected sequence,
	// by name.
	Flows(ctx context.Context) ([]FlowState, error)
	// Conflicts lists every recorded conflict by flow, seq, ID and body.
	Conflicts(ctx context.Context) ([]ConflictRecord, error)
	// Snapshot reads every table in one transaction, in the form of the
	// experiment's golden files.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Close releases the store; it is not used after.
	Close() error
}

// Pruner is a Store that deletes receipts its retention window no longer
// keeps (docs/contract.md §7.9). Both backends of this repository are
// Pruners; each records, with every receipt, the wall-clock time it was
// accepted (the store's own clock, which a test may replace).
//
// Prune deletes, in one short transaction, at most limit receipts
// accepted before before, the oldest first (those accepted at the same
// time in byte order of their flow, then by sequence number), and raises
// each touched flow's PrunedThrough to the highest sequence number
// deleted. A flow's total and next expected sequence survive, so a later
// redelivery of a deleted receipt's event is answered Pruned, never
// applied twice. limit is 1..MaxPruneBatch (ErrInvalidOption otherwise);
// receipts are found through an index on their time, never by scanning
// every receipt. Conflict records are kept. The result counts what
// committed, also next to an error: a store that fails after its commit
// (receiverstore, giving the freed pages back) returns the batch's
// Receipts and More with the error, so a caller counts r.Receipts
// whatever the error.
//
// Prunable counts, without deleting anything, what Prune with before
// would delete in all its batches together.
type Pruner interface {
	Prune(ctx context.Context, before time.Time, limit int) (PruneResult, error)
	Prunable(ctx context.Context, before time.Time) (PruneResult, error)
}
