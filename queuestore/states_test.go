package queuestore

import "github.com/fairrelay/fairrelay/queue"

// The event states under the short names the tests use; the store itself
// says queue.StatePending and so on.
const (
	statePending     = queue.StatePending
	stateInflight    = queue.StateInflight
	stateAcked       = queue.StateAcked
	stateQuarantined = queue.StateQuarantined
)
