package conformance

import (
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Queue is a store under test: the queue contract as the queue module
// declares it once (queue.Store). queuestore.Store and pgqueuestore.Store
// both are one.
type Queue = queue.Store

// QueueOptions are the options of the contract a backend's Open takes
// (docs/contract.md §7.1, §7.3).
type QueueOptions struct {
	// Policy is WithPolicy's policy; nil when not given.
	Policy *queue.Policy
	// RealTime is true when WithRealTime was given, with Source and Skew.
	RealTime bool
	Source   clock.Source
	Skew     clock.Tick
	// Hook is WithHook's function; nil when not given.
	Hook func(queue.HookPoint)
}

// QueueBackend is one queue backend under test.
type QueueBackend struct {
	// NewLoc returns a new location for a store (a file path, a schema
	// name) that is cleaned up when t ends. Nothing exists there yet.
	NewLoc func(t testing.TB) string
	// Open opens the store at loc with o, creating it when it does not
	// exist, as the backend's Open does (an error is returned, not
	// reported). The store is closed when t ends. It may be called from
	// several goroutines at once.
	Open func(t testing.TB, loc string, o QueueOptions) (Queue, error)
	// FailWrites makes every later write of the given kind to the store at
	// loc fail with an error whose text holds "injected: " and the kind's
	// words (as a trigger raising an error does), so that the atomicity
	// clauses (docs/contract.md §2.7) can make a transaction's second
	// write fail. Nil skips those clauses.
	FailWrites func(t testing.TB, loc string, w FailWrite)
	// SchemaVersion is what the backend's Stats report.
	SchemaVersion int
	// Sequences is how many random sequences the model clause runs
	// (FAIRRELAY_CONFORMANCE_SEQUENCES overrides it).
	Sequences int
	// RaceSequences replaces Sequences under the race detector; 0 is a
	// quarter of Sequences. A backend whose engine the detector slows down
	// most (SQLite's is Go code) runs fewer there, and its full count
	// without the detector (mage test does).
	RaceSequences int
	// TwinSeeds, when not 0, is how many random seeds each twin clause
	// runs (a batch call against the calls it stands for:
	// EnqueueBatch_TwinOfSuccessiveEnqueues, 40 by default, and
	// SettleClaimBatch_TwinOfSettleBatchThenClaimBatch, 12);
	// FAIRRELAY_CONFORMANCE_SEQUENCES overrides it as it does Sequences.
	TwinSeeds int
	// Rotation says the backend implements the rotation order
	// (docs/contract.md §7.6); a backend without it must refuse a rotation
	// policy with ErrInvalid, and the policy clauses check that it does.
	Rotation bool
	// Labeled says every store Open returns already carries a shard label
	// (a shard suite labels each store it opens); the clause of a new
	// store's label (docs/contract.md §7.10) is skipped then.
	Labeled bool
}

// FailWrite names a write that FailWrites makes fail.
type FailWrite string

// The writes the atomicity clauses make fail, with the text their error
// must hold.
const (
	FailEventInsert FailWrite = "injected: event insert fails" // every INSERT into events
	FailAuditInsert FailWrite = "injected: audit insert fails" // every INSERT into audit
	FailServe       FailWrite = "injected: serve fails"        // every UPDATE of flows.served
)

func (bk *QueueBackend) failWrites(t testing.TB, loc string, w FailWrite) {
	t.Helper()
	if bk.FailWrites == nil {
		t.Skip("the backend cannot make a write fail")
	}
	bk.FailWrites(t, loc, w)
}

// qOpt is an Open option of the ported clauses.
type qOpt func(*QueueOptions)

func withPolicy(p queue.Policy) qOpt { return func(o *QueueOptions) { o.Policy = &p } }

func withRealTime(src clock.Source, skew clock.Tick) qOpt {
	return func(o *QueueOptions) { o.RealTime, o.Source, o.Skew = true, src, skew }
}

func withHook(fn func(queue.HookPoint)) qOpt { return func(o *QueueOptions) { o.Hook = fn } }

// openPolicy opens a new store with policy p; it fails t on an error.
func (bk *QueueBackend) openPolicy(t testing.TB, p queue.Policy) Queue {
	t.Helper()
	q, _ := bk.openTest(t, withPolicy(p))
	return q
}

func (bk *QueueBackend) newLoc(t testing.TB) string {
	t.Helper()
	return bk.NewLoc(t)
}

func (bk *QueueBackend) openAt(t testing.TB, loc string, opts ...qOpt) (Queue, error) {
	var o QueueOptions
	for _, f := range opts {
		f(&o)
	}
	return bk.Open(t, loc, o)
}

// openTest opens a new store at a new location; it fails t on an error.
func (bk *QueueBackend) openTest(t testing.TB, opts ...qOpt) (Queue, string) {
	t.Helper()
	loc := bk.newLoc(t)
	q, err := bk.openAt(t, loc, opts...)
	if err != nil {
		t.Fatalf("Open(%q) error = %v", loc, err)
	}
	return q, loc
}

func (bk *QueueBackend) open(t testing.TB) Queue {
	t.Helper()
	q, _ := bk.openTest(t)
	return q
}

// RunQueue runs every queue clause as a subtest named after it, each on
// stores from b.
func RunQueue(t *testing.T, b QueueBackend) {
	for _, c := range queueClauses {
		t.Run(c.name, func(t *testing.T) { c.run(t, &b) })
	}
}

type queueClause struct {
	name string
	run  func(t *testing.T, bk *QueueBackend)
}
