package queue

import "errors"

// Sentinel errors. Operations wrap them with context; test for them with
// errors.Is. The messages keep the "queuestore:" prefix the SQLite store has
// always printed: the experiment's golden files quote them.
var (
	// ErrConflict reports an Enqueue of an ID already stored with another
	// flow or body.
	ErrConflict = errors.New("queuestore: id already used with another flow or body")
	// ErrTimeRegression reports a write whose tick is below the store's clock
	// mark. It also wraps clock.ErrRegression.
	ErrTimeRegression = errors.New("queuestore: time went backwards")
	// ErrNotFound reports an unknown event ID or flow.
	ErrNotFound = errors.New("queuestore: not found")
	// ErrEmptyReason reports a redrive, or a failed Result, without a reason.
	ErrEmptyReason = errors.New("queuestore: reason is empty")
	// ErrNotQuarantined reports a redrive of an event that is not quarantined.
	ErrNotQuarantined = errors.New("queuestore: event is not quarantined")
	// ErrStaleGeneration reports a redrive whose generation is not the
	// event's current one.
	ErrStaleGeneration = errors.New("queuestore: stale generation")
	// ErrInvalid reports bad input: an ID, flow, body, reason, generation or
	// batch size outside the documented limits.
	ErrInvalid = errors.New("queuestore: invalid input")
	// ErrSchemaVersion reports a database file whose schema this build does
	// not know: a newer version, or a file that is not a queue store.
	ErrSchemaVersion = errors.New("queuestore: unknown schema version")
	// ErrCorrupt reports stored state that breaks the store's own
	// invariants (for example a flow marked ready whose head is acked).
	// It means the file was changed outside this package.
	ErrCorrupt = errors.New("queuestore: inconsistent stored state")
	// ErrPolicyMismatch reports an Open with WithPolicy of a file that
	// records another policy; the error names both.
	ErrPolicyMismatch = errors.New("queuestore: policy differs from the one recorded in the file")
	// ErrTickOverflow reports a negative tick, or one that a lease or
	// backoff of the queue's policy would push past math.MaxInt64
	// (Policy.MaxTick). It is checked in every mode, before the clock mark.
	ErrTickOverflow = errors.New("queuestore: tick out of range")
	// ErrTimeAhead reports, in real time (WithRealTime), a tick further
	// ahead of the wall clock than the configured skew.
	ErrTimeAhead = errors.New("queuestore: tick is ahead of the wall clock")
	// ErrFlowPaused reports a PauseFlow of a flow that is already paused.
	ErrFlowPaused = errors.New("queuestore: flow is already paused")
	// ErrFlowNotPaused reports a ResumeFlow of a flow that is not paused.
	ErrFlowNotPaused = errors.New("queuestore: flow is not paused")
	// ErrUnknownDestination reports a destination that is not registered
	// (docs/contract.md §7.11).
	ErrUnknownDestination = errors.New("queuestore: unknown destination")
	// ErrDestinationMismatch reports an enqueue naming a destination other
	// than the one its flow already delivers to; SetFlowDestination changes
	// a flow's destination.
	ErrDestinationMismatch = errors.New("queuestore: flow delivers to another destination")
	// ErrDestinationPaused reports a PauseDestination of a paused
	// destination.
	ErrDestinationPaused = errors.New("queuestore: destination is already paused")
	// ErrDestinationNotPaused reports a ResumeDestination of a destination
	// that is not paused.
	ErrDestinationNotPaused = errors.New("queuestore: destination is not paused")
	// ErrShardLabel reports a shard whose recorded label (docs/contract.md
	// §7.10) is not the one the caller opens it as: another index, another
	// shard count, or a store labeled already.
	ErrShardLabel = errors.New("queuestore: shard label differs")
)
