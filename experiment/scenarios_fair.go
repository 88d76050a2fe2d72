package experiment

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/fairness"
	"github.com/fairrelay/fairrelay/queue"
)

// fairScenarios are the scheduling scenarios: what min-served guarantees and
// what it does not.
func fairScenarios() []Scenario {
	return []Scenario{
		{
			Name:   "fair-rotation",
			Clause: "§2.3 (fairness.MinServed order, tickets, served)",
			Shows:  "three flows with three events each are served a, b, c, a, b, c, a, b, c, exactly as fairness.Simulate with MinServed predicts",
			Run:    fairRotation,
		},
		{
			Name:   "lexicographic-starvation",
			Clause: "§5 (counterexample, fairness only)",
			Shows:  "lexicographic order never serves b while a always has work; min-served serves b at the second step",
			Run:    lexicographicStarvation,
		},
		{
			Name:   "new-flows-crowd-out",
			Clause: "§2.3, §5 (kept counterexample: no global fairness or maximum wait)",
			Shows:  "on the real store, a new flow arriving before every claim (served 0) keeps an old flow (served 1) waiting for as long as new flows keep coming",
			Run:    newFlowsCrowdOut,
		},
		{
			Name:   "starvation-bound",
			Clause: "§2.3 (min-served bound for a lone event)",
			Shows:  "one flow floods 1,000 events; a lone event of another flow is claimed within the next two claims",
			Run:    starvationBound,
		},
	}
}

func fairRotation(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	want := map[string]int64{}
	for _, f := range []string{"a", "b", "c"} {
		unit := map[string]int{"a": 1, "b": 10, "c": 100}[f]
		for i := 1; i <= 3; i++ {
			if _, err := lab.enqueue(ctx, relay.Queue, Ev(fmt.Sprintf("%s-%d", f, i), f, unit*i), 0); err != nil {
				return err
			}
			want[f] += int64(unit * i)
		}
	}
	var order []string
	var tickets []int64
	for t := clock.Tick(1); t <= 9; t++ {
		st, ok, err := lab.step(ctx, relay, t)
		if err != nil {
			return err
		}
		if !ok {
			lab.Check("nine claims", false, "nothing dispatchable at t=%d", t)
			break
		}
		order = append(order, st.Claim.Flow)
		tickets = append(tickets, st.Claim.Ticket)
	}
	model := fairness.Simulate(fairness.MinServed, fairness.Backlogs(map[string]int{"a": 3, "b": 3, "c": 3}), 9)
	lab.Equal("claim order is fairness.Simulate(MinServed)", order, model)
	lab.Equal("claim order rotates", strings.Join(order, " "), "a b c a b c a b c")
	lab.Equal("tickets are 1..9 in claim order", tickets, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9})
	if err := lab.expectNothing(ctx, relay, 10, "drained: nothing left to claim"); err != nil {
		return err
	}
	for _, f := range []string{"a", "b", "c"} {
		if err := lab.expectTotal(ctx, relay.Receiver, f, want[f]); err != nil {
			return err
		}
	}
	return nil
}

func lexicographicStarvation(_ context.Context, lab *Lab) error {
	arrivals := func(step int) []string {
		if step == 0 {
			return []string{"a", "b"}
		}
		return []string{"a"} // a is never empty
	}
	const steps = 50
	lex := fairness.Simulate(fairness.Lexicographic, arrivals, steps)
	minServed := fairness.Simulate(fairness.MinServed, arrivals, steps)
	lab.Trace("arrivals: a and b at step 0, then one more a at every step")
	lab.Trace("lexicographic, first 8 of %d steps: %s", steps, strings.Join(lex[:8], " "))
	lab.Trace("min-served,    first 8 of %d steps: %s", steps, strings.Join(minServed[:8], " "))
	lab.Equal("lexicographic serves b in 50 steps (starvation)", count(lex, "b"), 0)
	lab.Equal("lexicographic serves a at every step", count(lex, "a"), steps)
	lab.Equal("min-served serves b first at step", slices.Index(minServed, "b"), 1)
	lab.Equal("min-served serves b exactly once (its only event)", count(minServed, "b"), 1)
	return nil
}

func newFlowsCrowdOut(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	if err := lab.enqueueAll(ctx, relay.Queue, 0, Ev("old-1", "old", 1), Ev("old-2", "old", 2)); err != nil {
		return err
	}
	const newcomers = 12
	newFlow := func(i int) string { return fmt.Sprintf("new-%02d", i) }
	var order []string
	for i := 0; i <= newcomers; i++ {
		now := clock.Tick(1 + i)
		if i > 0 {
			if _, err := lab.enqueue(ctx, relay.Queue, Ev(newFlow(i)+"-1", newFlow(i), 5), now); err != nil {
				return err
			}
		}
		st, ok, err := lab.step(ctx, relay, now)
		if err != nil {
			return err
		}
		if ok {
			order = append(order, st.Claim.Flow)
		}
	}
	model := fairness.Simulate(fairness.MinServed, func(step int) []string {
		if step == 0 {
			return []string{"old", "old"}
		}
		return []string{newFlow(step)}
	}, newcomers+1)
	lab.Equal("claim order is fairness.Simulate(MinServed) with a new flow every step", order, model)
	lab.Equal("old is served once, then never while new flows keep coming", count(order, "old"), 1)
	if err := lab.expectEvent(ctx, relay.Queue, "old-2 has waited through 12 claims", "old-2", "pending gen 0 attempts 0 lifetime 0 available 0"); err != nil {
		return err
	}
	st, ok, err := lab.step(ctx, relay, newcomers+2)
	if err != nil {
		return err
	}
	lab.Check("once new traffic stops, old-2 is claimed next", ok && st.Claim.EventID == "old-2", "claimed %q", st.Claim.EventID)
	return lab.expectTotal(ctx, relay.Receiver, "old", 3)
}

func starvationBound(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	const flood = 1000
	batch := make([]queue.Event, flood)
	for i := range batch {
		batch[i] = Ev(fmt.Sprintf("flood-%04d", i+1), "flood", 1)
	}
	got, err := relay.Queue.EnqueueBatch(ctx, batch, 0)
	if err != nil {
		return err
	}
	lab.Trace("t=0 enqueue batch flood-0001..flood-%04d (flow flood, body %s) -> seq %d..%d", flood, Body(1), got[0].Seq, got[len(got)-1].Seq)
	for range 3 {
		if _, _, err := lab.step(ctx, relay, 1); err != nil {
			return err
		}
	}
	if _, err := lab.enqueue(ctx, relay.Queue, Ev("lone-1", "lone", 7), 2); err != nil {
		return err
	}
	var next []string
	for range 2 {
		st, ok, err := lab.step(ctx, relay, 2)
		if err != nil {
			return err
		}
		if ok {
			next = append(next, st.Claim.EventID)
		}
	}
	lab.Check("the lone event is claimed within the next two claims", slices.Contains(next, "lone-1"), "next two claims: %v", next)
	lab.Equal("next two claims", next, []string{"lone-1", "flood-0004"})
	if err := lab.expectTotal(ctx, relay.Receiver, "lone", 7); err != nil {
		return err
	}
	return lab.expectTotal(ctx, relay.Receiver, "flood", 4)
}

// relay opens both stores of the scenario (default options) and a relay
// over them.
func (l *Lab) relay() (*Relay, error) {
	q, err := l.Queue()
	if err != nil {
		return nil, err
	}
	r, err := l.Receiver()
	if err != nil {
		return nil, err
	}
	return &Relay{Queue: q, Receiver: r}, nil
}

func count(s []string, x string) int {
	n := 0
	for _, v := range s {
		if v == x {
			n++
		}
	}
	return n
}
