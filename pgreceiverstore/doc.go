// Package pgreceiverstore is fairrelay's idempotent receiver on
// PostgreSQL: the same rules as receiverstore (docs/contract.md §3), in a
// schema of its own, through pgx and pgxpool.
//
// Receive checks the body first ({"delta": N}, receiver.ErrInvalidBody),
// then, in one transaction: a receipt with this ID (duplicate or conflict),
// a receipt for (flow, seq) under another ID (conflict), a gap, a sequence
// number at or below the flow's pruned mark (pruned), a sequence number
// behind (conflict), a delta above MaxDelta (unsupported_delta), otherwise
// accepted: receipt, total += delta and next-expected += 1 commit
// together. Conflicts are recorded once each.
//
// A batch of any number of messages (ReceiveBatch; Receive is a batch of
// one) whose every message is accepted costs one round trip and one
// commit: one call of receive_accepted (migration 3, replaced by 4),
// which takes the locks, reads, checks that every message is accepted and
// writes, on the server, in one autocommitted statement
// (docs/decisions/postgres-server-side-transitions.md). When any message
// would get another answer, the call writes nothing (SQLSTATE FR001) and
// the batch takes the general path, two round trips more: BEGIN, the
// locks and one read over arrays (the receipts of its IDs and of its
// (flow, seq) pairs, its flows); then the rules applied in Go, in order,
// each message seeing the ones before it, and one set statement per table
// for the writes, sent with COMMIT
// (docs/decisions/postgres-per-event-cost.md). A batch with a delta above
// MaxDelta, and every batch of a store opened WithHook (the hook runs
// inside the transaction), takes the general path alone. Both paths take
// the same locks and leave the same rows.
//
// # Retention
//
// Every receipt records the wall-clock time it was accepted (WithNow
// replaces the clock). Prune deletes, in bounded batches, the receipts
// accepted before a time and raises their flows' pruned mark
// (receiver.FlowState.PrunedThrough), under the advisory locks of those
// flows (docs/decisions/receiver-retention.md).
//
// # Concurrency
//
// A write transaction first takes the store's write key shared and
// transaction-level advisory locks on its messages' IDs and flows (in
// ascending key order, so two transactions never wait for each other in a
// cycle), then reads and writes in READ COMMITTED. A batch over more than
// 64 keys takes the write key exclusive instead, one lock whatever its
// size, and runs alone. Every rule reads only rows keyed by the message's ID or flow,
// so two transactions that could decide differently in parallel than one
// after the other always share a lock and run one after the other; others
// run in parallel. See docs/decisions/postgres-receiver-locks.md.
//
// # Schema
//
// The schema is the numbered migrations embedded from migrations/ (the
// migration module). Open creates the schema (default
// "fairrelay_receiver", WithSchema to choose) and runs the migrations past
// its version, each recording the version it reaches in schema_migrations,
// in one transaction under an advisory lock. Text columns are COLLATE "C",
// so every order is byte order, as in SQLite.
//
// # Crash injection
//
// WithHook installs a callback run at receiver.HookAcceptBeforeCommit,
// inside the accept transaction (on the general path, which such a store
// always takes); a process that exits there leaves the server to roll the
// transaction back.
package pgreceiverstore
