package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// pruneReport is what `prune --json` prints: what was deleted (or, with
// --dry-run, would be), and the window it kept.
type pruneReport struct {
	DryRun bool `json:"dry_run"`
	// Retention is the policy's window in the queue's ticks (0: keep
	// everything); Cutoff the tick at or below which an acked event (its
	// acked-at tick) or an audit row was old enough.
	Retention int64 `json:"retention"`
	Cutoff    int64 `json:"cutoff"`
	Events    int64 `json:"events"` // acked events, with their attempt history
	Audit     int64 `json:"audit"`  // audit rows
	Batches   int   `json:"batches"`
}

// receiverPruneReport is what `prune receiver --json` prints.
type receiverPruneReport struct {
	DryRun   bool      `json:"dry_run"`
	Before   time.Time `json:"before"` // receipts accepted before it were old enough
	Receipts int64     `json:"receipts"`
	Batches  int       `json:"batches"`
}

func cmdPrune(e *env, args []string) (err error) {
	if len(args) > 0 && args[0] == "receiver" {
		return cmdPruneReceiver(e, args[1:])
	}
	f := newFlags(e, "prune", "prune [--dry-run] [--batch N] [--now TICK] [--json]\n"+
		"       relayctl prune receiver --retention D [--dry-run] [--batch N] [--json]",
		"Prune deletes what the queue's retention window no longer keeps\n"+
			"(docs/contract.md §7.9): acked events acked at or before now minus the policy's\n"+
			"retention, with their attempt history, and audit rows written by then. Pending,\n"+
			"in-flight and quarantined events are never deleted, and each flow's numbering,\n"+
			"served count, weight and pause are kept. A deleted event's ID may be enqueued\n"+
			"again as a new event. It works in batches of --batch rows, one short transaction\n"+
			"each, until nothing is left; Ctrl-C stops between batches. With retention 0\n"+
			"(the default: 'relayctl policy set --retention D' sets one) nothing is deleted.\n"+
			"--dry-run counts what would be deleted and changes nothing.\n\n"+
			"'prune receiver' deletes the receiver's receipts accepted more than --retention\n"+
			"ago (the receiver has no policy); see 'relayctl prune receiver -h'.").
		withQueue().withNow().withJSON()
	dryRun := f.Bool("dry-run", false, "count what would be deleted; change nothing")
	batch := f.Int("batch", queue.DefaultPruneBatch, fmt.Sprintf("rows of each kind per transaction (1..%d)", queue.MaxPruneBatch))
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (want 'prune' or 'prune receiver')", pos[0])
	}
	if err := queue.CheckPruneLimit(*batch); err != nil {
		return usagef("--batch %d: want 1..%d", *batch, queue.MaxPruneBatch)
	}
	var q *queueDB
	if *dryRun {
		q, err = e.readQueue()
	} else {
		q, err = e.openQueue(false)
	}
	if err != nil {
		return err
	}
	defer closeWith(q, &err)
	now, wall, err := currentTime(e.ctx, q, f.now)
	if err != nil {
		return err
	}
	p, err := q.Policy(e.ctx)
	if err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	rep := pruneReport{DryRun: *dryRun, Retention: p.Retention, Cutoff: int64(now) - p.Retention}
	sp := spanText(wall)
	if p.Retention == 0 {
		rep.Cutoff = 0
		if f.json {
			return writeJSON(e.stdout, rep)
		}
		fmt.Fprintln(e.stdout, "retention is 0: the policy keeps everything, nothing to prune")
		fmt.Fprintln(e.stderr, "set a window with: relayctl policy set --retention D --reason \"...\"")
		return nil
	}
	window := fmt.Sprintf("acked or written at or before %s (retention %s)", e.at(rep.Cutoff), sp(p.Retention))
	if *dryRun {
		r, err := q.Prunable(e.ctx, now)
		if err != nil {
			return explainPrune(e, q, now, err)
		}
		rep.Events, rep.Audit = r.Events, r.Audit
		if f.json {
			return writeJSON(e.stdout, rep)
		}
		fmt.Fprintf(e.stdout, "would prune %s and %s, %s; dry run, nothing changed\n",
			plural64(r.Events, "acked event"), plural64(r.Audit, "audit row"), window)
		return nil
	}
	for {
		if err := e.ctx.Err(); err != nil {
			return fmt.Errorf("stopped after %s: %s and %s pruned (%v); prune again to go on",
				batches(rep.Batches), plural64(rep.Events, "acked event"), plural64(rep.Audit, "audit row"), err)
		}
		r, err := q.Prune(e.ctx, now, *batch)
		if err != nil {
			err = explainPrune(e, q, now, err)
			if rep.Batches > 0 {
				err = fmt.Errorf("%w (after %s: %s and %s pruned)", err,
					batches(rep.Batches), plural64(rep.Events, "acked event"), plural64(rep.Audit, "audit row"))
			}
			return err
		}
		rep.Batches++
		rep.Events += r.Events
		rep.Audit += r.Audit
		if !r.More {
			break
		}
	}
	if f.json {
		return writeJSON(e.stdout, rep)
	}
	fmt.Fprintf(e.stdout, "pruned %s (with their attempt history) and %s at %s in %s, %s\n",
		plural64(rep.Events, "acked event"), plural64(rep.Audit, "audit row"), e.when(now), batches(rep.Batches), window)
	return nil
}

// explainPrune turns a refused prune into plain words.
func explainPrune(e *env, q *queueDB, now clock.Tick, err error) error {
	switch {
	case kindOf(err) == kindTimeRegression:
		return timeRegression(e, q, now)
	case errors.Is(err, errNoCapability):
		return err
	}
	return fmt.Errorf("prune: %w", err)
}

// cmdPruneReceiver is `prune receiver --retention D`: the receiver keeps
// no policy, so the window is given each time.
func cmdPruneReceiver(e *env, args []string) (err error) {
	f := newFlags(e, "prune receiver", "prune receiver --retention D [--dry-run] [--batch N] [--json]",
		"Prune receiver deletes the receiver's receipts accepted more than --retention\n"+
			"ago by the wall clock (docs/contract.md §7.9), in batches of --batch, one short\n"+
			"transaction each. Each flow's total and next expected sequence are kept, and its\n"+
			"pruned mark is raised: a later redelivery of a deleted receipt's event is\n"+
			"answered 'pruned' and applied nothing, so keep receipts at least as long as a\n"+
			"relay may still redeliver (the queue's retention, or longer). Conflict records\n"+
			"are kept. --dry-run counts what would be deleted and changes nothing.").
		withReceiver(false).withJSON()
	var retention time.Duration
	f.DurationVar(&retention, "retention", 0, "delete receipts accepted more than `D` ago (a Go duration such as 720h; required)")
	dryRun := f.Bool("dry-run", false, "count what would be deleted; change nothing")
	batch := f.Int("batch", receiver.DefaultPruneBatch, fmt.Sprintf("receipts per transaction (1..%d)", receiver.MaxPruneBatch))
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case !f.isSet("retention"):
		return usagef("--retention is required: the receiver has no policy, say how long receipts are kept (e.g. 720h)")
	case retention <= 0:
		return usagef("--retention %s: want a Go duration above 0, such as 720h", shortDuration(retention))
	case *batch < 1 || *batch > receiver.MaxPruneBatch:
		return usagef("--batch %d: want 1..%d", *batch, receiver.MaxPruneBatch)
	}
	var r *receiverDB
	if *dryRun {
		r, err = e.readReceiver(false)
	} else {
		r, err = e.openReceiver(false)
	}
	if err != nil {
		return err
	}
	defer closeWith(r, &err)
	p, ok := r.s.(receiver.Pruner)
	if !ok {
		return fmt.Errorf("prune receiver: %w", errNoCapability)
	}
	before := e.clock.wall.Now().Time().Add(-retention).UTC()
	rep := receiverPruneReport{DryRun: *dryRun, Before: before}
	window := fmt.Sprintf("accepted before %s (retention %s)", before.Format("2006-01-02 15:04:05 UTC"), shortDuration(retention))
	if *dryRun {
		res, err := p.Prunable(e.ctx, before)
		if err != nil {
			return fmt.Errorf("count prunable receipts: %w", err)
		}
		rep.Receipts = res.Receipts
		if f.json {
			return writeJSON(e.stdout, rep)
		}
		fmt.Fprintf(e.stdout, "would prune %s %s; dry run, nothing changed\n", plural64(res.Receipts, "receipt"), window)
		return nil
	}
	for {
		if err := e.ctx.Err(); err != nil {
			return fmt.Errorf("stopped after %s: %s pruned (%v); prune again to go on",
				batches(rep.Batches), plural64(rep.Receipts, "receipt"), err)
		}
		res, err := p.Prune(e.ctx, before, *batch)
		// A batch that deleted receipts committed, also next to an error
		// (only its vacuum failed: receiver.Pruner): count it.
		rep.Receipts += res.Receipts
		if err == nil || res.Receipts > 0 {
			rep.Batches++
		}
		if err != nil {
			return fmt.Errorf("prune receiver (after %s: %s pruned): %w", batches(rep.Batches), plural64(rep.Receipts, "receipt"), err)
		}
		if !res.More {
			break
		}
	}
	if f.json {
		return writeJSON(e.stdout, rep)
	}
	fmt.Fprintf(e.stdout, "pruned %s in %s, %s\n", plural64(rep.Receipts, "receipt"), batches(rep.Batches), window)
	return nil
}

// plural64 is plural for a count of rows.
func plural64(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// batches says "1 batch" or "2 batches".
func batches(n int) string {
	if n == 1 {
		return "1 batch"
	}
	return fmt.Sprintf("%d batches", n)
}
