// Package queue is the vocabulary every fairrelay queue backend shares:
// the types a queue takes and returns (Event, Claim, Result, Outcome, …),
// its policy (Lease, attempts, backoff and its deterministic jitter), its
// sentinel errors and its input rules (docs/contract.md §2, §7).
//
// It holds no store. The SQLite store (queuestore) and the PostgreSQL store
// (pgqueuestore) both speak these types (queuestore's are aliases of
// them), so that code above them (the relay runtime, the conformance suite,
// the operator CLI) takes either, and errors.Is(err, queue.ErrConflict)
// holds whichever store returned err.
//
// It imports only clock.
package queue
