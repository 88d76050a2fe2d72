package queuestore

import (
	"github.com/fairrelay/fairrelay/queue"
)

// Sentinel errors. Operations wrap them with context; test for them with
// errors.Is. They are the queue module's sentinels, shared by every backend.
var (
	// ErrConflict reports an Enqueue of an ID already stored with another
	// flow or body.
	ErrConflict = queue.ErrConflict
	// ErrTimeRegression reports a write whose tick is below the store's clock
	// mark. It also wraps clock.ErrRegression.
	ErrTimeRegression = queue.ErrTimeRegression
	// ErrNotFound reports an unknown event ID or flow.
	ErrNotFound = queue.ErrNotFound
	// ErrEmptyReason reports a redrive, or a failed Result, without a reason.
	ErrEmptyReason = queue.ErrEmptyReason
	// ErrNotQuarantined reports a redrive of an event that is not quarantined.
	ErrNotQuarantined = queue.ErrNotQuarantined
	// ErrStaleGeneration reports a redrive whose generation is not the
	// event's current one.
	ErrStaleGeneration = queue.ErrStaleGeneration
	// ErrInvalid reports bad input: an ID, flow, body, reason, generation or
	// batch size outside the documented limits.
	ErrInvalid = queue.ErrInvalid
	// ErrSchemaVersion reports a database file whose schema this build does
	// not know: a newer version, or a file that is not a queue store.
	ErrSchemaVersion = queue.ErrSchemaVersion
	// ErrCorrupt reports stored state that breaks the store's own
	// invariants (for example a flow marked ready whose head is acked).
	// It means the file was changed outside this package.
	ErrCorrupt = queue.ErrCorrupt
	// ErrPolicyMismatch reports an Open with WithPolicy of a file that
	// records another policy; the error names both.
	ErrPolicyMismatch = queue.ErrPolicyMismatch
	// ErrTickOverflow reports a negative tick, or one that a lease or
	// backoff of the queue's policy would push past math.MaxInt64
	// (queue.Policy.MaxTick). It is checked in every mode, before the clock mark.
	ErrTickOverflow = queue.ErrTickOverflow
	// ErrTimeAhead reports, in real time (WithRealTime), a tick further
	// ahead of the wall clock than the configured skew.
	ErrTimeAhead = queue.ErrTimeAhead
	// ErrFlowPaused reports a PauseFlow of a flow that is already paused.
	ErrFlowPaused = queue.ErrFlowPaused
	// ErrFlowNotPaused reports a ResumeFlow of a flow that is not paused.
	ErrFlowNotPaused = queue.ErrFlowNotPaused
)
