package main

import "fmt"

// statusReport is what `status --json` prints.
type statusReport struct {
	Queue    string          `json:"queue"`
	Stats    statsRow        `json:"stats"`
	Receiver *receiverReport `json:"receiver,omitempty"`
}

type receiverReport struct {
	Path      string     `json:"path"`
	Totals    []totalRow `json:"totals"`
	Conflicts int        `json:"conflicts"`
}

func cmdStatus(e *env, args []string) (err error) {
	f := newFlags(e, "status", "status [--json] [--receiver PATH]",
		"Status shows the queue's clock mark, global ticket, number of flows, events by\n"+
			"state and quarantined count, then the receiver's totals and conflicts count.").
		withQueue().withReceiver(true).withJSON()
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
	var rep statusReport
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
	return nil
}
