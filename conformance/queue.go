package conformance

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Queue is the queue contract (docs/contract.md §2) as the suite drives
// it. queuestore.Store and pgqueuestore.Store both satisfy it.
type Queue interface {
	Enqueue(ctx context.Context, e queue.Event, now clock.Tick) (queue.Enqueued, error)
	EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error)
	Claim(ctx context.Context, now clock.Tick) (queue.Claim, bool, error)
	ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error)
	Settle(ctx context.Context, eventID string, generation int64, r queue.Result, now clock.Tick) (queue.Outcome, error)
	SettleBatch(ctx context.Context, items []queue.SettleItem, now clock.Tick) ([]queue.SettleResult, error)
	Redrive(ctx context.Context, eventID string, generation int64, reason string, now clock.Tick) error
	Event(ctx context.Context, id string) (queue.EventState, error)
	FlowEvents(ctx context.Context, flow string) ([]queue.EventState, error)
	Quarantined(ctx context.Context) ([]queue.QuarantinedEvent, error)
	Audit(ctx context.Context) ([]queue.AuditEntry, error)
	Flows(ctx context.Context) ([]queue.FlowState, error)
	Stats(ctx context.Context) (queue.Stats, error)
	Snapshot(ctx context.Context) (queue.Snapshot, error)
}

// Extender is the lease extension of docs/contract.md §7.2. The §7.2
// clauses run when the backend's Queue has it.
type Extender interface {
	Extend(ctx context.Context, eventID string, generation int64, now clock.Tick) (queue.Outcome, error)
	ExtendBatch(ctx context.Context, items []queue.ExtendItem, now clock.Tick) ([]queue.SettleResult, error)
}

// Planner tells when a head is next due (NextDue). Its clauses run when the
// backend's Queue has it.
type Planner interface {
	NextDue(ctx context.Context) (clock.Tick, bool, error)
}

// BulkRedriver is the bulk redrive of quarantined events. Its clauses run
// when the backend's Queue has it.
type BulkRedriver interface {
	RedriveAll(ctx context.Context, f queue.RedriveFilter, reason string, now clock.Tick) ([]queue.Redriven, error)
	QuarantinedMatching(ctx context.Context, f queue.RedriveFilter) ([]queue.QuarantinedEvent, error)
}

// QueueBackend is one queue backend under test.
type QueueBackend struct {
	// New returns a new, empty store that lives until t ends. It may be
	// called from several goroutines at once.
	New func(t testing.TB) Queue
	// NewWithPolicy returns a new, empty store created with policy p; nil
	// skips the policy clauses (docs/contract.md §7.1).
	NewWithPolicy func(t testing.TB, p queue.Policy) Queue
	// FailInserts makes every later insert into table ("events" or
	// "audit") of q fail, as a trigger does; nil skips the atomicity
	// clauses (docs/contract.md §2.7).
	FailInserts func(t testing.TB, q Queue, table string)
	// SchemaVersion is what the backend's Stats and Snapshot report.
	SchemaVersion int
	// Sequences is how many random sequences the model clause runs
	// (FAIRRELAY_CONFORMANCE_SEQUENCES overrides it).
	Sequences int
}

func (b *QueueBackend) open(t testing.TB) Queue { return b.New(t) }

func (b *QueueBackend) openTest(t testing.TB) (Queue, string) { return b.New(t), "" }

// backoff is the default policy's backoff.
func backoff(k int) clock.Tick { return queue.DefaultPolicy().Backoff(k) }

// RunQueue runs every queue clause as a subtest named after it, each on
// stores from b.
func RunQueue(t *testing.T, b QueueBackend) {
	for _, c := range queueClauses {
		t.Run(c.name, func(t *testing.T) { c.run(t, &b) })
	}
}

type queueClause struct {
	name string
	run  func(t *testing.T, b *QueueBackend)
}
