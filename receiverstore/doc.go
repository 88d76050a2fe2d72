// Package receiverstore is fairrelay's idempotent receiver (docs/contract.md §3): it turns
// at-least-once delivery into an exactly-once effect.
//
// A [Message] carries an event's ID, its flow, its sequence number in that
// flow and a body {"delta": N}. The receiver's effect is to add N to the
// flow's running total. [Store.Receive] answers with an [Outcome]:
//
//   - [Accepted] means the effect is applied, not merely stored: the receipt,
//     total += delta and the flow's next expected number += 1 were committed
//     together in one SQLite transaction. There is no state in which a
//     receipt exists without its delta in the total, or the other way round.
//     A crash before that commit leaves neither; after it, both.
//   - [Duplicate]: the byte-identical message was accepted before; nothing
//     changes. This is what makes redelivery harmless.
//   - [Conflict]: the ID was used for another flow, seq or body, or the
//     (flow, seq) slot is taken by another ID. Conflicts are kept, not
//     resolved: each distinct one is recorded once ([Store.Conflicts]) and
//     never moves a total.
//   - [Gap]: the message is ahead of the flow's next expected number. Nothing
//     is skipped; the sender must deliver the missing ones first.
//   - [UnsupportedDelta]: the delta is above this receiver's capability
//     ([WithMaxDelta]). Nothing changes; once the store is reopened with a
//     higher cap, the byte-identical message is accepted.
//   - [Pruned]: the message has no receipt and its seq is at or below the
//     flow's pruned mark: the event was applied and retention deleted its
//     receipt. Nothing changes; a sender counts it as delivered.
//
// A body that is not exactly {"delta": N} with an integer N in 1..1000 is
// [ErrInvalidBody], checked before anything else; a bad ID, flow or sequence
// number is [ErrInvalid]. Neither changes anything. [Store.ReceiveBatch]
// receives many messages in one transaction with the outcomes that
// successive Receive calls would give.
//
// The database is one SQLite file in WAL mode with synchronous=FULL, a busy
// timeout and IMMEDIATE write transactions, so several processes may receive
// into it at once. Its schema is the numbered migrations embedded from
// migrations/ (the migration module), each recording the version it reaches
// in PRAGMA user_version. [Store.Snapshot] reads every table in one read
// transaction, in a stable order, for golden files.
//
// Retention (docs/contract.md §7.9): every receipt records the wall-clock
// time it was accepted ([WithNow] replaces the clock). [Store.Prune]
// deletes, in bounded batches, the receipts accepted before a time and
// raises their flows' pruned mark (FlowState.PrunedThrough); totals, next
// expected numbers and conflicts are kept, and nothing else is ever
// deleted. A file this package creates has auto_vacuum=INCREMENTAL, and a
// prune gives the freed pages back to the file system.
//
// [WithEffect] makes the receiver a user's inbox: the user's [Effect] runs
// for each accepted message inside the receipt's own transaction, through a
// database/sql-shaped [Tx] on the same file, so that the receipt and the
// effect commit or roll back together; an effect's error wraps [ErrEffect]
// and changes nothing. [WithSchema] creates the effect's tables at Open.
// With an effect the body is any bytes and the built-in delta sum becomes a
// count of accepted messages; without one (the default) everything above
// holds unchanged.
//
// [WithHook] lets a test harness stop the process inside the accept
// transaction ([HookAcceptBeforeCommit]); the package does not import the
// crash injector.
package receiverstore
