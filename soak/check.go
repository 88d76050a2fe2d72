package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// Result is what Check found in the final state of a run.
type Result struct {
	Events      int // events in the queue (the truth of what was enqueued)
	Flows       int // ordinary flows (poison flows not counted)
	Committed   int // events that a producer's log says were committed
	Acked       int
	Receipts    int
	Lost        int // committed but not in the queue, or in the queue and never received
	Duplicated  int // received more than once, or received but never enqueued
	Stuck       int // pending or in flight at the end
	Quarantined int
	Injected    int // poison events (each must end quarantined)
	Retried     int // ordinary events acked after more than one claim (a kill or an outage hit them)
	Pruned      int // acked events the queue's retention deleted (counted in Events and Acked)
	// Problems says what broke, one line each (at most a few per kind).
	Problems []string
}

// problems collects problem lines, at most maxPerKind per kind.
type problems struct {
	lines []string
	count map[string]int
}

const maxPerKind = 10

func (p *problems) add(kind, format string, args ...any) {
	if p.count == nil {
		p.count = map[string]int{}
	}
	p.count[kind]++
	switch n := p.count[kind]; {
	case n <= maxPerKind:
		p.lines = append(p.lines, kind+": "+fmt.Sprintf(format, args...))
	case n == maxPerKind+1:
		p.lines = append(p.lines, kind+": ... (more)")
	}
}

// checkedQueue is what Check reads of the queue.
type checkedQueue interface {
	Stats(ctx context.Context) (queue.Stats, error)
	Flows(ctx context.Context) ([]queue.FlowState, error)
	FlowEvents(ctx context.Context, flow string) ([]queue.EventState, error)
	Event(ctx context.Context, id string) (queue.EventState, error)
	AuditAll(ctx context.Context) ([]queue.AuditRecord, error)
}

// checkedReceiver is what Check reads of the receiver through its contract
// (the receipts' commit order is the backend's: receipts).
type checkedReceiver interface {
	Flows(ctx context.Context) ([]receiver.FlowState, error)
	Conflicts(ctx context.Context) ([]receiver.ConflictRecord, error)
}

// Check reads the final state of a run and checks every guarantee, the
// same way on either backend: every event a producer committed is in the
// queue; every event in the queue was accepted by the receiver exactly
// once, under its flow and sequence number, each flow's receipts committed
// in the order 1..n; each flow's total is the sum of its enqueued deltas;
// nothing is pending or in flight; exactly the injected (poison) events
// are quarantined, nothing else; the audit is empty (nothing redriven,
// no weight or policy changed); and both stores pass
// their backend's integrity check (PRAGMA integrity_check, or amcheck on
// PostgreSQL).
func Check(ctx context.Context, stores Stores, producers []Producer) (Result, error) {
	var res Result
	var pr problems
	members, _, err := queueMembers(ctx, stores.Queue)
	if err != nil {
		return res, err
	}
	for _, target := range append(members, stores.Receiver) {
		if msg, err := integrity(ctx, target); err != nil {
			return res, err
		} else if msg != "ok" {
			pr.add("integrity", "%s: %s", redact(target), msg)
		}
	}

	qs, err := openQueue(ctx, stores.Queue, queueOptions{})
	if err != nil {
		return res, fmt.Errorf("soak: open the queue: %w", err)
	}
	defer qs.Close()
	rs, err := openReceiver(ctx, stores.Receiver)
	if err != nil {
		return res, fmt.Errorf("soak: open the receiver: %w", err)
	}
	defer rs.Close()
	byCommit, unplaced, err := receipts(ctx, stores.Receiver)
	if err != nil {
		return res, err
	}
	gone, err := pruned(ctx, stores.Queue)
	if err != nil {
		return res, err
	}
	res, err = checkStores(ctx, &pr, qs, rs, byCommit, unplaced, gone, producers)
	if err != nil {
		return res, err
	}
	res.Problems = pr.lines
	return res, nil
}

// checkNoGap fails the run when the receiver ever answered gap to a
// delivery of e (its attempt history keeps the reason): a gap means the
// queue handed out a flow's later event while an earlier one was not yet
// received, which head-of-line blocking (docs/contract.md §2.2) rules out
// whatever crashes. The receipts' order alone cannot show it: the receiver
// refuses the early delivery, and a retry after the earlier event's ack
// leaves the same receipts as a correct run. An event pruned by retention
// took its history with it and is not read.
func checkNoGap(ctx context.Context, pr *problems, q checkedQueue, e queue.EventState) error {
	full, err := q.Event(ctx, e.ID)
	if err != nil {
		return fmt.Errorf("soak: event %s: %w", e.ID, err)
	}
	// The relay records a gap answer under the outcome's name.
	gaps := 0
	for _, a := range full.History {
		if a.Reason == string(receiver.Gap) {
			gaps++
		}
	}
	if gaps > 0 {
		pr.add("order", "event %s (flow %s seq %d) was answered gap %d times: delivered before its flow's earlier event was received", e.ID, e.Flow, e.Seq, gaps)
	}
	return nil
}

// checkStores is Check on open stores, with the receipts in commit order
// (and those with no known place in it), and the acked events the queue's
// retention deleted (gone: as the backend's enqueue log has them).
func checkStores(ctx context.Context, pr *problems, q checkedQueue, r checkedReceiver, byCommit []receipt, unplaced []string, gone []queue.EventState, producers []Producer) (Result, error) {
	var res Result
	res.Pruned = len(gone)
	goneByFlow := map[string][]queue.EventState{}
	pruned := map[string]bool{}
	for _, e := range gone {
		goneByFlow[e.Flow] = append(goneByFlow[e.Flow], e)
		pruned[e.ID] = true
	}
	// The queue: every event, by flow and seq.
	st, err := q.Stats(ctx)
	if err != nil {
		return res, fmt.Errorf("soak: queue stats: %w", err)
	}
	res.Stuck = int(st.Events.Pending + st.Events.Inflight)
	if res.Stuck > 0 {
		pr.add("stuck", "%d pending and %d in flight at the end", st.Events.Pending, st.Events.Inflight)
	}
	flows, err := q.Flows(ctx)
	if err != nil {
		return res, fmt.Errorf("soak: queue flows: %w", err)
	}
	type qEvent struct {
		flow  string
		seq   int64
		body  []byte
		delta int64
	}
	events := map[string]qEvent{}
	type flowWant struct {
		ids   []string // by seq - 1
		total int64
	}
	want := map[string]*flowWant{}
	lastBatch := map[int]int{} // producer -> highest batch seen in the queue
	for _, f := range flows {
		evs, err := q.FlowEvents(ctx, f.Flow)
		if err != nil {
			return res, fmt.Errorf("soak: events of flow %s: %w", f.Flow, err)
		}
		if g := goneByFlow[f.Flow]; len(g) > 0 {
			evs = append(append([]queue.EventState(nil), g...), evs...)
			sort.SliceStable(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })
		}
		poison := strings.HasPrefix(f.Flow, poisonPrefix)
		fw := &flowWant{}
		if !poison {
			want[f.Flow] = fw
			res.Flows++
		}
		for _, e := range evs {
			res.Events++
			var body struct{ Delta int64 }
			if err := json.Unmarshal(e.Body, &body); err != nil {
				pr.add("foreign", "event %s has body %q", e.ID, e.Body)
			}
			events[e.ID] = qEvent{flow: e.Flow, seq: e.Seq, body: e.Body, delta: body.Delta}
			if p, k, _, ok := parseEventID(e.ID); ok {
				lastBatch[p] = max(lastBatch[p], k)
			} else {
				pr.add("foreign", "event %s in flow %s is no producer's", e.ID, e.Flow)
			}
			switch {
			case poison:
				res.Injected++
				if e.State != "quarantined" {
					pr.add("injected", "poison event %s is %s, want quarantined", e.ID, e.State)
				}
			case e.State == "quarantined":
				pr.add("quarantine", "event %s (flow %s seq %d) quarantined with reason %q: no failure was injected there", e.ID, e.Flow, e.Seq, e.Reason)
			}
			switch e.State {
			case "acked":
				res.Acked++
				if e.LifetimeAttempts > 1 {
					res.Retried++
					if !poison && !pruned[e.ID] {
						if err := checkNoGap(ctx, pr, q, e); err != nil {
							return res, err
						}
					}
				}
			case "quarantined":
				res.Quarantined++
			}
			if !poison {
				if e.Seq != int64(len(fw.ids))+1 {
					pr.add("queue", "flow %s: seq %d after %d", e.Flow, e.Seq, len(fw.ids))
				}
				fw.ids = append(fw.ids, e.ID)
				fw.total += body.Delta
			}
		}
	}

	// Nothing lost between a producer and the queue: every event of every
	// batch its log says was committed is in the queue as generated; and no
	// producer got more than one batch ahead of its log.
	for _, p := range producers {
		last, err := LastCommitted(p.Log)
		if err != nil {
			return res, err
		}
		for k := 1; k <= last; k++ {
			for _, e := range p.Events(k) {
				res.Committed++
				got, ok := events[e.ID]
				switch {
				case !ok:
					res.Lost++
					pr.add("lost", "event %s of producer %d's committed batch %d is not in the queue", e.ID, p.ID, k)
				case got.flow != e.Flow || !bytes.Equal(got.body, e.Body):
					pr.add("queue", "event %s is in flow %s with body %s, enqueued in flow %s with body %s", e.ID, got.flow, got.body, e.Flow, e.Body)
				}
			}
		}
		if lastBatch[p.ID] > last+1 {
			pr.add("queue", "producer %d: batch %d in the queue, but its log ends at batch %d", p.ID, lastBatch[p.ID], last)
		}
	}

	// The audit: nothing in the soak redrives, weighs a flow or changes
	// the policy (the relays' policy flags are the queue's own policy), so
	// the audit stays empty, but for a sharded queue's labels (one
	// AuditShard row per shard, written before anything started).
	audit, err := q.AuditAll(ctx)
	if err != nil {
		return res, fmt.Errorf("soak: queue audit: %w", err)
	}
	for _, a := range audit {
		if a.Kind == queue.AuditShard && a.EventID == "" {
			continue
		}
		pr.add("audit", "audit row %d: %s %s (%s): nothing in the soak does that", a.ID, a.Kind, a.EventID+a.Detail, a.Reason)
	}
	if int64(len(audit)) != st.AuditRows {
		pr.add("audit", "%d audit rows listed, the queue's stats count %d", len(audit), st.AuditRows)
	}

	// The receiver: totals, conflicts, receipts in commit order.
	conflicts, err := r.Conflicts(ctx)
	if err != nil {
		return res, fmt.Errorf("soak: receiver conflicts: %w", err)
	}
	rflows, err := r.Flows(ctx)
	if err != nil {
		return res, fmt.Errorf("soak: receiver flows: %w", err)
	}
	for _, c := range conflicts {
		pr.add("conflict", "receiver conflict %s: flow %s seq %d (%s)", c.ID, c.Flow, c.Seq, c.Rule)
	}
	got := map[string]receiver.FlowState{}
	for _, f := range rflows {
		got[f.Flow] = f
		if _, ok := want[f.Flow]; !ok {
			pr.add("receiver", "receiver has flow %s, which the queue has not (or only poison)", f.Flow)
		}
	}
	for flow, fw := range want {
		f := got[flow]
		n := int64(len(fw.ids))
		if f.Total != fw.total || (n > 0 && f.NextExpected != n+1) {
			pr.add("total", "flow %s: receiver total %d, next %d; enqueued total %d over %d events", flow, f.Total, f.NextExpected, fw.total, n)
		}
	}
	for _, id := range unplaced {
		pr.add("order", "receipt %s has no place in the commit order", id)
	}
	seen := map[string]int{}
	next := map[string]int64{}
	for _, rc := range byCommit {
		if rc.gone && rc.seq > got[rc.flow].PrunedThrough {
			// Committed, then deleted, and not by the receiver's
			// retention (which raises the flow's PrunedThrough): lost.
			continue
		}
		id, flow, seq := rc.id, rc.flow, rc.seq
		res.Receipts++
		seen[id]++
		e, ok := events[id]
		switch {
		case seen[id] > 1:
			res.Duplicated++
			pr.add("duplicated", "event %s received %d times", id, seen[id])
		case !ok:
			res.Duplicated++
			pr.add("duplicated", "receipt %s (flow %s seq %d) names no enqueued event", id, flow, seq)
		case e.flow != flow || e.seq != seq:
			pr.add("receipt", "event %s enqueued as flow %s seq %d, received as flow %s seq %d", id, e.flow, e.seq, flow, seq)
		}
		if seq != next[flow]+1 {
			pr.add("order", "flow %s: receipt of seq %d committed after seq %d", flow, seq, next[flow])
		}
		next[flow] = seq
	}
	for flow, fw := range want {
		for _, id := range fw.ids {
			if seen[id] == 0 {
				res.Lost++
				pr.add("lost", "event %s (flow %s) was never received", id, flow)
			}
		}
	}
	return res, nil
}
