package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/fairness"
	"github.com/fairrelay/fairrelay/queue"
)

// rotationScenarios are the scenarios of the opt-in rotation policy
// (docs/contract.md §7.6): the bound that min-served lacks, weighted shares
// and an audited weight change. Each queue is created with
// queue.FairRotation; min-served queues are untouched.
func rotationScenarios() []Scenario {
	return []Scenario{
		{
			Name:   "rotation-bounds-crowding",
			Clause: "§7.6 (rotation: a new flow joins at the tail; bounded wait)",
			Shows:  "new-flows-crowd-out's schedule under rotation: old's second event is claimed at the second claim, within its bound, and every newcomer after it",
			Run:    rotationBoundsCrowding,
		},
		{
			Name:   "weighted-shares",
			Clause: "§7.6 (weights 1..1000: claims in proportion)",
			Shows:  "flows of weight 1, 2 and 4 that are always ready get 1,000, 2,000 and 4,000 of 7,000 claims (fairness.Rotation; the real store's first 280 claims are the same), every window within the stated tolerance",
			Run:    weightedShares,
		},
		{
			Name:   "weight-change-audited",
			Clause: "§7.6 (an operator's weight change: audited, from the next claim)",
			Shows:  "SetWeight refuses bad input and changes nothing; an accepted change writes a weight audit row and applies from the flow's next claim, as fairness.Rotation predicts; an enqueue with another weight is audited too",
			Run:    weightChangeAudited,
		},
	}
}

// rotationPolicy is the default policy with the rotation order.
func rotationPolicy() queue.Policy {
	p := queue.DefaultPolicy()
	p.Fairness = queue.FairRotation
	return p
}

// rotationRelay opens the scenario's queue with the rotation policy and
// its receiver, and a relay over them.
func (l *Lab) rotationRelay() (*Relay, error) {
	q, err := l.Queue(WithPolicy(rotationPolicy()))
	if err != nil {
		return nil, err
	}
	r, err := l.Receiver()
	if err != nil {
		return nil, err
	}
	return &Relay{Queue: q, Receiver: r}, nil
}

func rotationBoundsCrowding(ctx context.Context, lab *Lab) error {
	relay, err := lab.rotationRelay()
	if err != nil {
		return err
	}
	if err := lab.enqueueAll(ctx, relay.Queue, 0, Ev("old-1", "old", 1), Ev("old-2", "old", 2)); err != nil {
		return err
	}
	const newcomers = 12
	newFlow := func(i int) string { return fmt.Sprintf("new-%02d", i) }
	var (
		order   []string
		waitOld = -1 // claims of other flows between old-2 becoming ready and its claim
		others  []string
	)
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
		if !ok {
			continue
		}
		order = append(order, st.Claim.Flow)
		switch {
		case st.Claim.EventID == "old-1":
			// old-2 is old's head and ready from this ack on: the flows
			// backlogged now are the set A of its bound.
			flows, err := relay.Queue.Flows(ctx)
			if err != nil {
				return err
			}
			for _, f := range flows {
				if f.Flow != "old" && f.HeadSeq != 0 {
					others = append(others, f.Flow)
				}
			}
			waitOld = 0
		case st.Claim.EventID == "old-2":
		case waitOld >= 0 && count(order, "old") < 2:
			waitOld++
		}
	}
	model, err := fairness.SimulateRotation(nil, func(step int) []string {
		if step == 0 {
			return []string{"old", "old"}
		}
		return []string{newFlow(step)}
	}, newcomers+1)
	if err != nil {
		return err
	}
	lab.Equal("claim order is fairness.SimulateRotation with a new flow every step", order, model)
	lab.Equal("old is served at the first two claims", order[:2], []string{"old", "old"})
	// B(F) = Σ_{j ∈ A} (⌈w_j / w_lo⌉ + 1); every weight is 1, so each term is 2.
	bound := 2 * len(others)
	lab.Check("old-2 is claimed within its bound B = Σ_{j∈A}(⌈w_j/w_lo⌉+1) over the flows backlogged when it became ready",
		waitOld >= 0 && waitOld <= bound, "waited %d claims of other flows; A = %v, all weights 1, B = 2·|A| = %d", waitOld, others, bound)
	var arrivals []string
	for i := 1; i < newcomers; i++ {
		arrivals = append(arrivals, newFlow(i))
	}
	lab.Equal("then the newcomers in arrival order, each one step after it arrives (new-12 waits behind new-11)", order[2:], arrivals)
	return lab.expectTotal(ctx, relay.Receiver, "old", 3)
}

// sharesFile is the second queue file of weighted-shares: the 7,000 claims
// run there so that the scenario's queue.db, the golden snapshot, stays
// small.
const sharesFile = "shares.db"

func weightedShares(ctx context.Context, lab *Lab) error {
	weights := map[string]int{"a": 1, "b": 2, "c": 4}
	flows := []string{"a", "b", "c"}
	// The scenario's queue: two rounds of 7 claims, traced.
	relay, err := lab.rotationRelay()
	if err != nil {
		return err
	}
	for _, f := range flows {
		var es []queue.Event
		for i := 1; i <= 2*weights[f]; i++ {
			e := Ev(fmt.Sprintf("%s-%d", f, i), f, 1)
			e.Weight = weights[f]
			es = append(es, e)
		}
		got, err := relay.Queue.EnqueueBatch(ctx, es, 0)
		if err != nil {
			return err
		}
		lab.Trace("t=0 enqueue batch %s-1..%s-%d (flow %s, weight %d) -> seq %d..%d", f, f, len(es), f, weights[f], got[0].Seq, got[len(got)-1].Seq)
	}
	var order []string
	for t := clock.Tick(1); t <= 14; t++ {
		st, ok, err := lab.step(ctx, relay, t)
		if err != nil {
			return err
		}
		if ok {
			order = append(order, st.Claim.Flow)
		}
	}
	backlog := map[string]int{"a": 2, "b": 4, "c": 8}
	model, err := fairness.SimulateRotation(func(f string) int { return weights[f] }, fairness.Backlogs(backlog), 14)
	if err != nil {
		return err
	}
	lab.Equal("14 claims on queue.db are fairness.SimulateRotation's", strings.Join(order, " "), strings.Join(model, " "))
	lab.Equal("14 claims: a, b, c get 2, 4, 8", []int{count(order, "a"), count(order, "b"), count(order, "c")}, []int{2, 4, 8})

	// 7,000 claims in logical time, by fairness.SimulateRotation (three
	// flows that always have work), and the first 280 of them on a second
	// rotation queue whose flows always have a backlog: each claim is acked
	// at once (two write transactions per claim; 7,000 would outlast the
	// scenario's watchdog on a slow disk, and so did 1,400 under the race
	// detector).
	const claims, onStore = 7000, 280
	// Two events per flow at step 0, then one more per flow at every step:
	// a flow's backlog never empties, so no flow ever leaves and re-joins.
	always := func(step int) []string {
		if step == 0 {
			return []string{"a", "a", "b", "b", "c", "c"}
		}
		return flows
	}
	sim, err := fairness.SimulateRotation(func(f string) int { return weights[f] }, always, claims)
	if err != nil {
		return err
	}
	q, err := lab.OpenQueue(sharesFile, WithPolicy(rotationPolicy()))
	if err != nil {
		return err
	}
	for _, f := range flows {
		es := make([]queue.Event, onStore*weights[f]/7+1)
		for i := range es {
			es[i] = queue.Event{ID: fmt.Sprintf("%s-%d", f, i+1), Flow: f, Body: Body(1), Weight: weights[f]}
		}
		if _, err := q.EnqueueBatch(ctx, es, 0); err != nil {
			return err
		}
	}
	lab.Trace("%s: a, b, c of weight 1, 2, 4 with %d, %d and %d events; %d claims at t=1, each acked at once",
		sharesFile, onStore/7+1, 2*onStore/7+1, 4*onStore/7+1, onStore)
	got := make([]string, 0, onStore)
	for len(got) < onStore {
		c, ok, err := q.Claim(ctx, 1)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if _, err := q.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, 1); err != nil {
			return err
		}
		got = append(got, c.Flow)
	}
	lab.Equal("claims made on shares.db", len(got), onStore)
	lab.Check("shares.db's 280 claims are fairness.SimulateRotation's first 280", slices.Equal(got, sim[:min(onStore, len(sim))]), "equal: %v", slices.Equal(got, sim[:min(onStore, len(sim))]))
	lab.Equal("shares of a, b, c in shares.db's 280 claims", []int{count(got, "a"), count(got, "b"), count(got, "c")}, []int{40, 80, 160})
	lab.Equal("shares of a, b, c in 7,000 claims", []int{count(sim, "a"), count(sim, "b"), count(sim, "c")}, []int{1000, 2000, 4000})
	// Tolerance (docs/contract.md §7.6): in every window of N consecutive
	// claims, |c_i − N·w_i/W| < 1 + (n − 2)·w_i/W + 4·w_i/S.
	const total, n = 7, 3
	var worst []string
	ok := true
	for _, f := range flows {
		w := weights[f]
		tol := 1 + float64(n-2)*float64(w)/total + 4*float64(w)/float64(fairness.Scale)
		dev := windowDeviation(sim, f, float64(w)/total)
		ok = ok && dev < tol
		worst = append(worst, fmt.Sprintf("%s %.3f < %.3f", f, dev, tol))
	}
	lab.Check("every window of the 7,000 claims is within the tolerance 1 + (n−2)·w_i/W + 4·w_i/S", ok, "largest deviation per flow: %s", strings.Join(worst, ", "))
	sn, err := rotationOf(ctx, q)
	if err != nil {
		return err
	}
	var served []string
	for _, f := range sn.Flows {
		served = append(served, fmt.Sprintf("%s served %d pass %s", f.Flow, f.Served, orNil(f.Pass)))
	}
	var vnow, vtail string = "nil", "nil"
	if sn.Rotation != nil {
		vnow, vtail = fmt.Sprint(sn.Rotation.VNow), fmt.Sprint(sn.Rotation.VTail)
	}
	lab.Check("shares.db flows", true, "%s; vnow %s, vtail %s", strings.Join(served, ", "), vnow, vtail)
	return nil
}

// rotationView is the part of a queue snapshot that shows the rotation
// state, read from its JSON so that it reads either backend's snapshot.
type rotationView struct {
	Flows []struct {
		Flow   string `json:"flow"`
		Served int64  `json:"served"`
		Pass   *int64 `json:"pass"`
	} `json:"flows"`
	Rotation *struct {
		VNow  int64 `json:"vnow"`
		VTail int64 `json:"vtail"`
	} `json:"rotation"`
}

// rotationOf reads q's rotation state from its snapshot.
func rotationOf(ctx context.Context, q QueueStore) (rotationView, error) {
	var v rotationView
	sn, err := queueSnapshot(ctx, q)
	if err != nil {
		return v, err
	}
	data, err := json.Marshal(sn)
	if err != nil {
		return v, err
	}
	return v, json.Unmarshal(data, &v)
}

// orNil prints *p, or nil.
func orNil(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// setWeight changes a flow's weight on a queue that keeps weights
// (queue.Weighter: both backends).
func setWeight(ctx context.Context, q QueueStore, flow string, weight int, reason string, now clock.Tick) error {
	w, ok := q.(queue.Weighter)
	if !ok {
		return fmt.Errorf("%T cannot set a flow's weight", q)
	}
	return w.SetWeight(ctx, flow, weight, reason, now)
}

// okOr is "ok" for no error, else errText(err).
func okOr(err error) string {
	if err == nil {
		return "ok"
	}
	return errText(err)
}

// jsonText is v as JSON, or the encoding error.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// windowDeviation is the largest |c − N·share| over every window of
// consecutive claims, c the claims of flow f in it and N its length.
func windowDeviation(claims []string, f string, share float64) float64 {
	// d[k] = claims of f among the first k − k·share; a window (i, j] deviates by d[j] − d[i].
	lo, hi, c := 0.0, 0.0, 0
	best := 0.0
	for k, g := range claims {
		if g == f {
			c++
		}
		d := float64(c) - float64(k+1)*share
		best = max(best, d-lo, hi-d)
		lo, hi = min(lo, d), max(hi, d)
	}
	return best
}

func weightChangeAudited(ctx context.Context, lab *Lab) error {
	relay, err := lab.rotationRelay()
	if err != nil {
		return err
	}
	q := relay.Queue
	for _, f := range []string{"a", "b"} {
		for i := 1; i <= 10; i++ {
			if _, err := lab.enqueue(ctx, q, Ev(fmt.Sprintf("%s-%d", f, i), f, 1), 0); err != nil {
				return err
			}
		}
	}
	var rot fairness.Rotation
	for _, f := range []string{"a", "b"} {
		if err := rot.Arrive(f); err != nil {
			return err
		}
	}
	var order, model []string
	claim := func(t clock.Tick) error {
		st, ok, err := lab.step(ctx, relay, t)
		if err != nil {
			return err
		}
		if ok {
			order = append(order, st.Claim.Flow)
		}
		f, _ := rot.Pick()
		model = append(model, f)
		return nil
	}
	for t := clock.Tick(1); t <= 4; t++ {
		if err := claim(t); err != nil {
			return err
		}
	}
	before, err := queueSnapshot(ctx, q)
	if err != nil {
		return err
	}
	for _, bad := range []struct {
		what   string
		flow   string
		weight int
		reason string
	}{
		{"weight 0", "b", 0, "paying tenant"},
		{"weight 1001", "b", 1001, "paying tenant"},
		{"no reason", "b", 3, ""},
		{"unknown flow", "zz", 3, "paying tenant"},
	} {
		err := setWeight(ctx, q, bad.flow, bad.weight, bad.reason, 5)
		lab.Trace("t=5 set weight of %s to %d, reason %q -> %s", bad.flow, bad.weight, bad.reason, okOr(err))
		lab.Check("set weight refused: "+bad.what, err != nil, "%s", okOr(err))
	}
	after, err := queueSnapshot(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("refused weight changes change nothing", jsonText(before) == jsonText(after), "snapshots equal: %v", jsonText(before) == jsonText(after))
	err = setWeight(ctx, q, "b", 3, "paying tenant", 5)
	lab.Trace("t=5 set weight of b to 3, reason %q -> %s", "paying tenant", okOr(err))
	if !lab.NoError("set weight of b to 3", err) {
		return nil
	}
	if err := rot.SetWeight("b", 3); err != nil {
		return err
	}
	for t := clock.Tick(6); t <= 13; t++ {
		if err := claim(t); err != nil {
			return err
		}
	}
	lab.Equal("claim order is fairness.Rotation's with the weight change after 4 claims", strings.Join(order, " "), strings.Join(model, " "))
	lab.Equal("claims of a, b after the change", []int{count(order[4:], "a"), count(order[4:], "b")}, []int{2, 6})
	// A producer's enqueue with another weight changes it too, audited with
	// the fixed reason "enqueue".
	e := Ev("a-11", "a", 1)
	e.Weight = 2
	got, err := q.Enqueue(ctx, e, 14)
	lab.Trace("t=14 enqueue a-11 (flow a, weight 2) -> seq %d, %s", got.Seq, okOr(err))
	if !lab.NoError("enqueue a-11 with weight 2", err) {
		return nil
	}
	audit, err := q.AuditAll(ctx)
	if err != nil {
		return err
	}
	var rows []string
	for _, a := range audit {
		rows = append(rows, fmt.Sprintf("%s at %d reason %q detail %s", a.Kind, a.At, a.Reason, a.Detail))
	}
	lab.Equal("audit rows", rows, []string{`weight at 5 reason "paying tenant" detail {"flow":"b","old":1,"new":3}`,
		`weight at 14 reason "enqueue" detail {"flow":"a","old":1,"new":2}`})
	return nil
}
