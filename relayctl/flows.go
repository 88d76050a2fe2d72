package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/fairrelay/fairrelay/queuestore"
)

// flowOrders are the --sort keys of `flows`, each with its comparison; ties
// always go to the smaller flow ID.
var flowOrders = map[string]func(a, b flowRow) int{
	"flow":    func(a, b flowRow) int { return 0 },
	"served":  func(a, b flowRow) int { return cmp.Compare(a.Served, b.Served) },        // next in line first
	"backlog": func(a, b flowRow) int { return cmp.Compare(b.Backlog, a.Backlog) },      // biggest first
	"ready":   func(a, b flowRow) int { return compareReady(a.ReadyTick, b.ReadyTick) }, // earliest first, none last
}

// eventStates are the states an event can be in.
var eventStates = []string{"pending", "inflight", "acked", "quarantined"}

// compareReady orders ready ticks, with "none" (nil) after every tick.
func compareReady(a, b *int64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return cmp.Compare(*a, *b)
}

// blockedWhy says why a flow's head holds back the rest of its flow at tick
// mark (docs/contract.md §2.2), or "" when it does not.
func blockedWhy(r flowRow, mark int64) string {
	if r.Paused {
		return "paused"
	}
	switch r.HeadState {
	case "quarantined":
		return "quarantined"
	case "inflight":
		if r.ReadyTick != nil && mark < *r.ReadyTick {
			return "inflight"
		}
	case "pending":
		if r.ReadyTick != nil && mark < *r.ReadyTick {
			return "backoff"
		}
	}
	return ""
}

func cmdFlows(e *env, args []string) (err error) {
	if len(args) > 0 {
		switch args[0] {
		case "set-weight":
			return cmdSetWeight(e, args[1:])
		case "pause", "resume":
			return cmdPause(e, args[0], args[1:])
		case "set-destination":
			return cmdSetDestination(e, args[1:])
		}
	}
	f := newFlags(e, "flows", "flows [--blocked] [--sort flow|served|backlog|ready] [--top N] [--json]",
		"Flows prints one row per flow: how often it was served, its head (lowest event\n"+
			"not acked), the head's state, the tick at which the head can next be claimed,\n"+
			"and the backlog (events not acked). BLOCKED says why a head holds its flow back\n"+
			"at the clock mark: paused (by an operator: 'relayctl flows pause'), quarantined,\n"+
			"inflight (a live lease) or backoff (a retry's wait, or an event scheduled later).\n\n"+
			"  relayctl flows pause FLOW --reason TEXT    stop claims of the flow (audited)\n"+
			"  relayctl flows resume FLOW --reason TEXT   let them go on (audited)\n"+
			"  relayctl flows set-weight FLOW WEIGHT --reason TEXT\n"+
			"  relayctl flows set-destination FLOW (NAME | --default) --reason TEXT").
		withQueue().withJSON()
	blocked := f.Bool("blocked", false, "only flows held back (paused, quarantined, inflight, backoff)")
	sortBy := f.String("sort", "flow", "order: flow (ID), served (least served first), backlog (largest first), ready (earliest first)")
	top := f.Int("top", 0, "show only the first `N` rows (0: all)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	order, ok := flowOrders[*sortBy]
	if !ok {
		return usagef("--sort %q: want flow, served, backlog or ready", *sortBy)
	}
	if *top < 0 {
		return usagef("--top %d: want 0 or more", *top)
	}
	q, err := e.readQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	st, err := q.Stats(e.ctx)
	if err != nil {
		return fmt.Errorf("read the clock mark: %w", err)
	}
	rows, err := q.Flows(e.ctx)
	if err != nil {
		return fmt.Errorf("read flows: %w", err)
	}
	pol, err := q.Policy(e.ctx)
	if err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	rot := pol.Fairness == string(queuestore.FairRotation)
	out := rows[:0]
	for _, r := range rows {
		r.Blocked = blockedWhy(r, st.ClockMark)
		if *blocked && r.Blocked == "" {
			continue
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b flowRow) int {
		return cmp.Or(order(a, b), cmp.Compare(a.Flow, b.Flow))
	})
	if *top > 0 && len(out) > *top {
		out = out[:*top]
	}
	if f.json {
		return writeJSON(e.stdout, nonNil(out))
	}
	if len(out) == 0 {
		if *blocked {
			fmt.Fprintln(e.stdout, "no blocked flows")
		} else {
			fmt.Fprintln(e.stdout, "no flows")
		}
		return nil
	}
	paused, routed := 0, false
	for _, r := range out {
		if r.Paused {
			paused++
		}
		routed = routed || r.Destination != ""
	}
	cols := []string{"FLOW", "SERVED", "HEAD", "STATE", "READY", "BACKLOG", "BLOCKED"}
	if rot {
		// Under the rotation policy (docs/contract.md §7.6) only: a
		// min_served queue's table keeps its columns.
		cols = append(cols, "WEIGHT", "POSITION")
	}
	if routed {
		// Only when a listed flow delivers to a registered destination
		// (docs/contract.md §7.11): "-" is the relay's own --to.
		cols = append(cols, "DESTINATION")
	}
	if paused > 0 {
		// Only when a listed flow is paused (docs/contract.md §7.9).
		cols = append(cols, "PAUSE REASON")
	}
	t := newTable(e.stdout, cols...)
	for _, r := range out {
		head, state, ready := "-", "-", "-"
		if r.HeadSeq != 0 {
			head, state = itoa(r.HeadSeq), r.HeadState
		}
		if r.ReadyTick != nil {
			ready = e.at(*r.ReadyTick)
		}
		cells := []string{r.Flow, itoa(r.Served), head, state, ready, itoa(r.Backlog), r.Blocked}
		if rot {
			pos := "-"
			if r.Position != 0 {
				pos = itoa(r.Position)
			}
			cells = append(cells, itoa(int64(max(r.Weight, 1))), pos)
		}
		if routed {
			cells = append(cells, r.Destination)
		}
		if paused > 0 {
			reason := "-"
			if r.Paused {
				reason = r.PauseReason
			}
			cells = append(cells, reason)
		}
		t.row(cells...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if paused > 0 {
		fmt.Fprintf(e.stderr, "%s paused: no claim picks them until 'relayctl flows resume FLOW --reason \"...\"'.\n", plural(paused, "flow"))
	}
	return nil
}

// cmdSetWeight is `flows set-weight FLOW WEIGHT --reason TEXT`.
func cmdSetWeight(e *env, args []string) (err error) {
	f := newFlags(e, "flows set-weight", "flows set-weight FLOW WEIGHT --reason TEXT [--now TICK]",
		"Set-weight sets a flow's weight (1..1000) and writes the reason into the audit\n"+
			"in the same transaction. Under the rotation policy a flow of weight w gets w\n"+
			"claims for every claim of a flow of weight 1, from its next claim on; under\n"+
			"min_served the weight is kept but does not change the order.").
		withQueue().withNow()
	reason := f.String("reason", "", "why the weight changes (required; kept in the audit)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 2:
		return usagef("want FLOW WEIGHT, got %d arguments", len(pos))
	case !f.isSet("reason"):
		return usagef("--reason is required: say why the weight changes (it is kept in the audit)")
	}
	w, perr := strconv.Atoi(pos[1])
	if perr != nil || w < queuestore.MinWeight || w > queuestore.MaxWeight {
		return usagef("WEIGHT %q: want an integer %d..%d", pos[1], queuestore.MinWeight, queuestore.MaxWeight)
	}
	q, err := e.openQueue(false)
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	now, err := currentTick(e.ctx, q, f.now)
	if err != nil {
		return err
	}
	if err := q.SetWeight(e.ctx, pos[0], w, *reason, now); err != nil {
		switch kindOf(err) {
		case kindNotFound:
			return fmt.Errorf("flow %q not found (run 'relayctl flows' for the list)", pos[0])
		case kindEmptyReason:
			return errors.New("the reason is empty: say why the weight changes (it is kept in the audit); nothing changed")
		case kindTimeRegression:
			return timeRegression(e, q, now)
		}
		return fmt.Errorf("set weight of %s: %w", pos[0], err)
	}
	fmt.Fprintf(e.stdout, "flow %s: weight %d at %s; reason kept in the audit\n", pos[0], w, e.when(now))
	return nil
}

func cmdEvents(e *env, args []string) (err error) {
	f := newFlags(e, "events", "events --flow F [--state STATE] [--json]",
		"Events prints a flow's events in sequence order with state, generation,\n"+
			"attempts in the current round, lifetime attempts, and the reason and error text\n"+
			"of the current failure (the error cut to 40 characters; --json and\n"+
			"'relayctl event ID' print it in full).").
		withQueue().withJSON()
	flow := f.String("flow", "", "the `FLOW` to list (required)")
	state := f.String("state", "", "only events in `STATE` (pending, inflight, acked, quarantined)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if !f.isSet("flow") {
		return usagef("--flow is required")
	}
	if *state != "" && !slices.Contains(eventStates, *state) {
		return usagef("--state %q: want pending, inflight, acked or quarantined", *state)
	}
	q, err := e.readQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	evs, err := q.FlowEvents(e.ctx, *flow)
	if err != nil && kindOf(err) != kindNotFound {
		return fmt.Errorf("read events of flow %q: %w", *flow, err)
	}
	if len(evs) == 0 {
		return fmt.Errorf("flow %q not found (run 'relayctl flows' for the list)", *flow)
	}
	if *state != "" {
		evs = slices.DeleteFunc(evs, func(ev eventRow) bool { return ev.State != *state })
	}
	if f.json {
		return writeJSON(e.stdout, nonNil(evs))
	}
	if len(evs) == 0 {
		fmt.Fprintf(e.stdout, "no %s events in flow %s\n", *state, *flow)
		return nil
	}
	t := newTable(e.stdout, "SEQ", "ID", "STATE", "GEN", "ATTEMPTS", "LIFETIME", "AVAILABLE", "LEASE", "REASON", "ERROR", "BODY")
	for _, ev := range evs {
		lease := "-"
		if ev.State == "inflight" {
			lease = e.at(ev.LeaseUntil)
		}
		avail := "-"
		if ev.State == "pending" {
			avail = e.at(ev.AvailableAt)
		}
		t.row(itoa(ev.Seq), ev.ID, ev.State, itoa(ev.Generation), itoa(int64(ev.Attempts)),
			itoa(int64(ev.LifetimeAttempts)), avail, lease, ev.Reason, short(ev.Error, errorShown), short(string(ev.Body), 40))
	}
	return t.flush()
}

func cmdQuarantined(e *env, args []string) (err error) {
	f := newFlags(e, "quarantined", "quarantined [--flow F] [--json]",
		"Quarantined prints every quarantined event: its flow, sequence number,\n"+
			"generation, lifetime attempts, and the reason and error text of the failure\n"+
			"that quarantined it (the error cut to 60 characters; --json and 'relayctl\n"+
			"event ID' print it in full). Each one blocks the rest of its flow until it\n"+
			"is redriven.").
		withQueue().withJSON()
	flow := f.String("flow", "", "only the quarantined events of `FLOW`")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	q, err := e.readQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	evs, err := q.Quarantined(e.ctx)
	if err != nil {
		return fmt.Errorf("read quarantined events: %w", err)
	}
	if f.isSet("flow") {
		evs = slices.DeleteFunc(evs, func(ev quarantinedRow) bool { return ev.Flow != *flow })
	}
	if f.json {
		return writeJSON(e.stdout, nonNil(evs))
	}
	if len(evs) == 0 {
		fmt.Fprintln(e.stdout, "no quarantined events")
		return nil
	}
	t := newTable(e.stdout, "ID", "FLOW", "SEQ", "GEN", "LIFETIME", "REASON", "ERROR")
	for _, ev := range evs {
		t.row(ev.ID, ev.Flow, itoa(ev.Seq), itoa(ev.Generation), itoa(int64(ev.LifetimeAttempts)), ev.Reason,
			short(ev.Error, quarantinedErrorShown))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stderr, "redrive one after fixing its cause: relayctl redrive ID --reason \"what was fixed\"")
	return nil
}

// The longest error text `events` and `quarantined` print in their tables,
// in runes (short; `quarantined` has fewer columns); --json and `event ID`
// print it whole.
const (
	errorShown            = 40
	quarantinedErrorShown = 60
)

// nonNil turns a nil slice into an empty one, so that --json prints [] and
// never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
