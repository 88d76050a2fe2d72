package experiment

import (
	"bytes"
	"context"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// atomicScenarios make the second write of an operation fail with a trigger
// and find the first one undone (docs/contract.md §2.7).
func atomicScenarios() []Scenario {
	return []Scenario{
		{
			Name:   "atomic-enqueue",
			Clause: "§2.7, §2.1 (enqueue is atomic)",
			Shows:  "a trigger makes the event insert fail after the flow's seq number was taken: the enqueue fails and the seq counter, flow and clock mark are unchanged; without the trigger the event gets the same seq",
			Run:    atomicEnqueue,
		},
		{
			Name:   "atomic-receive",
			Clause: "§2.7, §3.6 (accept is atomic)",
			Shows:  "a trigger makes the total update fail after the receipt insert: the receive fails and leaves no receipt and no total; without the trigger the message is accepted",
			Run:    atomicReceive,
		},
		{
			Name:   "atomic-redrive",
			Clause: "§2.7, §2.5 (redrive and its audit row are atomic)",
			Shows:  "a trigger makes the audit insert fail after the event update: the redrive fails and the event is still quarantined with its generation; without the trigger the redrive and its audit row land together",
			Run:    atomicRedrive,
		},
	}
}

// triggerPrefix starts the message of every trigger the experiment installs.
const triggerPrefix = "experiment trigger "

// failWith installs a trigger that aborts the given write on a table of
// file (a RAISE(ABORT) trigger on SQLite, a PL/pgSQL one on PostgreSQL), and
// returns a function that drops it again.
func (l *Lab) failWith(ctx context.Context, file, name, event string) (func() error, string, error) {
	msg := triggerPrefix + name + " fails"
	dropTrigger, err := l.Backend().failWrites(ctx, l, file, name, event, msg)
	if err != nil {
		return nil, "", err
	}
	l.Trace("trigger %s installed in %s: BEFORE %s -> RAISE(ABORT)", name, file, event)
	drop := func() error {
		if err := dropTrigger(); err != nil {
			return err
		}
		l.Trace("trigger %s dropped", name)
		return nil
	}
	return drop, msg, nil
}

// expectTriggered checks that err is the trigger's abort.
func (l *Lab) expectTriggered(name string, err error, msg string) {
	if err != nil && strings.Contains(err.Error(), msg) {
		l.Check(name, true, "failed with the trigger's abort")
		return
	}
	l.Check(name, false, "error %v, want the trigger's abort %q", err, msg)
}

func atomicEnqueue(ctx context.Context, lab *Lab) error {
	q, err := lab.Queue()
	if err != nil {
		return err
	}
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 1), 1); err != nil {
		return err
	}
	drop, msg, err := lab.failWith(ctx, QueueFile, "fail_event_insert", "INSERT ON events")
	if err != nil {
		return err
	}
	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	_, err = lab.enqueue(ctx, q, Ev("a-2", "a", 2), 2)
	lab.expectTriggered("enqueue fails on the event insert", err, msg)
	_, err = q.EnqueueBatch(ctx, []queue.Event{Ev("b-1", "b", 3)}, 2)
	lab.Trace("t=2 enqueue batch [b-1] -> %s", errText(err))
	lab.expectTriggered("batch enqueue fails on the event insert", err, msg)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("seq counter, flows, events and clock mark unchanged", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))
	if err := drop(); err != nil {
		return err
	}
	got, err := lab.enqueue(ctx, q, Ev("a-2", "a", 2), 2)
	if err != nil {
		return err
	}
	lab.Equal("a-2 then gets seq 2: the failed enqueue consumed no number", got.Seq, int64(2))
	return nil
}

func atomicReceive(ctx context.Context, lab *Lab) error {
	r, err := lab.Receiver()
	if err != nil {
		return err
	}
	if _, err := lab.receive(ctx, r, receiver.Message{ID: "r-1", Flow: "r", Seq: 1, Body: Body(5)}); err != nil {
		return err
	}
	drop, msg, err := lab.failWith(ctx, ReceiverFile, "fail_total_update", "UPDATE ON flows")
	if err != nil {
		return err
	}
	before, err := receiverJSON(ctx, r)
	if err != nil {
		return err
	}
	m := receiver.Message{ID: "r-2", Flow: "r", Seq: 2, Body: Body(7)}
	_, err = lab.receive(ctx, r, m)
	lab.expectTriggered("receive fails on the total update", err, msg)
	after, err := receiverJSON(ctx, r)
	if err != nil {
		return err
	}
	lab.Check("the receipt insert is undone: receipts, totals, conflicts unchanged", bytes.Equal(before, after), "receiver snapshot byte-identical: %v", bytes.Equal(before, after))
	if err := drop(); err != nil {
		return err
	}
	out, err := lab.receive(ctx, r, m)
	if err != nil {
		return err
	}
	lab.Equal("the same message is then accepted (not a duplicate)", out, receiver.Accepted)
	return lab.expectTotal(ctx, r, "r", 12)
}

func atomicRedrive(ctx context.Context, lab *Lab) error {
	q, err := lab.Queue()
	if err != nil {
		return err
	}
	r, err := lab.Receiver(WithMaxDelta(100))
	if err != nil {
		return err
	}
	lab.Trace("receiver opened with MaxDelta 100")
	relay := &Relay{Queue: q, Receiver: r}
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 250), 0); err != nil {
		return err
	}
	for _, now := range []clock.Tick{0, 2, 6} {
		if _, _, err := lab.step(ctx, relay, now); err != nil {
			return err
		}
	}
	drop, msg, err := lab.failWith(ctx, QueueFile, "fail_audit_insert", "INSERT ON audit")
	if err != nil {
		return err
	}
	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	const reason = "receiver max_delta to be raised"
	err = q.Redrive(ctx, "a-1", 3, reason, 10)
	lab.Trace("t=10 redrive a-1 gen 3 (%q) -> %s", reason, errText(err))
	lab.expectTriggered("redrive fails on the audit insert", err, msg)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("the event update is undone: event, audit and clock mark unchanged", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))
	if err := lab.expectEvent(ctx, q, "a-1 still quarantined in generation 3", "a-1", "quarantined gen 3 attempts 3 lifetime 3 reason unsupported_delta"); err != nil {
		return err
	}
	if err := drop(); err != nil {
		return err
	}
	if err := q.Redrive(ctx, "a-1", 3, reason, 10); err != nil {
		return err
	}
	lab.Trace("t=10 redrive a-1 gen 3 (%q) -> ok", reason)
	if err := lab.expectEvent(ctx, q, "the redrive then lands", "a-1", "pending gen 4 attempts 0 lifetime 3 available 10"); err != nil {
		return err
	}
	audit, err := q.Audit(ctx)
	if err != nil {
		return err
	}
	lab.Equal("exactly one audit row", len(audit), 1)
	return nil
}
