package experiment

import (
	"bytes"
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// destScenarios are destinations (docs/contract.md §7.11): a paused
// destination's flows are left out and keep their place.
func destScenarios() []Scenario {
	return []Scenario{
		{
			Name:   "destination-pause",
			Clause: "§7.11 (a paused destination's flows are left out of every claim while the others are served in the fair order; they keep their served counts and place; enqueues go on; pause and resume audited; secrets never shown)",
			Shows:  "flows a1, a2 deliver to alpha, b1, b2 to beta, c to the default destination; after one round each at t=1, beta is paused at t=2: a1, a2 and c are drained (served 1 to 3) while b1 and b2 stay at served 1 with their backlog, b1-4 is enqueued into a paused destination's flow, a wrong pause and resume and an event naming the other destination are refused and change nothing; resumed at t=4, b1 and b2 are claimed first (served 1 < 3): they kept their place; the audit holds two registrations, the pause and the resume, never a secret",
			Run:    destinationPause,
		},
	}
}

// destinations is q as a queue.DestinationStore.
func destinations(q QueueStore) (queue.DestinationStore, error) {
	d, ok := q.(queue.DestinationStore)
	if !ok {
		return nil, fmt.Errorf("%T has no destinations", q)
	}
	return d, nil
}

// destEv is an event of flow to dest with the body {"delta":delta}.
func destEv(id, flow, dest string, delta int) queue.Event {
	e := Ev(id, flow, delta)
	e.Destination = dest
	return e
}

// describeDestFlows is each flow's destination, served count and backlog.
func describeDestFlows(fs []queue.FlowState) []string {
	out := []string{}
	for _, f := range fs {
		d := f.Destination
		if d == queue.DefaultDestination {
			d = "(default)"
		}
		out = append(out, fmt.Sprintf("%s to %s served %d backlog %d", f.Flow, d, f.Served, f.Backlog))
	}
	return out
}

// expectDestFlows checks describeDestFlows of the queue's flows.
func (l *Lab) expectDestFlows(ctx context.Context, q QueueStore, name string, want ...string) error {
	fs, err := q.Flows(ctx)
	if err != nil {
		return err
	}
	l.Equal(name, describeDestFlows(fs), want)
	return nil
}

// drainIDs runs relay steps at now until nothing is dispatchable and
// returns the events delivered, in order.
func (l *Lab) drainIDs(ctx context.Context, r *Relay, now clock.Tick) ([]string, error) {
	ids := []string{}
	for {
		st, ok, err := l.step(ctx, r, now)
		if err != nil || !ok {
			return ids, err
		}
		ids = append(ids, st.Claim.EventID)
	}
}

func destinationPause(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	ds, err := destinations(q)
	if err != nil {
		return err
	}
	const secret = "whsec-never-shown"
	for _, name := range []string{"alpha", "beta"} {
		d := queue.Destination{Name: name, URL: "http://127.0.0.1:9/" + name, Secrets: []string{secret + "-" + name}}
		err := ds.PutDestination(ctx, d, "register "+name, 0)
		lab.Trace("t=0 register destination %s -> %s", name, okOr(err))
		if !lab.NoError("t=0: destination "+name+" is registered", err) {
			return err
		}
	}
	if err := lab.enqueueAll(ctx, q, 0,
		destEv("a1-1", "a1", "alpha", 1), destEv("a1-2", "a1", "", 2), destEv("a1-3", "a1", "alpha", 3),
		destEv("a2-1", "a2", "alpha", 10), destEv("a2-2", "a2", "", 20),
		destEv("b1-1", "b1", "beta", 100), destEv("b1-2", "b1", "", 200), destEv("b1-3", "b1", "", 300),
		destEv("b2-1", "b2", "beta", 500), destEv("b2-2", "b2", "beta", 600),
		Ev("c-1", "c", 7), Ev("c-2", "c", 8), Ev("c-3", "c", 9)); err != nil {
		return err
	}
	ids, err := lab.drainRound(ctx, relay, 1, 5)
	if err != nil {
		return err
	}
	lab.Equal("t=1: one round, every flow served once in flow order", ids, []string{"a1-1", "a2-1", "b1-1", "b2-1", "c-1"})

	err = ds.PauseDestination(ctx, "beta", "receiver beta is down", 2)
	lab.Trace("t=2 pause destination beta -> %s", okOr(err))
	lab.NoError("t=2: destination beta is paused", err)
	ids, err = lab.drainIDs(ctx, relay, 2)
	if err != nil {
		return err
	}
	lab.Equal("t=2: a1, a2 and c are drained in the fair order while beta is paused", ids,
		[]string{"a1-2", "a2-2", "c-2", "a1-3", "c-3"})
	if err := lab.expectDestFlows(ctx, q, "while beta is paused: b1 and b2 keep served 1 and their backlog",
		"a1 to alpha served 3 backlog 0", "a2 to alpha served 2 backlog 0",
		"b1 to beta served 1 backlog 2", "b2 to beta served 1 backlog 1", "c to (default) served 3 backlog 0"); err != nil {
		return err
	}
	got, err := lab.enqueue(ctx, q, destEv("b1-4", "b1", "beta", 400), 3)
	if err != nil {
		return err
	}
	lab.Equal("t=3: an enqueue into a paused destination's flow goes on (seq 4)", got.Seq, int64(4))

	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.expectErr("pausing a paused destination is refused", ds.PauseDestination(ctx, "beta", "again", 3), queue.ErrDestinationPaused)
	lab.expectErr("resuming a destination that is not paused is refused", ds.ResumeDestination(ctx, "alpha", "why not", 3), queue.ErrDestinationNotPaused)
	lab.expectErr("pausing an unknown destination is refused", ds.PauseDestination(ctx, "gamma", "typo", 3), queue.ErrUnknownDestination)
	_, err = q.Enqueue(ctx, destEv("b2-3", "b2", "alpha", 700), 3)
	lab.expectErr("an event naming another destination than its flow's is refused", err, queue.ErrDestinationMismatch)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("the refused calls changed nothing", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))
	if err := lab.expectNothing(ctx, relay, 3, "t=3: nothing of beta is dispatchable while it is paused"); err != nil {
		return err
	}

	err = ds.ResumeDestination(ctx, "beta", "receiver beta is back", 4)
	lab.Trace("t=4 resume destination beta -> %s", okOr(err))
	lab.NoError("t=4: destination beta is resumed", err)
	ids, err = lab.drainIDs(ctx, relay, 4)
	if err != nil {
		return err
	}
	lab.Equal("t=4: b1 and b2 come first (served 1, their place kept), then in turn", ids,
		[]string{"b1-2", "b2-2", "b1-3", "b1-4"})
	if err := lab.expectDestFlows(ctx, q, "at the end",
		"a1 to alpha served 3 backlog 0", "a2 to alpha served 2 backlog 0",
		"b1 to beta served 4 backlog 0", "b2 to beta served 2 backlog 0", "c to (default) served 3 backlog 0"); err != nil {
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
	lab.Equal("the audit holds the registrations, the pause and the resume, secrets as a count", rows, []string{
		`t=0 destination {"name":"alpha","new":{"name":"alpha","url":"http://127.0.0.1:9/alpha","secrets":1}} "register alpha"`,
		`t=0 destination {"name":"beta","new":{"name":"beta","url":"http://127.0.0.1:9/beta","secrets":1}} "register beta"`,
		`t=2 destination_pause {"name":"beta","old":{"name":"beta","url":"http://127.0.0.1:9/beta","secrets":1},"new":{"name":"beta","url":"http://127.0.0.1:9/beta","secrets":1,"paused":"receiver beta is down"}} "receiver beta is down"`,
		`t=4 destination_resume {"name":"beta","old":{"name":"beta","url":"http://127.0.0.1:9/beta","secrets":1,"paused":"receiver beta is down"},"new":{"name":"beta","url":"http://127.0.0.1:9/beta","secrets":1}} "receiver beta is back"`,
	})
	snap, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("no secret in the queue's snapshot", !bytes.Contains(snap, []byte(secret)), "snapshot holds %q: %v", secret, bytes.Contains(snap, []byte(secret)))
	return lab.expectTotals(ctx, relay.Receiver, "a1", 6, "a2", 30, "b1", 1000, "b2", 1100, "c", 24)
}

// drainRound runs n relay steps at now and returns the events delivered.
func (l *Lab) drainRound(ctx context.Context, r *Relay, now clock.Tick, n int) ([]string, error) {
	ids := []string{}
	for range n {
		st, ok, err := l.step(ctx, r, now)
		if err != nil || !ok {
			return ids, err
		}
		ids = append(ids, st.Claim.EventID)
	}
	return ids, nil
}
