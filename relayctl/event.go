package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"
)

// cmdEvent is `event ID`: one event in full, with the history of its failed
// attempts (docs/contract.md §7.8).
func cmdEvent(e *env, args []string) (err error) {
	f := newFlags(e, "event", "event ID [--json]",
		"Event prints one event in full: its flow and sequence number, state, generation,\n"+
			"attempts, when it is available (or scheduled), leased until or was acked, the reason and error text of its\n"+
			"current failure, its body, and the history of its failed attempts (the latest\n"+
			"10, oldest first: tick, generation, attempt, outcome, reason, error text). A\n"+
			"redrive keeps the history. --json prints every field in full.").
		withQueue().withJSON()
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("the event ID is required: relayctl event ID")
	case len(pos) > 1:
		return usagef("unexpected argument %q (one event ID at a time)", pos[1])
	}
	id := pos[0]
	q, err := e.readQueue()
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	ev, err := q.EventDetail(e.ctx, id)
	if kindOf(err) == kindNotFound {
		return fmt.Errorf("event %s not found (run 'relayctl events --flow F' for a flow's events)", id)
	}
	if err != nil {
		return fmt.Errorf("read event %s: %w", id, err)
	}
	if f.json {
		return writeJSON(e.stdout, ev)
	}
	st, err := q.Stats(e.ctx)
	if err != nil {
		return fmt.Errorf("read the clock mark: %w", err)
	}
	return printEvent(e, ev, st.ClockMark)
}

// eventBodyShown is the longest body `event` prints in text, in runes; --json
// prints it whole.
const eventBodyShown = 200

// printEvent writes ev as an aligned list, then its history as a table;
// mark is the queue's clock mark, which tells a scheduled event (never
// tried, available later) from one that is due.
func printEvent(e *env, ev eventDetailRow, mark int64) error {
	t := &table{tw: tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)}
	t.row("event", ev.ID)
	t.row("flow", ev.Flow)
	t.row("seq", itoa(ev.Seq))
	t.row("state", ev.State)
	t.row("generation", itoa(ev.Generation))
	t.row("attempts", fmt.Sprintf("%d in this round, %d in all", ev.Attempts, ev.LifetimeAttempts))
	switch ev.State {
	case "pending":
		if ev.LifetimeAttempts == 0 && ev.AvailableAt > mark {
			t.row("available", e.at(ev.AvailableAt)+" (scheduled: not claimed before it)")
		} else {
			t.row("available", e.at(ev.AvailableAt))
		}
	case "inflight":
		t.row("leased until", e.at(ev.LeaseUntil))
	case "acked":
		if ev.AckedAt != 0 {
			t.row("acked at", e.at(ev.AckedAt)+" (retention counts from it)")
		}
	}
	t.row("reason", ev.Reason)
	t.row("error", ev.Error)
	b := string(ev.Body)
	if r := []rune(b); len(r) > eventBodyShown {
		b = short(b, eventBodyShown) + " (" + strconv.Itoa(len(ev.Body)) + " bytes; --json for all)"
	}
	t.row("body", b)
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	if len(ev.History) == 0 {
		fmt.Fprintln(e.stdout, "no failed attempts")
	} else {
		h := newTable(e.stdout, "AT", "GEN", "ATTEMPT", "OUTCOME", "REASON", "ERROR")
		for _, a := range ev.History {
			h.row(e.at(a.At), itoa(a.Generation), itoa(int64(a.Attempt)), a.Outcome, a.Reason, a.Error)
		}
		if err := h.flush(); err != nil {
			return err
		}
	}
	if ev.State == "quarantined" {
		fmt.Fprintf(e.stderr, "it blocks flow %s; redrive it after fixing its cause: relayctl redrive %s --reason \"what was fixed\"\n", ev.Flow, ev.ID)
	}
	return nil
}
