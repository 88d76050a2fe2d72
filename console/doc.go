// Package console is fairrelay's operator console: server-rendered web pages
// over a queue and a receiver of either backend (it takes the interfaces
// of the queue and receiver modules, and imports no store) for people who
// would rather look than read. relayctl stays the command line; `relayctl
// web` serves this handler.
//
// # Pages
//
// The overview (counts by state, quarantined events by reason, the clock
// mark and the retry policy, and three inline SVG charts: the backlog of the
// busiest flows, the served turns per flow, events by state); flows
// (prefix search by name, sorted by name, backlog, served or blocked first,
// paged through an index so that a page costs the same at 100,000 flows);
// one flow and one event (its events, the head, attempts, lease, reason,
// the error text and attempt history of its failures, audit rows);
// quarantined events filtered by flow and reason, with their error texts,
// each redriven with a required reason; the audit, paged; the receiver's totals
// and conflicts.
//
// # Security
//
// Every write is a POST that must carry the operator's token (a form field
// or an Authorization: Bearer header, compared in constant time) and pass a
// CSRF check: a double-submit cookie whose value the form repeats, and the
// browser's Sec-Fetch-Site/Origin headers (net/http's
// CrossOriginProtection). A write asked for with GET changes nothing. A
// console without a token is read-only. With Options.ProtectReads every page
// needs the token too (a sign-in sets a session cookie, and sends the
// browser back only to a path on the console); set it whenever the
// console listens beyond loopback. The console answers only loopback host
// names and Options.AllowedHosts (421 otherwise), so that a page of another
// site whose name points at this machine (DNS rebinding) reads nothing. Input is checked by the stores' rules
// and their refusals are shown in plain words; internal errors show a
// reference only, the detail goes to the server log. Pages carry a strict
// Content-Security-Policy: nothing is loaded from anywhere else.
//
// See docs/console.md for deploying it behind a reverse proxy.
package console
