// Relayctl is the operator's command line for a fairrelay queue and receiver.
//
// It shows a live queue.db and receiver.db as tables for people and as JSON for
// scripts, tells why a flow is stuck, and redrives a quarantined event with an
// audited reason. Install it with
//
//	go install github.com/fairrelay/fairrelay/relayctl@latest
//
// Usage:
//
//	relayctl [--queue PATH] [--receiver PATH] COMMAND [flags]
//
// The commands are status (with --relay ADDR, a running relay's breaker and
// totals), flows (and flows pause, flows resume, flows set-weight), events,
// event (one event with its error text and attempt history), quarantined,
// redrive (one event, or every match with --all), audit, policy (and policy
// set, --retention included), enqueue (--at and --in schedule an event,
// docs/contract.md §7.9), prune (what the retention window no longer keeps;
// prune receiver), relay (deliver over HTTP or in process; --prune-every),
// receive (the receiver server; --retention), receiver totals, receiver
// conflicts, snapshot and web (the operator console in a browser, see
// docs/console.md); `relayctl help` lists them and README.md describes
// each one. Every write takes --now TICK; without it a write acts at the
// queue's clock mark, or, for a queue run in real time (its clock mark is Unix
// milliseconds; --clock), at this machine's clock, and a tick more than --skew
// ahead of that clock is refused (docs/contract.md §7.3). Durations are Go
// durations (30s, 250ms) on every flag; the global flags are accepted after the
// command too (docs/decisions/relayctl-durations.md). Exit status: 0 on
// success, 1 when the store refused the operation or could not be read, 2 on a
// usage error, 3 when relay --exit-when-idle ends with events it could not
// deliver (docs/decisions/relayctl-exit-status.md).
//
// Only enqueue may create a database: every other command refuses a path that
// does not exist instead of opening an empty one.
package main
