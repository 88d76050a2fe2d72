package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
)

// redriveAll is `redrive --all`: every quarantined event matching filter,
// redriven with one reason (or, with dryRun, listed: a read command, so
// the queue is opened read-only).
func redriveAll(e *env, f *cmdFlags, filter redriveFilter, reason string, dryRun bool) (err error) {
	var q *queueDB
	if dryRun {
		q, err = e.readQueue()
	} else {
		q, err = e.openQueue(false)
	}
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	if dryRun {
		match, err := q.QuarantinedMatching(e.ctx, filter)
		if err != nil {
			return fmt.Errorf("read the quarantined events: %w", err)
		}
		if f.json {
			return writeJSON(e.stdout, nonNil(match))
		}
		if len(match) == 0 {
			fmt.Fprintf(e.stdout, "no quarantined event matches %s; nothing would be redriven\n", describeFilter(filter))
			if flowMissing(e, q, filter.Flow) {
				fmt.Fprintf(e.stderr, "flow %q does not exist: run 'relayctl flows' for the list\n", filter.Flow)
			}
			return nil
		}
		for _, m := range match {
			fmt.Fprintf(e.stdout, "would redrive %s (flow %s, seq %d, generation %d), failed with %s\n",
				cell(m.ID), cell(m.Flow), m.Seq, m.Generation, cell(m.Reason))
		}
		fmt.Fprintf(e.stdout, "%s would be redriven; dry run, nothing changed\n", events(len(match)))
		return nil
	}
	now, err := currentTick(e.ctx, q, f.now)
	if err != nil {
		return err
	}
	done, err := q.RedriveAll(e.ctx, filter, reason, now)
	switch {
	case f.json && err == nil:
		return writeJSON(e.stdout, nonNil(done))
	case f.json && len(done) > 0:
		// Stopped part way: what was redriven is listed all the same.
		if werr := writeJSON(e.stdout, done); werr != nil {
			return errors.Join(err, werr)
		}
	case !f.json:
		for _, d := range done {
			fmt.Fprintf(e.stdout, "redrove %s (flow %s, seq %d): generation %d -> %d\n",
				cell(d.ID), cell(d.Flow), d.Seq, d.Generation-1, d.Generation)
		}
	}
	if err != nil {
		if len(done) > 0 {
			return fmt.Errorf("stopped after %s (each with its audit row): %w", events(len(done)), explainRedriveAll(e, q, filter, now, err))
		}
		return explainRedriveAll(e, q, filter, now, err)
	}
	if len(done) == 0 {
		msg := fmt.Sprintf("no quarantined event matches %s; nothing was redriven", describeFilter(filter))
		if flowMissing(e, q, filter.Flow) {
			msg += fmt.Sprintf(" (flow %q does not exist: run 'relayctl flows' for the list)", filter.Flow)
		}
		return errors.New(msg)
	}
	at := int64(now)
	if ev, err := q.Event(e.ctx, done[0].ID); err == nil {
		at = performedAt(ev, now)
	}
	fmt.Fprintf(e.stdout, "redrove %s at %s with one reason; one audit row each ('relayctl audit')\n", events(len(done)), e.when(clock.Tick(at)))
	return nil
}

// explainRedriveAll turns a refused bulk redrive into plain words.
func explainRedriveAll(e *env, q *queueDB, filter redriveFilter, now clock.Tick, err error) error {
	switch kindOf(err) {
	case kindEmptyReason:
		return errors.New("the reason is empty: say why the events may go again (it is kept in the audit); nothing was redriven")
	case kindTimeRegression:
		return timeRegression(e, q, now)
	case kindInvalid:
		return fmt.Errorf("refused, nothing was redriven: %w", err)
	}
	return fmt.Errorf("redrive --all: %w", err)
}

// flowMissing reports whether flow is given and names no flow of the
// queue.
func flowMissing(e *env, q *queueDB, flow string) bool {
	if flow == "" {
		return false
	}
	evs, err := q.FlowEvents(e.ctx, flow)
	return err != nil && kindOf(err) == kindNotFound || err == nil && len(evs) == 0
}

// describeFilter says in words what filter selects.
func describeFilter(f redriveFilter) string {
	var parts []string
	if f.Flow != "" {
		parts = append(parts, "flow "+quoteCell(f.Flow))
	}
	if f.Reason != "" {
		parts = append(parts, "failure reason "+quoteCell(f.Reason))
	}
	if len(parts) == 0 {
		return "(any flow, any reason)"
	}
	return strings.Join(parts, " and ")
}

// quoteCell quotes s for a message, escaping what a terminal would
// misread.
func quoteCell(s string) string { return fmt.Sprintf("%q", s) }

// events is "1 event" or "n events".
func events(n int) string {
	if n == 1 {
		return "1 event"
	}
	return fmt.Sprintf("%d events", n)
}
