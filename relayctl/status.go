package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/relay"
)

// statusReport is what `status --json` prints.
type statusReport struct {
	Queue    string          `json:"queue"`
	Stats    statsRow        `json:"stats"`
	Receiver *receiverReport `json:"receiver,omitempty"`
}

// relayStatusReport is what `status --relay ADDR --json` prints.
type relayStatusReport struct {
	Relay relayStatus `json:"relay"`
}

type receiverReport struct {
	Path      string     `json:"path"`
	Totals    []totalRow `json:"totals"`
	Conflicts int        `json:"conflicts"`
}

// relayStatus is what a running 'relayctl relay --metrics ADDR' serves at
// /status, and what 'relayctl status --relay ADDR' reads and shows.
type relayStatus struct {
	Queue   string        `json:"queue"`   // the relay's --queue (no password)
	To      string        `json:"to"`      // where it delivers (no user info)
	Started time.Time     `json:"started"` // when the relay started
	Breaker breakerReport `json:"breaker"`
	Totals  relayTotals   `json:"totals"`
	// Destinations are the relay's destinations (docs/contract.md §7.11)
	// with their breakers and this relay's counts, sorted by name, the
	// default destination ("") first; left out when the default is the only
	// one (Breaker and Totals are all there is).
	Destinations []destinationReport `json:"destinations,omitempty"`
}

// destinationReport is relay.DestinationStatus in the JSON of /status.
type destinationReport struct {
	Name      string        `json:"name"`  // "" for the default destination
	Label     string        `json:"label"` // its metric label (relay.DestinationLabel)
	Breaker   breakerReport `json:"breaker"`
	Delivered int64         `json:"delivered"` // acked, by this relay since it started
	Failed    int64         `json:"failed"`    // failed deliveries settled (retry scheduled or quarantined)
	InFlight  int           `json:"in_flight"` // this relay's handlers running for it now
}

// breakerReport is relay.BreakerState in the JSON of /status.
type breakerReport struct {
	State               string     `json:"state"`           // closed, open or probing
	Since               *time.Time `json:"since,omitempty"` // when it entered State (none: closed since the start)
	ConsecutiveFailures int        `json:"consecutive_failures"`
	NextProbe           *time.Time `json:"next_probe,omitempty"` // while open
	LastReason          string     `json:"last_reason,omitempty"`
	LastError           string     `json:"last_error,omitempty"`
	Opens               int64      `json:"opens"`  // times it opened since the relay started
	Probes              int64      `json:"probes"` // probes claimed since the relay started
}

// relayTotals is relay.Totals in the JSON of /status and in the relay's
// end summary: every claim is exactly one of Delivered, Retried,
// Quarantined, LeasesLost, SettleErrors or InFlight.
type relayTotals struct {
	Claimed      int64 `json:"claimed"`
	Delivered    int64 `json:"delivered"`   // acknowledged by the receiver, settled acked
	Retried      int64 `json:"retried"`     // failed, a retry scheduled
	Quarantined  int64 `json:"quarantined"` // failed for the last time, or permanently
	Permanent    int64 `json:"permanent"`   // of Quarantined: a permanent refusal
	LeasesLost   int64 `json:"leases_lost"` // lost before the settle, or settled stale or expired
	SettleErrors int64 `json:"settle_errors"`
	InFlight     int64 `json:"in_flight"`
}

func totalsOf(t relay.Totals) relayTotals {
	return relayTotals{
		Claimed: t.Claimed, Delivered: t.Delivered, Retried: t.Retried,
		Quarantined: t.Quarantined, Permanent: t.Permanent, LeasesLost: t.LeasesLost,
		SettleErrors: t.SettleErrors, InFlight: t.InFlight,
	}
}

func newRelayStatus(queue, to string, started time.Time, b relay.BreakerState, t relay.Totals, ds []relay.DestinationStatus) relayStatus {
	st := relayStatus{Queue: queue, To: to, Started: started, Breaker: breakerOf(b), Totals: totalsOf(t)}
	if len(ds) > 1 || len(ds) == 1 && ds[0].Name != "" {
		st.Destinations = make([]destinationReport, len(ds))
		for i, d := range ds {
			st.Destinations[i] = destinationReport{Name: d.Name, Label: d.Label, Breaker: breakerOf(d.Breaker),
				Delivered: d.Delivered, Failed: d.Failed, InFlight: d.InFlight}
		}
	}
	return st
}

func breakerOf(b relay.BreakerState) breakerReport {
	br := breakerReport{
		State: b.State, ConsecutiveFailures: b.ConsecutiveFailures,
		LastReason: b.LastReason, LastError: b.LastError, Opens: b.Opens, Probes: b.Probes,
	}
	if !b.Since.IsZero() {
		since := b.Since
		br.Since = &since
	}
	if !b.NextProbe.IsZero() && b.State != relay.BreakerClosed {
		np := b.NextProbe
		br.NextProbe = &np
	}
	return br
}

// summary is the relay's end line: "200 delivered, 12 retried, 0
// quarantined, 0 leases lost, 0 settle errors (212 attempts)"; a
// permanent refusal and a claim still in flight are named when there are
// any.
func (t relayTotals) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d delivered, %d retried, %d quarantined", t.Delivered, t.Retried, t.Quarantined)
	if t.Permanent > 0 {
		fmt.Fprintf(&b, " (%d permanent)", t.Permanent)
	}
	fmt.Fprintf(&b, ", %d leases lost, %d settle errors", t.LeasesLost, t.SettleErrors)
	if t.InFlight > 0 {
		fmt.Fprintf(&b, ", %d in flight", t.InFlight)
	}
	fmt.Fprintf(&b, " (%d attempts)", t.Claimed)
	return b.String()
}

func cmdStatus(e *env, args []string) (err error) {
	f := newFlags(e, "status", "status [--json] [--receiver PATH] | status --relay ADDR [--json]",
		"Status shows the queue's clock mark, global ticket, number of flows, events by\n"+
			"state, quarantined count and paused flows, then the receiver's totals and conflicts count.\n"+
			"--relay ADDR shows instead a running relay's breaker and totals, and with\n"+
			"destinations each destination's breaker and this relay's counts: the /status of\n"+
			"'relayctl relay --metrics ADDR' (ADDR is host:port or the metrics URL it logged).").
		withQueue().withReceiver(true).withJSON()
	relayAddr := f.String("relay", "", "show the running relay at `ADDR` (its --metrics address) instead of the databases")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if f.isSet("relay") {
		if *relayAddr == "" {
			return usagef("--relay is empty: give the relay's --metrics address (host:port)")
		}
		st, err := readRelayStatus(e.ctx, *relayAddr)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, relayStatusReport{Relay: *st})
		}
		return printRelayStatus(e, *st)
	}
	var rep statusReport
	q, err := e.readQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	rep.Queue = shown(e.queuePath)
	if rep.Stats, err = q.Stats(e.ctx); err != nil {
		return fmt.Errorf("read queue stats: %w", err)
	}
	if e.receiverPath != "" {
		var r *receiverDB
		if r, err = e.readReceiver(true); err != nil {
			return err
		}
		defer closeWith(r, &err)
		if rep.Receiver, err = readReceiverReport(e, r); err != nil {
			return err
		}
	}
	if f.json {
		return writeJSON(e.stdout, rep)
	}
	return printStatus(e, rep)
}

// relayStatusURL is the /status URL of a relay whose --metrics address is
// addr: host:port, or an http(s) URL such as the logged metrics URL.
func relayStatusURL(addr string) string {
	if !strings.HasPrefix(addr, "http://") && !strings.HasPrefix(addr, "https://") {
		addr = "http://" + addr
	}
	addr = strings.TrimSuffix(strings.TrimSuffix(addr, "/"), "/metrics")
	return strings.TrimSuffix(addr, "/status") + "/status"
}

// relayStatusTimeout bounds the read of a relay's /status.
const relayStatusTimeout = 10 * time.Second

// readRelayStatus GETs a running relay's /status.
func readRelayStatus(ctx context.Context, addr string) (*relayStatus, error) {
	u := relayStatusURL(addr)
	ctx, cancel := context.WithTimeout(ctx, relayStatusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, usagef("--relay: %s", relay.RedactURLs(err.Error()))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the relay's status: %s (is 'relayctl relay --metrics %s' running?)",
			relay.RedactURLs(err.Error()), relay.RedactURLs(addr))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the relay's status at %s: %w", relay.RedactURLs(u), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the relay's status at %s: %s (a relay older than /status, or not a relay)", relay.RedactURLs(u), resp.Status)
	}
	var st relayStatus
	if err := json.Unmarshal(body, &st); err != nil || st.Breaker.State == "" {
		return nil, fmt.Errorf("read the relay's status at %s: not a relay's status (%.80q)", relay.RedactURLs(u), body)
	}
	return &st, nil
}

func printRelayStatus(e *env, st relayStatus) error {
	t := newTable(e.stdout, "RELAY", st.To)
	t.row("queue", st.Queue)
	t.row("started", st.Started.UTC().Format(time.RFC3339))
	b := st.Breaker
	state := b.State
	if b.Since != nil {
		state += " since " + b.Since.UTC().Format(time.RFC3339)
	}
	t.row("breaker", state)
	if b.NextProbe != nil {
		t.row("next probe", b.NextProbe.UTC().Format(time.RFC3339))
	}
	t.row("consecutive failures", itoa(int64(b.ConsecutiveFailures)))
	if b.LastReason != "" || b.LastError != "" {
		t.row("last failure", strings.TrimSpace(b.LastReason+": "+b.LastError))
	}
	t.row("breaker opens", itoa(b.Opens))
	t.row("probes", itoa(b.Probes))
	tt := st.Totals
	t.row("attempts", itoa(tt.Claimed))
	t.row("delivered", itoa(tt.Delivered))
	t.row("retried", itoa(tt.Retried))
	q := itoa(tt.Quarantined)
	if tt.Permanent > 0 {
		q += fmt.Sprintf(" (%d permanent)", tt.Permanent)
	}
	t.row("quarantined", q)
	t.row("leases lost", itoa(tt.LeasesLost))
	t.row("settle errors", itoa(tt.SettleErrors))
	t.row("in flight", itoa(tt.InFlight))
	if err := t.flush(); err != nil {
		return err
	}
	if len(st.Destinations) > 0 {
		fmt.Fprintln(e.stdout)
		t = newTable(e.stdout, "DESTINATION", "BREAKER", "SINCE", "NEXT PROBE", "IN A ROW", "LAST FAILURE", "DELIVERED", "FAILED", "IN FLIGHT")
		for _, d := range st.Destinations {
			b := d.Breaker
			since, next := "-", "-"
			if b.Since != nil {
				since = b.Since.UTC().Format(time.RFC3339)
			}
			if b.NextProbe != nil {
				next = b.NextProbe.UTC().Format(time.RFC3339)
			}
			t.row(d.Label, b.State, since, next, itoa(int64(b.ConsecutiveFailures)), short(b.LastReason, 40),
				itoa(d.Delivered), itoa(d.Failed), itoa(int64(d.InFlight)))
		}
		if err := t.flush(); err != nil {
			return err
		}
		for _, d := range st.Destinations {
			if d.Name != "" && d.Breaker.State != relay.BreakerClosed {
				fmt.Fprintf(e.stderr, "The breaker of destination %s is %s (%s): the relay probes it and resumes it by itself; the other destinations go on.\n", d.Name, d.Breaker.State, d.Breaker.LastReason)
			}
		}
	}
	if b.State != relay.BreakerClosed {
		fmt.Fprintf(e.stderr, "The breaker is %s: the destination fails (%s); the relay probes it and resumes by itself.\n", b.State, b.LastReason)
	}
	if tt.Quarantined > 0 {
		fmt.Fprintf(e.stderr, "%d quarantined by this relay: run 'relayctl quarantined' to see why.\n", tt.Quarantined)
	}
	return nil
}

func readReceiverReport(e *env, r *receiverDB) (*receiverReport, error) {
	rr := &receiverReport{Path: shown(e.receiverPath)}
	var err error
	if rr.Totals, err = r.Totals(e.ctx); err != nil {
		return nil, fmt.Errorf("read receiver totals: %w", err)
	}
	cs, err := r.Conflicts(e.ctx)
	if err != nil {
		return nil, fmt.Errorf("read receiver conflicts: %w", err)
	}
	rr.Conflicts = len(cs)
	return rr, nil
}

func printStatus(e *env, rep statusReport) error {
	t := newTable(e.stdout, "QUEUE", rep.Queue)
	st := rep.Stats
	t.row("clock mark", e.at(st.ClockMark))
	t.row("global ticket", itoa(st.GlobalTicket))
	t.row("flows", itoa(st.Flows))
	c := st.EventsByState
	t.row("events", fmt.Sprintf("pending %d, inflight %d, acked %d, quarantined %d", c.Pending, c.Inflight, c.Acked, c.Quarantined))
	t.row("quarantined", itoa(st.Quarantined))
	t.row("paused flows", itoa(st.PausedFlows))
	if r := rep.Receiver; r != nil {
		var sum int64
		for _, tr := range r.Totals {
			sum += tr.Total
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
		t = newTable(e.stdout, "RECEIVER", r.Path)
		t.row("flows", itoa(int64(len(r.Totals))))
		t.row("sum of totals", itoa(sum))
		t.row("conflicts", itoa(int64(r.Conflicts)))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if st.Quarantined > 0 {
		fmt.Fprintf(e.stderr, "%d quarantined: run 'relayctl quarantined' to see why.\n", st.Quarantined)
	}
	if st.PausedFlows > 0 {
		fmt.Fprintf(e.stderr, "%s paused: run 'relayctl flows --blocked' to see which and why.\n", plural64(st.PausedFlows, "flow"))
	}
	return nil
}
