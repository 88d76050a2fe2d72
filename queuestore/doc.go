// Package queuestore is fairrelay's durable fair queue: one SQLite file
// (WAL, synchronous=FULL, BEGIN IMMEDIATE writes) holding flows of events,
// handed out one head per flow in fairness.MinServed order (SPEC §2).
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
// The retry waits Backoff(attempts) ticks (available_at = now + Backoff). A
// redrive, on an operator's word, starts a new round: generation + 1,
// attempts 0, available at once, one audit row.
//
// A claim adds one to the event's generation, attempts and lifetime
// attempts, to the flow's served count and to the global ticket, and leases
// the event until now + Lease. A settle must quote the generation of the
// claim: an older generation, or an event no longer in flight, is Stale; a
// settle at or after lease_until is Expired. Neither changes anything but
// the clock mark. A redrive starts a new round of MaxAttempts attempts.
//
// # Time
//
// Time is a clock.Tick handed in by the caller. Every write (Enqueue,
// EnqueueBatch, Claim, ClaimBatch, Settle, SettleBatch, Redrive) refuses a
// tick below the highest one recorded (ErrTimeRegression, checked right
// after input validation) and records its tick when it returns without
// error. A new store's mark is 0, so negative ticks are always refused.
//
// # Limits
//
// IDs and flows are 1..MaxNameLen bytes of printable UTF-8; bodies are
// 1..MaxBodyLen bytes; reasons are 1..MaxReasonLen bytes of printable UTF-8.
// Anything else is ErrInvalid, and changes nothing.
//
// # Cost
//
// A claim does not scan events or flows: the flows table keeps each flow's
// head and the tick from which it is dispatchable, and two partial indexes
// give the flows whose tick has come and, among the ready ones, the next in
// MinServed order. See plan_test.go and BenchmarkClaimSettle.
//
// # Crash injection
//
// WithHook installs a callback run at the HookPoint values; the crashpoint
// package uses it to kill a child process at an exact point. This package
// does not import crashpoint.
package queuestore
