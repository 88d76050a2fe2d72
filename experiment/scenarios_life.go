package experiment

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// lifeScenarios are the life of an event (docs/contract.md §7.9): a
// scheduled head, a paused flow, and a redelivery after retention pruned
// both stores.
func lifeScenarios() []Scenario {
	return []Scenario{
		{
			Name:   "scheduled-head",
			Clause: "§7.9 (a scheduled event is its flow's head and blocks only its flow until its tick; behind a head it becomes dispatchable at max(ack, not-before); NotBefore is not part of the identity)",
			Shows:  "a-1, scheduled for t=10, is flow a's head: b is drained at t=1 while nothing of a is dispatchable until t=10 (NextDue says 10), a retry of a-1 with another NotBefore is a duplicate that moves nothing, and at t=10 a-1 then a-2 are claimed; c-2 (not before 20) behind c-1 acked at t=12 waits until t=20, d-2 (not before 13) behind d-1 acked at t=15 is claimed at t=15",
			Run:    scheduledHead,
		},
		{
			Name:   "pause-resume",
			Clause: "§7.9 (a paused flow is skipped while others are served; its in-flight claim settles; enqueues go on; served kept; pause and resume audited)",
			Shows:  "a-1 is held by a worker when flow a is paused at t=1: the worker's settle acks it, b and c are drained while a-2 waits, a-4 is enqueued into the paused flow, four wrong pause/resume calls are refused and change nothing; resumed at t=4, a is served again from served 1 to 4; two audit rows, pause and resume, carry the reasons; c, paused at t=5 with c-2 enqueued, is left paused for the snapshot",
			Run:    pauseResume,
		},
		{
			Name:   "pruned-redelivery",
			Clause: "§7.9 (retention prunes acked events and receipts; a redelivery of a pruned receipt's event is answered pruned and changes nothing; numbering goes on)",
			Shows:  "with a retention of 10 ticks, a-1, a-2 and b-1 are acked at t=1 and a-3 is accepted by the receiver but its worker stalls; the receiver prunes its four receipts (pruned through a#3, b#1) and the queue, at t=11, its three acked events in batches of 2 and 1 (never a-3, in flight); a direct re-send of a-1 and the take-over's redelivery of a-3 are both answered pruned and a-3 is acked with the totals unchanged; a-4 and b-2 then get the next seqs and are accepted",
			Run:    prunedRedelivery,
		},
	}
}

// scheduled is an event of flow with the body {"delta":delta}, not
// dispatchable before notBefore.
func scheduled(id, flow string, delta int, notBefore clock.Tick) queue.Event {
	e := Ev(id, flow, delta)
	e.NotBefore = notBefore
	return e
}

// expectNextDue checks NextDue.
func (l *Lab) expectNextDue(ctx context.Context, q QueueStore, name string, want clock.Tick) error {
	at, ok, err := q.NextDue(ctx)
	if err != nil {
		return err
	}
	l.Equal(name, []any{int64(at), ok}, []any{int64(want), true})
	return nil
}

// stepExpect runs one relay step at now and checks that it claimed want
// and acked it.
func (l *Lab) stepExpect(ctx context.Context, r *Relay, now clock.Tick, name, want string) error {
	st, ok, err := l.step(ctx, r, now)
	if err != nil {
		return err
	}
	if !ok {
		l.Check(name, false, "nothing dispatchable at t=%d, want %s", now, want)
		return nil
	}
	l.Check(name, st.Claim.EventID == want && st.Settled == queue.Acked, "claimed %q at t=%d -> %s", st.Claim.EventID, now, st.Settled)
	return nil
}

func scheduledHead(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	if err := lab.enqueueAll(ctx, q, 0,
		scheduled("a-1", "a", 1, 10), Ev("a-2", "a", 2), Ev("b-1", "b", 10), Ev("b-2", "b", 20)); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "a-1 is stored available at its not-before tick", "a-1", "pending gen 0 attempts 0 lifetime 0 available 10"); err != nil {
		return err
	}
	got, err := lab.enqueue(ctx, q, scheduled("a-1", "a", 1, 5), 0)
	if err != nil {
		return err
	}
	lab.Equal("a retry of a-1 with another NotBefore is a duplicate of seq 1", []any{got.Seq, got.Duplicate}, []any{int64(1), true})
	if err := lab.expectEvent(ctx, q, "the duplicate moved nothing: a-1 still available at 10", "a-1", "pending gen 0 attempts 0 lifetime 0 available 10"); err != nil {
		return err
	}
	if err := lab.stepExpect(ctx, relay, 1, "t=1: b-1 is served while a's head waits", "b-1"); err != nil {
		return err
	}
	if err := lab.stepExpect(ctx, relay, 1, "t=1: b-2 is served while a's head waits", "b-2"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 1, "t=1: a-1 is not dispatchable before its tick, and a-2 waits behind it"); err != nil {
		return err
	}
	if err := lab.expectNextDue(ctx, q, "NextDue is a-1's not-before tick", 10); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 9, "t=9: still nothing dispatchable, a tick before a-1's"); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "a-2 waits untouched behind the scheduled head", "a-2", "pending gen 0 attempts 0 lifetime 0 available 0"); err != nil {
		return err
	}
	if err := lab.stepExpect(ctx, relay, 10, "t=10: a-1 is claimed at its tick", "a-1"); err != nil {
		return err
	}
	if err := lab.stepExpect(ctx, relay, 10, "t=10: a-2 follows once a-1 is acked", "a-2"); err != nil {
		return err
	}

	// Scheduled behind a head: ready at max(the head's ack, not-before).
	if err := lab.enqueueAll(ctx, q, 10, Ev("c-1", "c", 100), scheduled("c-2", "c", 200, 20)); err != nil {
		return err
	}
	c1, _, err := lab.claim(ctx, q, 11)
	if err != nil {
		return err
	}
	lab.Equal("t=11: c-1 is claimed and held", c1.EventID, "c-1")
	if err := lab.enqueueAll(ctx, q, 11, Ev("d-1", "d", 400), scheduled("d-2", "d", 800, 13)); err != nil {
		return err
	}
	d1, _, err := lab.claim(ctx, q, 11)
	if err != nil {
		return err
	}
	lab.Equal("t=11: d-1 is claimed and held", d1.EventID, "d-1")
	if _, err := lab.deliver(ctx, relay, c1, 12); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "c-2, head since c-1's ack at t=12, keeps its not-before tick 20", "c-2", "pending gen 0 attempts 0 lifetime 0 available 20"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 12, "t=12: c-2 waits for t=20, d-1 is in flight"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 13, "t=13: d-2's not-before has come, but its head d-1 is in flight"); err != nil {
		return err
	}
	if _, err := lab.deliver(ctx, relay, d1, 15); err != nil {
		return err
	}
	if err := lab.stepExpect(ctx, relay, 15, "t=15: d-2 is dispatchable at d-1's ack, max(15, 13)", "d-2"); err != nil {
		return err
	}
	if err := lab.expectNextDue(ctx, q, "NextDue is c-2's not-before tick", 20); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 19, "t=19: c-2 is not dispatchable a tick before max(12, 20)"); err != nil {
		return err
	}
	if err := lab.stepExpect(ctx, relay, 20, "t=20: c-2 is claimed at max(12, 20)", "c-2"); err != nil {
		return err
	}
	return lab.expectTotals(ctx, relay.Receiver, "a", 3, "b", 30, "c", 300, "d", 1200)
}

// pauser is q's queue.Pauser (both backends are one).
func pauser(q QueueStore) (queue.Pauser, error) {
	p, ok := q.(queue.Pauser)
	if !ok {
		return nil, fmt.Errorf("%T cannot pause a flow", q)
	}
	return p, nil
}

// pause pauses or resumes a flow, traced.
func (l *Lab) pause(ctx context.Context, q QueueStore, resume bool, flow, reason string, now clock.Tick) error {
	p, err := pauser(q)
	if err != nil {
		return err
	}
	what := "pause"
	if resume {
		what = "resume"
		err = p.ResumeFlow(ctx, flow, reason, now)
	} else {
		err = p.PauseFlow(ctx, flow, reason, now)
	}
	l.Trace("t=%d %s flow %q (%q) -> %s", now, what, flow, reason, okOr(err))
	return err
}

// describeFlows is each flow's served count and pause, one string a flow.
func describeFlows(fs []queue.FlowState) []string {
	out := []string{}
	for _, f := range fs {
		s := fmt.Sprintf("%s served %d backlog %d", f.Flow, f.Served, f.Backlog)
		if f.Paused {
			s += fmt.Sprintf(" paused %q", f.PauseReason)
		}
		out = append(out, s)
	}
	return out
}

// expectFlows checks describeFlows of the queue's flows and the paused
// count of its stats.
func (l *Lab) expectFlows(ctx context.Context, q QueueStore, name string, paused int64, want ...string) error {
	fs, err := q.Flows(ctx)
	if err != nil {
		return err
	}
	l.Equal(name, describeFlows(fs), want)
	st, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	l.Equal(name+": paused flows in the stats", st.PausedFlows, paused)
	return nil
}

func pauseResume(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 1), Ev("a-2", "a", 2), Ev("a-3", "a", 3),
		Ev("b-1", "b", 10), Ev("b-2", "b", 20), Ev("c-1", "c", 100)); err != nil {
		return err
	}
	a1, _, err := lab.claim(ctx, q, 1)
	if err != nil {
		return err
	}
	lab.Equal("t=1: a-1 is claimed and held by a worker", a1.EventID, "a-1")
	const why = "receiver a is migrating"
	lab.NoError("t=1: flow a is paused", lab.pause(ctx, q, false, "a", why, 1))
	st, err := lab.deliver(ctx, relay, a1, 2)
	if err != nil {
		return err
	}
	lab.Equal("t=2: the claim in flight when a was paused settles as usual", st.Settled, queue.Acked)
	var served []string
	for {
		st, ok, err := lab.step(ctx, relay, 2)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		served = append(served, st.Claim.EventID)
	}
	lab.Equal("t=2: b and c are drained while a is paused", served, []string{"b-1", "c-1", "b-2"})
	if err := lab.expectFlows(ctx, q, "while paused: a keeps its served count and its reason", 1,
		"a served 1 backlog 2 paused \"receiver a is migrating\"", "b served 2 backlog 0", "c served 1 backlog 0"); err != nil {
		return err
	}
	got, err := lab.enqueue(ctx, q, Ev("a-4", "a", 4), 3)
	if err != nil {
		return err
	}
	lab.Equal("t=3: an enqueue into the paused flow goes on (seq 4)", got.Seq, int64(4))

	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.expectErr("pausing a paused flow is refused", lab.pause(ctx, q, false, "a", "again", 3), queue.ErrFlowPaused)
	lab.expectErr("resuming a flow that is not paused is refused", lab.pause(ctx, q, true, "b", "why not", 3), queue.ErrFlowNotPaused)
	lab.expectErr("pausing an unknown flow is refused", lab.pause(ctx, q, false, "nope", "typo", 3), queue.ErrNotFound)
	lab.expectErr("a pause without a reason is refused", lab.pause(ctx, q, false, "b", "", 3), queue.ErrEmptyReason)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("the refused calls changed nothing", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))
	if err := lab.expectNothing(ctx, relay, 3, "t=3: a-2 is not dispatchable while a is paused"); err != nil {
		return err
	}

	lab.NoError("t=4: flow a is resumed", lab.pause(ctx, q, true, "a", "migration done", 4))
	if err := lab.expectFlows(ctx, q, "resumed: a is not paused and still served 1", 0,
		"a served 1 backlog 3", "b served 2 backlog 0", "c served 1 backlog 0"); err != nil {
		return err
	}
	n, err := relay.Drain(ctx, 4)
	if err != nil {
		return err
	}
	lab.Trace("t=4 drain -> %d delivered", n)
	lab.Equal("t=4: a-2, a-3 and a-4 are delivered after the resume", n, 3)
	if err := lab.expectServed(ctx, q, "a's served count went on from 1 to 4", "a", 4); err != nil {
		return err
	}
	audit, err := q.AuditAll(ctx)
	if err != nil {
		return err
	}
	var rows []string
	for _, a := range audit {
		rows = append(rows, fmt.Sprintf("t=%d %s %s %q", a.At, a.Kind, a.Detail, a.Reason))
	}
	lab.Equal("the audit holds the pause and the resume with their reasons", rows, []string{
		`t=1 pause {"flow":"a"} "receiver a is migrating"`,
		`t=4 resume {"flow":"a"} "migration done"`,
	})

	// A flow left paused: the snapshot shows its reason.
	lab.NoError("t=5: flow c is paused", lab.pause(ctx, q, false, "c", "receiver c is retired", 5))
	if _, err := lab.enqueue(ctx, q, Ev("c-2", "c", 200), 5); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 5, "t=5: c-2 waits in the paused flow"); err != nil {
		return err
	}
	if err := lab.expectFlows(ctx, q, "at the end: c paused with its backlog", 1,
		"a served 4 backlog 0", "b served 2 backlog 0", "c served 1 backlog 1 paused \"receiver c is retired\""); err != nil {
		return err
	}
	return lab.expectTotals(ctx, relay.Receiver, "a", 10, "b", 30, "c", 100)
}

// pruner is q's queue.Pruner (both backends are one).
func pruner(q QueueStore) (queue.Pruner, error) {
	p, ok := q.(queue.Pruner)
	if !ok {
		return nil, fmt.Errorf("%T cannot prune", q)
	}
	return p, nil
}

// prune runs one Prune batch of the queue at now, traced.
func (l *Lab) prune(ctx context.Context, q QueueStore, now clock.Tick, limit int) (queue.PruneResult, error) {
	p, err := pruner(q)
	if err != nil {
		return queue.PruneResult{}, err
	}
	res, err := p.Prune(ctx, now, limit)
	if err != nil {
		l.Trace("t=%d prune queue (limit %d) -> %s", now, limit, errText(err))
		return res, err
	}
	l.Trace("t=%d prune queue (limit %d) -> %d events, %d audit rows, more %v", now, limit, res.Events, res.Audit, res.More)
	return res, nil
}

// expectAckedAt checks the state and AckedAt of events: want holds one
// "id state (acked_at t)" string an event, and the events are read by the
// first word of each.
func (l *Lab) expectAckedAt(ctx context.Context, q QueueStore, name string, want ...string) error {
	var got []string
	for _, w := range want {
		id, _, _ := strings.Cut(w, " ")
		e, err := q.Event(ctx, id)
		if err != nil {
			return fmt.Errorf("event %s: %w", id, err)
		}
		got = append(got, fmt.Sprintf("%s %s (acked_at %d)", id, e.State, e.AckedAt))
	}
	l.Equal(name, got, want)
	return nil
}

// receiverEpoch is the wall-clock time the pruned-redelivery scenario's
// receiver starts at (its injected clock): no real time reaches a golden
// file.
var receiverEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// describeReceiverFlows is each receiver flow's next expected seq, total
// and pruned mark.
func describeReceiverFlows(fs []receiver.FlowState) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s next %d total %d pruned through %d", f.Flow, f.NextExpected, f.Total, f.PrunedThrough))
	}
	return out
}

func prunedRedelivery(ctx context.Context, lab *Lab) error {
	p := queue.DefaultPolicy()
	p.Retention = 10
	q, err := lab.Queue(WithPolicy(p))
	if err != nil {
		return err
	}
	wall := receiverEpoch
	r, err := lab.Receiver(WithReceiverClock(func() time.Time { return wall }))
	if err != nil {
		return err
	}
	rp, ok := r.(receiver.Pruner)
	if !ok {
		return fmt.Errorf("%T cannot prune", r)
	}
	relay := &Relay{Queue: q, Receiver: r}
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 1), Ev("a-2", "a", 2), Ev("a-3", "a", 4), Ev("b-1", "b", 10)); err != nil {
		return err
	}
	for _, id := range []string{"a-1", "b-1", "a-2"} {
		if err := lab.stepExpect(ctx, relay, 1, "t=1: "+id+" is delivered", id); err != nil {
			return err
		}
	}
	if err := lab.expectAckedAt(ctx, q, "each acked event records the tick of its ack; a pending one has none",
		"a-1 acked (acked_at 1)", "a-2 acked (acked_at 1)", "b-1 acked (acked_at 1)", "a-3 pending (acked_at 0)"); err != nil {
		return err
	}
	a3, _, err := lab.claim(ctx, q, 2)
	if err != nil {
		return err
	}
	lab.Equal("t=2: a-3 is claimed by a worker", a3.EventID, "a-3")
	out, err := lab.receive(ctx, r, Message(a3))
	if err != nil {
		return err
	}
	lab.Equal("the worker's delivery of a-3 is accepted, then it stalls before settling", out, receiver.Accepted)
	if err := lab.expectTotals(ctx, r, "a", 7, "b", 10); err != nil {
		return err
	}

	// The receiver's retention: every receipt so far was accepted at the
	// epoch; an hour later a prune with a one-minute window deletes them.
	wall = receiverEpoch.Add(time.Hour)
	before := wall.Add(-time.Minute)
	lab.Trace("receiver clock: epoch + 1h; prune receipts accepted before epoch + 59m")
	would, err := rp.Prunable(ctx, before)
	if err != nil {
		return err
	}
	lab.Equal("the receiver's Prunable counts four receipts", would.Receipts, int64(4))
	pr, err := rp.Prune(ctx, before, receiver.DefaultPruneBatch)
	if err != nil {
		return err
	}
	lab.Trace("prune receiver (limit %d) -> %d receipts, more %v", receiver.DefaultPruneBatch, pr.Receipts, pr.More)
	lab.Equal("the receiver's Prune deletes what Prunable counted", []any{pr.Receipts, pr.More}, []any{int64(4), false})
	flows, err := r.Flows(ctx)
	if err != nil {
		return err
	}
	lab.Equal("totals and next seqs survive; each flow is pruned through its last seq", describeReceiverFlows(flows),
		[]string{"a next 4 total 7 pruned through 3", "b next 2 total 10 pruned through 1"})
	out, err = lab.receive(ctx, r, receiver.Message{ID: "a-1", Flow: "a", Seq: 1, Body: Body(1)})
	if err != nil {
		return err
	}
	lab.Equal("a direct re-send of a-1 is answered pruned", out, receiver.Pruned)
	if err := lab.expectTotal(ctx, r, "a", 7); err != nil {
		return err
	}

	// The queue's retention: acked at t=1, kept while t-10 < 1.
	qp, err := pruner(q)
	if err != nil {
		return err
	}
	early, err := qp.Prunable(ctx, 10)
	if err != nil {
		return err
	}
	lab.Equal("t=10: nothing is prunable yet (acked at t=1, retention 10)", early, queue.PruneResult{})
	would2, err := qp.Prunable(ctx, 11)
	if err != nil {
		return err
	}
	lab.Equal("t=11: the three acked events are prunable", would2, queue.PruneResult{Events: 3})
	res, err := lab.prune(ctx, q, 11, 2)
	if err != nil {
		return err
	}
	lab.Equal("the first batch of 2 is full: more", res, queue.PruneResult{Events: 2, More: true})
	if res, err = lab.prune(ctx, q, 11, 2); err != nil {
		return err
	}
	lab.Equal("the second batch deletes the last one", res, queue.PruneResult{Events: 1})
	_, err = q.Event(ctx, "a-1")
	lab.expectErr("a-1 is gone from the queue", err, queue.ErrNotFound)
	if err := lab.expectEvent(ctx, q, "a-3, in flight, is never pruned", "a-3", "inflight gen 1 attempts 1 lifetime 1 lease 7"); err != nil {
		return err
	}

	// The stalled claim expired at t=7: the take-over redelivers a-3, whose
	// receipt is gone.
	st, ok, err := lab.step(ctx, relay, 11)
	if err != nil {
		return err
	}
	lab.Check("t=11: the take-over's redelivery of a-3 is answered pruned and acks it",
		ok && st.Claim.EventID == "a-3" && st.Received == receiver.Pruned && st.Settled == queue.Acked, "%s", st)
	if err := lab.expectTotals(ctx, r, "a", 7, "b", 10); err != nil {
		return err
	}
	if err := lab.expectAckedAt(ctx, q, "a-3 is acked at the take-over's tick", "a-3 acked (acked_at 11)"); err != nil {
		return err
	}

	// Numbering goes on after pruning.
	if err := lab.enqueueAll(ctx, q, 12, Ev("a-4", "a", 8), Ev("b-2", "b", 20)); err != nil {
		return err
	}
	n, err := relay.Drain(ctx, 12)
	if err != nil {
		return err
	}
	lab.Trace("t=12 drain -> %d delivered", n)
	lab.Equal("t=12: a-4 (a#4) and b-2 (b#2) are delivered", n, 2)
	a4, err := q.Event(ctx, "a-4")
	if err != nil {
		return err
	}
	lab.Equal("a-4 took seq 4 after the pruned a-1..a-3 and is acked", []any{a4.Seq, Describe(a4)}, []any{int64(4), "acked gen 1 attempts 1 lifetime 1"})
	flows, err = r.Flows(ctx)
	if err != nil {
		return err
	}
	lab.Equal("the receiver accepted a#4 and b#2 after the pruned marks", describeReceiverFlows(flows),
		[]string{"a next 5 total 15 pruned through 3", "b next 3 total 30 pruned through 1"})
	return nil
}
