// Package relay is fairrelay's relay runtime (docs/contract.md §7.4, §7.5):
// a long-running loop that claims events from a queue in the queue's fair
// order, runs a Handler on each with bounded concurrency, keeps their leases
// alive while the handlers run, and settles their results in batches.
//
// A program opens a queue store, builds a Relay with New and calls Run
// until its context ends:
//
//	q, _ := queuestore.Open(path, queuestore.WithRealTime(clock.Wall{}, 1000))
//	r, _ := relay.New(q, handler, relay.Options{Concurrency: 16})
//	err := r.Run(ctx)
//
// RunUntilIdle is the same run that returns once the queue is idle (the
// rule of relayctl's --exit-when-idle), nil when everything was delivered.
// JSONHandler writes a typed handler, Producer enqueues at its clock's tick
// (scheduled events with In and At), and Options.PruneEvery runs the queue's
// retention (docs/relay-library.md is the how-to).
//
// # The handler contract
//
// The handler gets the Event (ID, flow, sequence number, body, attempt,
// generation) and a context. It returns nil for success, an error made by
// Fail to fail with a reason, or any other error to fail with ReasonHandler;
// a panic fails with ReasonPanic and never stops the relay. FailPermanent
// quarantines the event at once; FailDestination says the destination, not
// the event, is at fault; Failure.WithRetryAfter asks for a least wait
// (docs/contract.md §7.8). Every failure's error text is settled with it,
// user info in URLs redacted (RedactURLs). The context is cancelled with
// cause ErrLeaseLost when the lease is lost, and with ErrShutdown when the
// shutdown grace period ends.
//
// # The breaker
//
// Consecutive destination failures (Options.Breaker.Threshold, from at
// least two flows when two are in flight) open the relay's breaker: it then
// claims nothing but one event at each probe time (doubling from MinProbe
// up to MaxProbe, or a failure's RetryAfter), so that while the destination
// is down no flow is charged more than the probes' attempts. A probe that
// gets an answer closes it and delivery resumes by itself. Relay.Breaker
// tells its state; Relay.Totals counts what became of every claim.
//
// # Claims and leases
//
// The relay claims with ClaimBatch, at most min(Options.Batch, free handler
// slots) at a time, and runs the claims in the order the queue gave. Freed
// slots and finished results wait up to Options.Linger for others, so that
// claims and settles share transactions. When the queue is a SettleClaimer
// (the SettleClaimBatch of queuestore and pgqueuestore), the settle of the
// finished results and the claim for the slots they freed are one call and
// one commit. The handlers of one claim call start together, as one Wave
// (WaveOf), which a group-committing receiver can commit at once. It
// extends a lease, with one ExtendBatch for every lease due, once a third
// of the lease (rounded up, at least one tick) is left, so a handler may
// run for many leases and the event is still delivered once. An extension
// answered stale or expired, or a lease that ran out before it could be
// extended, loses the claim: the handler's context is cancelled and its
// result is never settled (the queue hands the event out again).
//
// Two handlers of one flow never run at once. The queue hands out a flow
// only when its head is not in flight under a live lease, so a flow claimed
// again while its handler still runs means that handler's lease was lost:
// the new claim waits (parked, its lease extended, one handler slot taken)
// until the old handler returns.
//
// # Waiting
//
// After a claim that returned fewer events than asked, the relay asks the
// queue's NextDue and sleeps until that tick, until Notify (work enqueued by
// the same process) or until Options.Poll has passed (work enqueued by other
// processes), whichever comes first. An idle relay makes one NextDue call
// per Poll interval and nothing else.
//
// # Time
//
// Options.Clock defaults to clock.Wall: ticks are Unix milliseconds, and the
// queue should be opened with queuestore.WithRealTime. A MovingSource, such
// as ManualClock, gives logical time for tests: the relay then waits for
// ticks by watching the clock move.
//
// # Delivery over HTTP
//
// NewHTTP returns a Handler that posts each event as a Standard Webhooks
// request (package webhook) and maps the answer's status, or the transport's
// error, to success or a classified failure (permanent, event or
// destination, with Retry-After honoured on 429 and 503); see HTTP.
//
// # Destinations
//
// With a queue that knows several destinations (docs/contract.md §7.11; a
// DestinationQueue, as both stores are), NewDestinations returns a Handler
// that delivers each event to its flow's destination, and the relay gives
// every destination its own breaker and Options.DestinationSlots handler
// slots of its own, leaving the flows of a destination whose breaker is
// open out of its claims: a destination that is slow or down never takes
// the others' capacity (docs/runtime.md "Destinations").
//
// # Metrics
//
// With Options.Metrics set, the relay registers Prometheus collectors named
// fairrelay_*, every series present from the first scrape: claims, settles
// by outcome and reason (a bounded set), lease extensions by outcome,
// leases lost, handler duration, handlers in flight, queue errors, the
// breaker's state, openings and probes, and, read from the queue at scrape
// time, the backlog, the quarantined events, the paused flows, the age of the oldest due head
// and of the oldest waiting event (a queue.Waiter), and the rows that
// retention passes pruned.
//
// # Logs
//
// Each failed delivery is logged at WARN with its event, flow, attempt,
// reason and error, at most a few lines a second per reason, the lines left
// out counted in a later line; the breaker's transitions are logged too
// (docs/runtime.md "Logs").
package relay
