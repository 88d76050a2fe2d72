package main

import (
	"fmt"
)

func cmdReceiver(e *env, args []string) error {
	if len(args) == 0 {
		return usagef("missing subcommand: totals or conflicts")
	}
	switch args[0] {
	case "totals":
		return cmdReceiverTotals(e, args[1:])
	case "conflicts":
		return cmdReceiverConflicts(e, args[1:])
	case "-h", "-help", "--help":
		fmt.Fprintln(e.stderr, "usage: relayctl receiver totals [--flow F] [--json]\n"+
			"       relayctl receiver conflicts [--json]")
		return nil
	}
	return usagef("unknown subcommand %q: want totals or conflicts", args[0])
}

func cmdReceiverTotals(e *env, args []string) (err error) {
	f := newFlags(e, "receiver totals", "receiver totals [--flow F] [--json]",
		"Totals prints, per flow, the sum of the deltas the receiver has applied and the\n"+
			"next sequence number it expects.").
		withReceiver(false).withJSON()
	flow := f.String("flow", "", "only `FLOW` (an unknown flow has total 0)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	r, err := e.readReceiver(false)
	if err != nil {
		return err
	}
	defer closeWith(r, &err)
	var rows []totalRow
	if f.isSet("flow") {
		all, err := r.Totals(e.ctx)
		if err != nil {
			return fmt.Errorf("read receiver totals: %w", err)
		}
		row := totalRow{Flow: *flow, NextSeq: 1}
		for _, t := range all {
			if t.Flow == *flow {
				row = t
			}
		}
		// Total is the library's own answer for one flow; it must agree.
		if row.Total, err = r.Total(e.ctx, *flow); err != nil {
			return fmt.Errorf("read the total of flow %q: %w", *flow, err)
		}
		rows = []totalRow{row}
	} else if rows, err = r.Totals(e.ctx); err != nil {
		return fmt.Errorf("read receiver totals: %w", err)
	}
	if f.json {
		return writeJSON(e.stdout, nonNil(rows))
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "no flows")
		return nil
	}
	t := newTable(e.stdout, "FLOW", "TOTAL", "NEXT_SEQ")
	for _, r := range rows {
		t.row(r.Flow, itoa(r.Total), itoa(r.NextSeq))
	}
	return t.flush()
}

func cmdReceiverConflicts(e *env, args []string) (err error) {
	f := newFlags(e, "receiver conflicts", "receiver conflicts [--json]",
		"Conflicts prints every distinct conflicting message the receiver has recorded.\n"+
			"A conflict never changed a total; it waits for an operator to look at it.").
		withReceiver(false).withJSON()
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	r, err := e.readReceiver(false)
	if err != nil {
		return err
	}
	defer closeWith(r, &err)
	rows, err := r.Conflicts(e.ctx)
	if err != nil {
		return fmt.Errorf("read receiver conflicts: %w", err)
	}
	if f.json {
		return writeJSON(e.stdout, nonNil(rows))
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "no conflicts")
		return nil
	}
	t := newTable(e.stdout, "ID", "FLOW", "SEQ", "RULE", "CLASHES_WITH", "BODY")
	for _, c := range rows {
		t.row(c.ID, c.Flow, itoa(c.Seq), c.Rule, clashesWith(c), short(string(c.Body), 40))
	}
	return t.flush()
}

// clashesWith says in a few words what a conflicting message clashed with.
func clashesWith(c conflictRow) string {
	if c.WithID != "" {
		return fmt.Sprintf("receipt %s (flow %s, seq %d)", c.WithID, c.WithFlow, c.WithSeq)
	}
	if c.NextExpected != 0 {
		return fmt.Sprintf("flow expects seq %d", c.NextExpected)
	}
	return ""
}
