package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
)

func cmdRedrive(e *env, args []string) (err error) {
	f := newFlags(e, "redrive",
		"redrive EVENT_ID --reason TEXT [--generation N] [--now TICK]\n"+
			"       relayctl redrive --all-in-flow FLOW --reason TEXT [--now TICK]\n"+
			"       relayctl redrive --all [--flow FLOW] [--failed-with REASON] --reason TEXT [--now TICK] [--json]\n"+
			"       relayctl redrive --all [--flow FLOW] [--failed-with REASON] --dry-run [--json]",
		"Redrive puts a quarantined event back at the head of its flow for a new round\n"+
			"of attempts, and writes the reason into the audit in the same transaction.\n"+
			"Without --generation it uses the generation it has just read, so an event that\n"+
			"changes in between is refused, never redriven twice. --all-in-flow redrives the\n"+
			"flow's quarantined head. --all redrives every quarantined event that matches\n"+
			"--flow and --failed-with (both optional), with one reason and one audit row\n"+
			"per event, 1000 events a transaction; --dry-run lists them and changes nothing.").
		withQueue().withNow().withJSON()
	reason := f.String("reason", "", "why the event may go again, e.g. what was fixed (required; kept in the audit)")
	gen := f.Int64("generation", 0, "redrive only if the event is still at generation `N`")
	allInFlow := f.String("all-in-flow", "", "redrive the quarantined head of `FLOW` instead of one event ID")
	all := f.Bool("all", false, "redrive every quarantined event matching --flow and --failed-with")
	var filter redriveFilter
	f.StringVar(&filter.Flow, "flow", "", "with --all: only the quarantined event of `FLOW`")
	f.StringVar(&filter.Reason, "failed-with", "", "with --all: only events whose last failure reason is `REASON` (exactly)")
	dryRun := f.Bool("dry-run", false, "with --all: list what would be redriven; change nothing")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	byFlow := f.isSet("all-in-flow")
	if *all {
		switch {
		case len(pos) > 0:
			return usagef("give either EVENT_ID or --all, not both")
		case byFlow:
			return usagef("give either --all-in-flow or --all, not both (--all --flow FLOW selects one flow)")
		case f.isSet("generation"):
			return usagef("--generation goes with EVENT_ID, not with --all")
		case !*dryRun && !f.isSet("reason"):
			return usagef("--reason is required: say why the events may go again (it is kept in the audit), or give --dry-run")
		}
		return redriveAll(e, f, filter, *reason, *dryRun)
	}
	for _, name := range []string{"flow", "failed-with", "dry-run", "json"} {
		if f.isSet(name) {
			return usagef("--%s goes with --all", name)
		}
	}
	switch {
	case len(pos) > 1:
		return usagef("one EVENT_ID at a time, got %d arguments", len(pos))
	case byFlow && len(pos) == 1:
		return usagef("give either EVENT_ID or --all-in-flow, not both")
	case !byFlow && len(pos) == 0:
		return usagef("missing EVENT_ID (or --all-in-flow FLOW); --all redrives every quarantined event")
	case byFlow && f.isSet("generation"):
		return usagef("--generation goes with EVENT_ID, not with --all-in-flow")
	case !f.isSet("reason"):
		return usagef("--reason is required: say why the event may go again (it is kept in the audit)")
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
	if !byFlow {
		return redriveOne(e, q, pos[0], *gen, f.isSet("generation"), *reason, now)
	}
	evs, err := q.FlowEvents(e.ctx, *allInFlow)
	if err != nil && kindOf(err) != kindNotFound {
		return fmt.Errorf("read events of flow %q: %w", *allInFlow, err)
	}
	if len(evs) == 0 {
		return fmt.Errorf("flow %q not found (run 'relayctl flows' for the list)", *allInFlow)
	}
	stuck := slices.DeleteFunc(slices.Clone(evs), func(ev eventRow) bool { return ev.State != "quarantined" })
	if len(stuck) == 0 {
		return fmt.Errorf("flow %q has no quarantined event", *allInFlow)
	}
	for _, ev := range stuck {
		if err := redriveOne(e, q, ev.ID, 0, false, *reason, now); err != nil {
			return err
		}
	}
	return nil
}

// redriveOne redrives event id at generation gen (or, when genSet is false,
// at the generation it reads first) and prints what changed.
func redriveOne(e *env, q *queueDB, id string, gen int64, genSet bool, reason string, now clock.Tick) error {
	before, err := q.Event(e.ctx, id)
	if err != nil {
		if kindOf(err) == kindNotFound {
			return fmt.Errorf("event %q not found", id)
		}
		return fmt.Errorf("read event %q: %w", id, err)
	}
	if !genSet {
		gen = before.Generation
	}
	if err := q.Redrive(e.ctx, id, gen, reason, now); err != nil {
		return explainRedrive(e, q, before, gen, now, err)
	}
	after, err := q.Event(e.ctx, id)
	if err != nil {
		return fmt.Errorf("redrive of %q done, but reading it back failed: %w", id, err)
	}
	fmt.Fprintf(e.stdout, "redrove %s (flow %s, seq %d): generation %d -> %d, %s at %s; reason kept in the audit\n",
		after.ID, after.Flow, after.Seq, before.Generation, after.Generation, after.State, e.when(clock.Tick(performedAt(after, now))))
	return nil
}

// explainRedrive turns a refused redrive into plain words, reading the event
// again to say what it is now.
func explainRedrive(e *env, q *queueDB, before eventRow, gen int64, now clock.Tick, err error) error {
	cur, rerr := q.Event(e.ctx, before.ID)
	if rerr != nil {
		cur = before
	}
	switch kindOf(err) {
	case kindNotQuarantined:
		return fmt.Errorf("event %s is not quarantined (state %s): only a quarantined event can be redriven", cur.ID, cur.State)
	case kindStaleGeneration:
		return fmt.Errorf("event %s is at generation %d, not %d: it changed since it was read; nothing was redriven (check it with 'relayctl events --flow %s')",
			cur.ID, cur.Generation, gen, cur.Flow)
	case kindEmptyReason:
		return errors.New("the reason is empty: say why the event may go again (it is kept in the audit); nothing was redriven")
	case kindTimeRegression:
		return timeRegression(e, q, now)
	case kindNotFound:
		return fmt.Errorf("event %q not found", before.ID)
	case kindInvalid:
		return fmt.Errorf("refused, nothing was redriven: %w", err)
	}
	return fmt.Errorf("redrive %s: %w", before.ID, err)
}

// timeRegression explains ErrTimeRegression with the queue's current mark;
// for a queue in real time (its mark is Unix milliseconds) it says how far
// the mark is from this machine's clock.
func timeRegression(e *env, q *queueDB, now clock.Tick) error {
	st, err := q.Stats(e.ctx)
	if err != nil {
		return fmt.Errorf("tick %d is below the queue's clock mark: logical time never goes back; nothing changed", now)
	}
	mark := clock.Tick(st.ClockMark)
	if mark < wallFloor || e.clock.wall == nil {
		return fmt.Errorf("tick %d is below the queue's clock mark %d: logical time never goes back; nothing changed (leave out --now to act at the mark)", now, mark)
	}
	msg := fmt.Sprintf("tick %d (%s) is more than the skew below the queue's clock mark %d (%s); nothing changed",
		now, wallTime(now), mark, wallTime(mark))
	if wall := e.clock.wall.Now(); mark > wall+e.clock.skew {
		msg += fmt.Sprintf(". The mark is %d ms ahead of this machine's clock: a write used a tick from the future, or this clock is behind (check its time sync); writes at this clock are refused until it reaches the mark", mark-wall)
	}
	return errors.New(msg)
}

func cmdAudit(e *env, args []string) (err error) {
	f := newFlags(e, "audit", "audit [--event ID] [--kind KIND] [--json]",
		"Audit prints every operator action in the order it happened: each redrive\n"+
			"(the tick, the event, the generation the redrive gave it, the reason) and each\n"+
			"policy change, weight change, pause and resume of a flow (the tick, what\n"+
			"changed, the reason).").
		withQueue().withJSON()
	event := f.String("event", "", "only the redrives of event `ID`")
	kind := f.String("kind", "", "only the rows of `KIND`: redrive, policy, weight, pause, resume, destination, destination_pause, destination_resume or flow_destination")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	switch *kind {
	case "", "redrive", "policy", "weight", "pause", "resume", "destination", "destination_pause", "destination_resume", "flow_destination":
	default:
		return usagef("--kind %q: want redrive, policy, weight, pause, resume, destination, destination_pause, destination_resume or flow_destination", *kind)
	}
	q, err := e.readQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	rows, err := q.Audit(e.ctx)
	if err != nil {
		return fmt.Errorf("read the audit: %w", err)
	}
	if f.isSet("event") {
		rows = slices.DeleteFunc(rows, func(r auditRow) bool { return r.EventID != *event })
	}
	if *kind != "" {
		rows = slices.DeleteFunc(rows, func(r auditRow) bool { return r.Kind != *kind })
	}
	if f.json {
		return writeJSON(e.stdout, nonNil(rows))
	}
	if len(rows) == 0 {
		if *kind != "" && *kind != "redrive" {
			fmt.Fprintf(e.stdout, "no %s changes\n", *kind)
			return nil
		}
		fmt.Fprintln(e.stdout, "no redrives")
		return nil
	}
	// Redrives only: the table of a queue that never had another kind of
	// row. Otherwise a KIND column and what each other row changed.
	if !slices.ContainsFunc(rows, func(r auditRow) bool { return r.Kind != "redrive" }) {
		t := newTable(e.stdout, "TICK", "EVENT", "GENERATION", "REASON")
		for _, r := range rows {
			t.row(e.at(r.Tick), r.EventID, itoa(r.Generation), r.Reason)
		}
		return t.flush()
	}
	t := newTable(e.stdout, "TICK", "KIND", "EVENT", "GENERATION", "REASON", "CHANGE")
	for _, r := range rows {
		gen := ""
		if r.Kind == "redrive" {
			gen = itoa(r.Generation)
		}
		t.row(e.at(r.Tick), r.Kind, r.EventID, gen, r.Reason, r.Change)
	}
	return t.flush()
}

// performedAt is the tick a redrive was performed at: the event's available
// tick once it is pending again. In real time that is the clock mark when
// now was a little below it (docs/contract.md §7.3); otherwise it is now.
func performedAt(after eventRow, now clock.Tick) int64 {
	if after.State == "pending" && after.AvailableAt > int64(now) {
		return after.AvailableAt
	}
	return int64(now)
}
