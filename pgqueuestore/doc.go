// Package pgqueuestore is fairrelay's durable fair queue on PostgreSQL:
// the same contract as queuestore (docs/contract.md §2, §7), the same
// types (package queue), in a schema of its own, through pgx and pgxpool.
//
// Every rule is queuestore's, to the letter: sequence numbers without holes,
// heads that block only their own flow, claims in fairness.MinServed order
// (ties to the smallest flow ID in byte order: text columns are COLLATE "C")
// or, when the recorded policy says FairRotation, in the rotation order with
// flow weights (docs/contract.md §7.6; SetWeight, queue.Event.Weight, 'weight'
// audit rows), one global ticket, generations, attempts, backoff, quarantine
// of a used-up take-over inside the claim, redrive with its audit row in one
// transaction, and the clock mark; scheduled events (queue.Event.NotBefore),
// paused flows (PauseFlow, ResumeFlow) and retention (Prune, Prunable) of
// docs/contract.md §7.9. The experiment's golden files hold for both
// backends.
//
// # Enqueue in the caller's transaction
//
// EnqueueTx and EnqueueBatchTx, which SQLite cannot offer, enqueue in a
// pgx.Tx of the caller's on the store's database: the events commit or
// roll back with the caller's own writes (an outbox without an outbox
// table; docs/postgres.md, "Enqueue in your transaction"). While that
// transaction is open it holds up only later enqueues into its flows and
// of its event IDs; the events become claimable at the next write turn
// after the commit (docs/decisions/postgres-transactional-enqueue.md).
//
// # Concurrency
//
// Every write transaction starts by locking the one meta row (clock mark,
// ticket, policy) with SELECT … FOR UPDATE, so writes take turns as they
// do in SQLite; statements after the lock run in READ COMMITTED and see
// every earlier write. An enqueue first locks the store's enqueue key, its
// event IDs and its flows' sequence counters (flow_seqs), in the same
// round trip, before the meta row: the lock order is enqueue key, IDs,
// counters, meta, then flows and events, so nothing that holds the meta
// row waits for a caller's transaction. The enqueue key is an advisory
// lock taken shared by an enqueue of at most 64 distinct IDs, which then
// locks each ID (exclusive advisory locks), and exclusive, alone, by a
// bigger one: such a batch waits for every enqueue in flight and holds
// off the next ones until it commits, and the server's lock table, shared
// by every session, never holds more than 65 advisory locks of one
// enqueue (docs/decisions/postgres-enqueue-lock-escalation.md). The turn
// then promotes the events that callers' transactions committed
// (arrivals) into their flows. docs/decisions/postgres-one-write-turn.md
// gives the measurements behind this choice and what fairness means with
// several claimants.
//
// # Schema
//
// The schema is the numbered migrations embedded from migrations/ (the
// migration module): 0001 the tables, 0002 the rotation's index, 0003
// OldestDue's index, 0004 the quarantine indexes on a column of their own,
// the events' fill factor and their flow checked per statement
// (docs/decisions/postgres-hot-updates.md), 0005 the console's paged reads,
// 0006 failure detail: the policy's schedule and retry-after cap in meta,
// the attempt history (attempts), and each flow's head enqueue tick with
// its index for OldestWaiting (docs/decisions/postgres-failure-detail.md),
// 0007 the life of an event: retention in meta, acked_at and the acked
// table Prune deletes through, the audit's tick index, paused flows, the
// sequence counters in flow_seqs and the arrivals of EnqueueTx, 0008
// destinations, 0009 the shard label, 0010 the operator's sorted pages off
// the claim path, 0011 the function settle_claim (below), 0012
// flows_rotation narrowed to the flows that joined the rotation, 0013
// settle_claim's check for two items of one flow made linear, 0014 meta's
// rules on the policy and the shard label checked by a trigger when those
// columns are written (docs/decisions/postgres-check-constraints.md).
// Open creates the schema
// (default "fairrelay_queue", WithSchema to choose) and runs the
// migrations past its version, each recording the version it reaches in
// schema_migrations, in one transaction under an advisory lock. The
// policy is recorded in meta when the schema is created (WithPolicy).
//
// # One call
//
// Claim, ClaimBatch, Settle, SettleBatch and SettleClaimBatch whose
// results are all successes are one call of settle_claim when nothing but
// the common case can happen: one round trip and one commit, the same
// statements run by the server. Anything else (a time regression, the
// rotation, destinations, arrivals, a failure result, two items of one
// flow, a used-up take-over, a hook) takes the general path: the
// statements sent from Go, in three round trips at most. Both leave the
// same rows (docs/decisions/postgres-server-side-transitions.md).
//
// # Wake-ups
//
// Enqueue, EnqueueBatch, Redrive, RedriveAll, ResumeFlow and an ack that
// makes a flow's next event its head send a pg_notify inside their transaction
// (none on rollback), at most one per WithNotifyInterval per Store, as River
// limits its insert notifications. Listen returns a Listener whose Wait
// returns on one; a relay on another machine sleeps on it, on NextDue and
// on its poll interval, whichever comes first. EnqueueTx sends one,
// unlimited, in the caller's transaction: the server delivers it at commit.
//
// # Crash injection
//
// WithHook installs a callback run at the queue.HookPoint values; a
// process that exits inside a transaction leaves the server to roll it
// back.
package pgqueuestore
