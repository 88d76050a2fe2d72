// Package queuestore is fairrelay's durable fair queue: one SQLite file
// (WAL, synchronous=FULL, BEGIN IMMEDIATE writes) holding flows of events,
// handed out one head per flow in fairness.MinServed order
// (docs/contract.md §2), with the options of docs/contract.md §7.1–§7.3: a
// recorded policy, lease extension and real time; and the life of an event
// of §7.9: scheduled events, the operator's pause, retention.
//
// # Events and flows
//
// Every event belongs to a flow and gets the flow's next sequence number
// (1, 2, 3 … with no holes) when it is enqueued. The head of a flow is its
// lowest event that is not acked. A head that is quarantined, in flight with
// a live lease, or pending with its backoff still running blocks the rest of
// its flow, and never any other flow.
//
// # The state machine of an event
//
//	Enqueue ──► pending ──Claim──► inflight ──Settle success──► acked (final)
//	              ▲  ▲                │  │
//	              │  └── Settle ──────┘  │ Settle failure with attempts == MaxAttempts,
//	              │      failure with    │ or a Claim finding the round's last
//	              │      attempts <      │ lease expired (reason "lease_expired")
//	              │      MaxAttempts     ▼
//	              └────── Redrive ── quarantined
//
//	inflight ──Claim after lease_until (take-over, attempts < MaxAttempts)──► inflight
//
// The retry waits the policy's Delay (available_at = now + Delay: the
// backoff, or its deterministic jitter). A
// redrive, on an operator's word, starts a new round: generation + 1,
// attempts 0, available at once, one audit row.
//
// A claim adds one to the event's generation, attempts and lifetime
// attempts, to the flow's served count and to the global ticket, and leases
// the event until now + Lease (Extend renews the lease while a handler
// runs). A settle must quote the generation of the
// claim: an older generation, or an event no longer in flight, is Stale; a
// settle at or after lease_until is Expired. Neither changes anything but
// the clock mark. A redrive starts a new round of MaxAttempts attempts.
//
// # Policy
//
// Lease, MaxAttempts, the backoff's base and cap, jitter and the claim's
// flow order are the queue's Policy, recorded in the file when it is
// created (WithPolicy, else DefaultPolicy: the constants Lease,
// MaxAttempts, BackoffBase, BackoffCap, no jitter, FairMinServed). Every
// process that opens the file uses the recorded policy; opening it with
// another one is ErrPolicyMismatch; SetPolicy changes it with an audit row.
// A version-1 file is migrated on Open and gets the default policy. A
// policy may also carry a retry schedule and a retry-after cap
// (docs/contract.md §7.8).
//
// # Failures
//
// A failure may be permanent (quarantined at once), ask for a retry-after
// (capped by the policy) and carry an error text (queue.ErrorText). Every
// failed attempt is a row of the event's history (the latest
// queue.MaxHistory): Event returns it with the current error text,
// Quarantined and QuarantinedPage the error that quarantined each event,
// Snapshot every row (Failures). OldestWaiting tells the enqueue tick of
// the oldest event not acked. See docs/contract.md §7.8.
//
// # Scheduled events, pause and retention
//
// An event enqueued with Event.NotBefore above the enqueue's tick waits for
// that tick as a backoff would, blocking only its own flow. PauseFlow keeps
// a flow's head from being claimed until ResumeFlow (a claim in flight
// settles or expires as usual; enqueues go on), each audited. With a
// policy's Retention, Prune deletes acked events (by their AckedAt) and
// audit rows older than the window, in batches through two indexes,
// never a pending, in-flight or quarantined event and never a flow's row;
// Prunable counts what it would delete. A file this build creates has
// auto_vacuum=INCREMENTAL and Prune gives the pages it frees back to the
// file system. See docs/contract.md §7.9 and docs/decisions/retention.md.
//
// # Schema
//
// The schema is the numbered migrations embedded from migrations/ (the
// migration module): 0001 version 1's tables, 0002 the policy, the
// rotation's columns and audit rows of every kind, 0003 the CHECK
// constraints without IN lists, 0004 the retry schedule and retry-after cap,
// the attempt history and each flow's head enqueue tick, 0005 each event's
// ack tick, the pause, the retention and the audit kinds of a pause. Open
// runs those past the file's version
// (every one for a new file), each recording the version it reaches in
// PRAGMA user_version, all in one transaction; a newer file is
// ErrSchemaVersion. The rotation's index follows the recorded policy, not
// the version.
//
// # Time
//
// Time is a clock.Tick handed in by the caller. Every write (Enqueue,
// EnqueueBatch, Claim, ClaimBatch, Settle, SettleBatch, Extend, ExtendBatch,
// Redrive, RedriveAll, SetPolicy, SetWeight, PauseFlow, ResumeFlow, Prune)
// checks, right after input validation: a tick
// that is negative or that a lease or backoff would overflow
// (queue.Policy.MaxTick) is ErrTickOverflow; a tick below the highest one
// recorded is ErrTimeRegression. It records its tick when it returns without
// error.
//
// Ticks in production: use real time. Open the store with
// WithRealTime(clock.Wall{}, skew) and hand every write clock.Wall{}.Now()
// (Unix milliseconds, read just before the call), with a Policy in
// milliseconds too (for example Lease 30000). The skew (for example 1000)
// absorbs writers that read the clock before they got the write turn: a
// tick up to skew below the mark is performed at the mark. A tick more than
// skew ahead of the wall clock is ErrTimeAhead, so one caller handing in
// seconds-as-milliseconds, or nanoseconds, is refused instead of moving the
// mark out of everyone's reach. Logical ticks (tests, experiments) need no
// option.
//
// After Expired: the claim's lease ran out. Stop working on the event and
// do not settle it again; it will be (or was) claimed again with a higher
// generation, and its next settle, by whoever holds that claim, counts.
// The receiver's idempotency makes a repeated delivery harmless. To avoid
// Expired, extend the lease (Extend, ExtendBatch) while the handler runs,
// well before LeaseUntil, and choose a Lease longer than a typical handler.
//
// NextDue tells the earliest tick at which a head becomes dispatchable, so
// that a relay sleeps until then instead of polling.
//
// # Limits
//
// IDs and flows are 1..MaxNameLen bytes of printable UTF-8; bodies are
// 1..MaxBodyLen bytes; reasons are 1..MaxReasonLen bytes of printable UTF-8.
// Names and reasons hold a non-space character and neither begin nor end
// with whitespace ("tenant-a " is not a second flow). Anything else is
// ErrInvalid, and changes nothing; a blank reason is also ErrEmptyReason.
//
// # Operators
//
// Redrive puts one quarantined event back; RedriveAll puts back every
// quarantined event that a RedriveFilter selects (all, one flow, one
// failure reason) with one reason, one audit row per event, in chunks of
// RedriveChunk per transaction; QuarantinedMatching is its dry run. Audit
// lists the redrive rows; AuditAll every row, policy changes, weights,
// pauses and resumes included. PauseFlow and ResumeFlow stop and restart
// the claims of one flow.
//
// # Cost
//
// A claim does not scan events or flows: the flows table keeps each flow's
// head and the tick from which it is dispatchable, and two partial indexes
// give the flows whose tick has come and, among the ready ones, the next in
// MinServed order. NextDue, OldestWaiting and RedriveAll are index-driven
// too; a failure's history row is written and trimmed through its primary
// key. See
// plan_test.go and BenchmarkClaimSettle.
//
// # Crash injection
//
// WithHook installs a callback run at the HookPoint values; the crashpoint
// package uses it to kill a child process at an exact point. This package
// does not import crashpoint.
package queuestore
