// Package conformance is the one test suite every fairrelay backend runs,
// in the style of River's riverdrivertest: each clause of the queue
// contract (docs/contract.md §2, §7) and of the receiver contract (§3) is
// a backend-agnostic subtest, and so is the model-based randomized test.
// RunQueue and RunReceiver take a backend (a function that makes new
// stores, plus the few hooks a clause needs to reach behind a store's back)
// and run every clause on it; a backend passes when every subtest does.
//
// The clauses were ported from the SQLite stores' own tests and keep their
// names; this suite is now their only home (docs/decisions/
// conformance-one-home.md). Tests that are about one engine (file locks,
// PRAGMAs, query plans, migrations, crash processes) stay in that store's
// module.
//
// The package imports only the vocabulary modules (queue, receiver),
// clock and fairness; its own tests run the suite on queuestore,
// receiverstore, pgqueuestore and pgreceiverstore.
package conformance
