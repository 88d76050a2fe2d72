package fairness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestStrideIsExactOverAnyRun(t *testing.T) {
	t.Parallel()
	for _, w := range []int{1, 2, 3, 7, 16, 17, 641, 999, 1000} {
		lo, hi := Scale/int64(w), (Scale+int64(w)-1)/int64(w)
		var sum int64
		for s := int64(0); s < 5000; s++ {
			d := Stride(w, s)
			if d < lo || d > hi {
				t.Fatalf("Stride(%d, %d) = %d, want %d..%d", w, s, d, lo, hi)
			}
			sum += d
			// k claims from served 0 cost exactly floor(k*Scale/w).
			if want := (s + 1) * Scale / int64(w); sum != want {
				t.Fatalf("weight %d: %d claims cost %d, want %d", w, s+1, sum, want)
			}
		}
	}
	// Large served counts do not overflow.
	if d := Stride(1000, 1<<62); d < 720 || d > 721 {
		t.Fatalf("Stride(1000, 2^62) = %d", d)
	}
}

func TestRotationRules(t *testing.T) {
	t.Parallel()
	var r Rotation
	if err := r.SetWeight("b", 2); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a", "b"} {
		if err := r.Arrive(f); err != nil {
			t.Fatal(err)
		}
	}
	// a: P 0, J 1; b: P 0, J 2. The tie at P 0 goes to the earlier arrival.
	if f, _ := r.Pick(); f != "a" {
		t.Fatalf("first pick %q, want a", f)
	}
	if got, want := r.Clock(), (RotationClock{VNow: 0, VTail: Scale, Joins: 2}); got != want {
		t.Fatalf("Clock() = %+v, want %+v", got, want)
	}
	if f, _ := r.Pick(); f != "b" {
		t.Fatalf("second pick %q, want b", f)
	}
	fb, _ := r.Flow("b")
	if fb.Pass != Scale/2 || fb.Served != 1 || fb.Joined != 2 {
		t.Fatalf("b after one claim = %+v, want pass %d served 1 joined 2", fb, Scale/2)
	}
	// b (pass Scale/2) goes before a (pass Scale); then b and a tie at Scale: a joined first.
	for i, want := range []string{"b", "a", "b", "b", "a"} {
		if f, _ := r.Pick(); f != want {
			t.Fatalf("pick %d = %q, want %q", i+3, f, want)
		}
	}
	// A late arrival joins at vtail, behind everyone ready.
	if err := r.Arrive("c"); err != nil {
		t.Fatal(err)
	}
	fc, _ := r.Flow("c")
	if fc.Pass != r.Clock().VTail || fc.Joined != 3 {
		t.Fatalf("c = %+v, want pass vtail %d and J 3", fc, r.Clock().VTail)
	}
	// A flow blocked for a long time comes back at vnow, not at its old pass.
	if err := r.Block("a"); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		r.Pick()
	}
	fa, _ := r.Flow("a")
	if err := r.Ready("a"); err != nil {
		t.Fatal(err)
	}
	fa2, _ := r.Flow("a")
	if vnow := r.Clock().VNow; fa2.Pass != max(fa.Pass, vnow) || fa2.Pass < vnow {
		t.Fatalf("a after Ready: pass %d, want max(%d, vnow %d)", fa2.Pass, fa.Pass, vnow)
	}
	// Leave keeps P, J and served; the next Arrive moves it to the tail.
	if err := r.Leave("a"); err != nil {
		t.Fatal(err)
	}
	fa3, _ := r.Flow("a")
	if fa3.Pass != fa2.Pass || fa3.Joined != fa2.Joined || fa3.Served != fa2.Served || fa3.Backlogged || fa3.Ready {
		t.Fatalf("a after Leave = %+v, from %+v", fa3, fa2)
	}
}

func TestRotationBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	var r Rotation
	if err := r.Arrive("a"); err != nil {
		t.Fatal(err)
	}
	r.Pick()
	snap := func() any { return []any{r.Flows(), r.Clock()} }
	before := snap()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"weight 0", func() error { return r.SetWeight("a", 0) }, ErrWeight},
		{"weight 1001", func() error { return r.SetWeight("new", 1001) }, ErrWeight},
		{"arrive twice", func() error { return r.Arrive("a") }, ErrFlowState},
		{"block unknown", func() error { return r.Block("x") }, ErrFlowState},
		{"ready unknown", func() error { return r.Ready("x") }, ErrFlowState},
		{"leave unknown", func() error { return r.Leave("x") }, ErrFlowState},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
		if after := snap(); !reflect.DeepEqual(after, before) {
			t.Errorf("%s changed the state: %v → %v", tt.name, before, after)
		}
	}
	if err := r.Leave("a"); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func(string) error{r.Block, r.Ready, r.Leave} {
		if err := call("a"); !errors.Is(err, ErrFlowState) {
			t.Errorf("call on a flow without backlog: err = %v, want ErrFlowState", err)
		}
	}
	if _, err := SimulateRotation(func(string) int { return 0 }, Backlogs(map[string]int{"a": 1}), 1); !errors.Is(err, ErrWeight) {
		t.Errorf("SimulateRotation with weight 0: err = %v, want ErrWeight", err)
	}
	if f, ok := (&Rotation{}).Pick(); ok {
		t.Errorf("Pick on an empty Rotation = %q, true", f)
	}
}

// randomSchedule runs one random schedule of n operations through an oracle:
// endless new flows with random weights (1..1000, with the extremes 1 and 1000
// and small weights favoured), idle flows coming back, heads blocking and
// becoming ready again, flows draining, claims that leave the head ready or
// put it in flight, and rare weight changes.
func randomSchedule(rng *rand.Rand, o *oracle, n int) error {
	var flows []string
	randWeight := func() int {
		switch rng.IntN(4) {
		case 0:
			return 1
		case 1:
			return MaxWeight
		case 2:
			return 1 + rng.IntN(4)
		}
		return 1 + rng.IntN(MaxWeight)
	}
	pickWhere := func(cond func(RotationFlow) bool) (string, bool) {
		var c []string
		for _, f := range flows {
			if fl, _ := o.r.Flow(f); cond(fl) {
				c = append(c, f)
			}
		}
		if len(c) == 0 {
			return "", false
		}
		return c[rng.IntN(len(c))], true
	}
	newRate := 1 + rng.IntN(20) // how often new flows come, per 100 operations
	for i := 0; i < n; i++ {
		var err error
		switch op := rng.IntN(100); {
		case op < newRate:
			f := fmt.Sprintf("n%05d", len(flows))
			flows = append(flows, f)
			if err = o.setWeight(f, randWeight()); err == nil {
				err = o.arrive(f)
			}
		case op < 30:
			if f, ok := pickWhere(func(fl RotationFlow) bool { return !fl.Backlogged }); ok {
				err = o.arrive(f)
			}
		case op < 38:
			if f, ok := pickWhere(func(fl RotationFlow) bool { return fl.Ready }); ok {
				err = o.block(f)
			}
		case op < 52:
			if f, ok := pickWhere(func(fl RotationFlow) bool { return fl.Backlogged && !fl.Ready }); ok {
				err = o.ready(f)
			}
		case op < 58:
			if f, ok := pickWhere(func(fl RotationFlow) bool { return fl.Backlogged }); ok {
				err = o.leave(f)
			}
		case op < 60:
			if f, ok := pickWhere(func(RotationFlow) bool { return true }); ok {
				err = o.setWeight(f, randWeight())
			}
		default:
			var f string
			var ok bool
			if f, ok, err = o.pick(); err == nil && ok && rng.IntN(2) == 0 {
				err = o.block(f) // the claim put the head in flight
			}
		}
		if err != nil {
			return fmt.Errorf("operation %d: %w", i, err)
		}
	}
	return nil
}

// TestRotationBoundedWaitProperty is the property test of the waiting bound:
// over random arrival schedules, no flow that arrives after a flow F became
// ready is picked before F, and the flows picked meanwhile stay within
// Σ (ceil(w_j/w_lo) + 1) over the flows backlogged when F became ready.
func TestRotationBoundedWaitProperty(t *testing.T) {
	t.Parallel()
	schedules, ops := 60, 2000
	if testing.Short() {
		schedules = 10
	}
	total := newOracle()
	for s := range schedules {
		rng := rand.New(rand.NewPCG(uint64(s), 0x5eed))
		o := newOracle()
		if err := randomSchedule(rng, o, ops); err != nil {
			t.Fatalf("schedule %d: %v", s, err)
		}
		total.waitsClosed += o.waitsClosed
		total.tight += o.tight
		total.minSlack = min(total.minSlack, o.minSlack)
		if o.worstWait > total.worstWait {
			total.worstWait, total.worstBound = o.worstWait, o.worstBound
		}
		if o.worstShare > total.worstShare {
			total.worstShare, total.shareWait, total.shareBound = o.worstShare, o.shareWait, o.shareBound
		}
		if o.worstPerFlow > total.worstPerFlow {
			total.worstPerFlow, total.worstPerBound = o.worstPerFlow, o.worstPerBound
		}
	}
	if total.waitsClosed < schedules*100 {
		t.Fatalf("only %d waits closed: the schedules do not exercise the bound", total.waitsClosed)
	}
	t.Logf("%d schedules × %d operations: %d waits; longest wait %d claims (its bound %d); smallest slack %d; %d waits exactly at their bound; most claims of one flow in one wait %d (its bound %d); closest to the bound among bounds >= 10: %d of %d",
		schedules, ops, total.waitsClosed, total.worstWait, total.worstBound, total.minSlack, total.tight, total.worstPerFlow, total.worstPerBound, total.shareWait, total.shareBound)
}

// TestRotationBoundEqualWeights measures the bound with equal weights, where it
// is 2(n−1) for n flows: the worst wait observed over random schedules.
func TestRotationBoundEqualWeights(t *testing.T) {
	t.Parallel()
	worst, worstBound := 0, 0
	for s := range 60 {
		rng := rand.New(rand.NewPCG(uint64(s), 0xe9a1))
		o := newOracle()
		flows := []string{"a", "b", "c", "d", "e", "f"}
		for i := 0; i < 2000; i++ {
			f := flows[rng.IntN(len(flows))]
			fl, _ := o.r.Flow(f)
			var err error
			switch op := rng.IntN(10); {
			case op < 2 && !fl.Backlogged:
				err = o.arrive(f)
			case op < 3 && fl.Ready:
				err = o.block(f)
			case op < 5 && fl.Backlogged && !fl.Ready:
				err = o.ready(f)
			case op < 6 && fl.Backlogged:
				err = o.leave(f)
			default:
				_, _, err = o.pick()
			}
			if err != nil {
				t.Fatalf("schedule %d, operation %d: %v", s, i, err)
			}
		}
		if o.worstWait > worst {
			worst, worstBound = o.worstWait, o.worstBound
		}
	}
	if worstBound > 2*5 {
		t.Fatalf("bound %d with 6 flows of weight 1, want at most 2(n−1) = 10", worstBound)
	}
	t.Logf("6 flows of weight 1: longest wait %d claims, bound %d", worst, worstBound)
}

// TestRotationWeightedShares: flows of weight 1, 2 and 4, always ready, get
// 1,000, 2,000 and 4,000 of 7,000 claims, and within every window (of the
// first 2,800 claims, to keep the quadratic check short) the tolerance
// 1 + (n−2)·w_i/W + 4·w_i/Scale of docs/fairness.md holds.
func TestRotationWeightedShares(t *testing.T) {
	t.Parallel()
	weights := map[string]int{"w1": 1, "w2": 2, "w4": 4}
	order, err := SimulateRotation(func(f string) int { return weights[f] },
		Backlogs(map[string]int{"w1": 1 << 20, "w2": 1 << 20, "w4": 1 << 20}), 7000)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, f := range order {
		got[f]++
	}
	if want := map[string]int{"w1": 1000, "w2": 2000, "w4": 4000}; !reflect.DeepEqual(got, want) {
		t.Fatalf("claims of 7,000 = %v, want %v", got, want)
	}
	worst := checkWindows(t, order[:2800], weights)
	t.Logf("weights 1, 2, 4: largest deviation over every window of the first 2,800 claims %.3f turns", worst)
}

// checkWindows checks every window of order (after each flow's first claim)
// against the share tolerance and returns the largest deviation seen.
func checkWindows(t *testing.T, order []string, weights map[string]int) float64 {
	t.Helper()
	names := make([]string, 0, len(weights))
	W := 0
	for f, w := range weights {
		names = append(names, f)
		W += w
	}
	slices.Sort(names)
	start := 0
	for _, f := range names {
		start = max(start, slices.Index(order, f)+1)
	}
	prefix := make([][]int, len(names)) // prefix[k][i]: claims of names[k] in order[start:start+i]
	for k, f := range names {
		prefix[k] = make([]int, len(order)-start+1)
		for i, g := range order[start:] {
			prefix[k][i+1] = prefix[k][i]
			if g == f {
				prefix[k][i+1]++
			}
		}
	}
	n, worst := len(names), 0.0
	L := len(order) - start
	for a := 0; a < L; a++ {
		for b := a + 1; b <= L; b++ {
			for k, f := range names {
				wi := float64(weights[f])
				dev := float64(prefix[k][b]-prefix[k][a]) - float64(b-a)*wi/float64(W)
				if dev < 0 {
					dev = -dev
				}
				tol := 1 + float64(max(n-2, 0))*wi/float64(W) + 4*wi/float64(Scale)
				if dev >= tol {
					t.Fatalf("window [%d, %d): %s got %d claims, share %.2f, deviation %.3f ≥ tolerance %.3f",
						start+a, start+b, f, prefix[k][b]-prefix[k][a], float64(b-a)*wi/float64(W), dev, tol)
				}
				worst = max(worst, dev)
			}
		}
	}
	return worst
}

// TestRotationWeightedSharesProperty checks the share tolerance over every
// window for random sets of always-ready flows with random weights.
func TestRotationWeightedSharesProperty(t *testing.T) {
	t.Parallel()
	worst := 0.0
	runs := 20
	if testing.Short() {
		runs = 4
	}
	for s := range runs {
		rng := rand.New(rand.NewPCG(uint64(s), 0x54a7e))
		n := 1 + rng.IntN(6)
		weights := map[string]int{}
		backlog := map[string]int{}
		for i := range n {
			f := fmt.Sprintf("f%d", i)
			weights[f] = 1 + rng.IntN(MaxWeight)
			if rng.IntN(3) == 0 {
				weights[f] = 1 + rng.IntN(5)
			}
			backlog[f] = 1 << 20
		}
		order, err := SimulateRotation(func(f string) int { return weights[f] }, Backlogs(backlog), 600)
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, checkWindows(t, order, weights))
	}
	t.Logf("%d random weight sets, every window of 600 claims: largest deviation %.3f turns", runs, worst)
}

// The new-flows-crowd-out schedule of the experiment (old has two events at
// step 0, then new-01, new-02, … one per step): under rotation old's second
// event goes at step 1, since no flow was backlogged when it became ready
// (bound 0), and new-01 arrived after it.
func TestSimulateRotationNewFlowsCrowdOutFixed(t *testing.T) {
	t.Parallel()
	const newcomers = 12
	newFlow := func(i int) string { return fmt.Sprintf("new-%02d", i) }
	arrivals := func(step int) []string {
		if step == 0 {
			return []string{"old", "old"}
		}
		return []string{newFlow(step)}
	}
	got, err := SimulateRotation(nil, arrivals, newcomers+1)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"old", "old"}
	for i := 1; i < newcomers; i++ {
		want = append(want, newFlow(i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("SimulateRotation = %v, want %v", got, want)
	}
	if ms := Simulate(MinServed, arrivals, newcomers+1); count(ms, "old") != 1 {
		t.Fatalf("MinServed served old %d times; the counterexample is gone", count(ms, "old"))
	}
}

// TestRotationTiesByFlowIDBreakTheBound is the reason ties go to the earlier
// arrival: with ties broken by flow ID, newcomers whose IDs sort before "old"
// and that arrive together land on old's pass and all go first, so old's wait
// grows with the number of newcomers instead of being bounded by the flows
// present when it became ready (here: none, bound 0).
func TestRotationTiesByFlowIDBreakTheBound(t *testing.T) {
	t.Parallel()
	for _, k := range []int{1, 5, 50} {
		o := newOracle()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(o.arrive("old"))
		if _, _, err := o.pick(); err != nil { // old's first event; its second is ready at pass Scale
			t.Fatal(err)
		}
		for i := range k {
			must(o.arrive(fmt.Sprintf("a%03d", i))) // all at vtail = Scale, the same pass as old
		}
		// Rotation (ties by J): old goes next.
		if f, _, err := o.pick(); err != nil || f != "old" {
			t.Fatalf("%d newcomers: rotation picked %q (%v), want old", k, f, err)
		}
		// The same state with ties by flow ID: every newcomer goes before old.
		var byID Rotation
		must(byID.Arrive("old"))
		byID.Pick()
		for i := range k {
			must(byID.Arrive(fmt.Sprintf("a%03d", i)))
		}
		wait := 0
		for {
			f := pickByFlowID(&byID)
			if f == "old" {
				break
			}
			wait++
		}
		if wait != k {
			t.Fatalf("%d newcomers: flow-ID ties made old wait %d, want %d", k, wait, k)
		}
	}
}

// pickByFlowID is Rotation.Pick with ties on P broken by flow ID instead of J.
func pickByFlowID(r *Rotation) string {
	best := ""
	var bp int64
	for _, fl := range r.Flows() { // sorted by flow ID: the first of equal passes wins
		if fl.Ready && (best == "" || fl.Pass < bp) {
			best, bp = fl.Flow, fl.Pass
		}
	}
	fl := r.flows[best]
	r.vnow = fl.pass
	fl.pass += Stride(fl.weight, fl.served)
	fl.served++
	r.vtail = max(r.vtail, fl.pass)
	return best
}

// SimulateRotation with every flow ready is the same as Simulate with
// MinServed on finite backlogs that arrive together (equal weights).
func TestSimulateRotationRotatesLikeMinServedOnEqualBacklogs(t *testing.T) {
	t.Parallel()
	got, err := SimulateRotation(nil, Backlogs(map[string]int{"a": 2, "b": 2, "c": 2}), 7)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "a", "b", "c", ""}; !slices.Equal(got, want) {
		t.Fatalf("SimulateRotation = %v, want %v", got, want)
	}
}

// TestRotationBanksNoCreditForNewBacklog: under min-served a flow that arrives
// late with a big backlog starts at served 0 and takes every turn until it has
// caught up with the others' served counts (50 claims in a row here); under
// rotation it joins at the tail and then alternates with a and b.
func TestRotationBanksNoCreditForNewBacklog(t *testing.T) {
	t.Parallel()
	arrivals := func(step int) []string {
		switch step {
		case 0:
			var out []string
			for range 500 {
				out = append(out, "a", "b")
			}
			return out
		case 100:
			var out []string
			for range 200 {
				out = append(out, "c")
			}
			return out
		}
		return nil
	}
	longestRun := func(order []string, f string) int {
		best, run := 0, 0
		for _, g := range order {
			if g == f {
				run++
				best = max(best, run)
			} else {
				run = 0
			}
		}
		return best
	}
	ms := Simulate(MinServed, arrivals, 300)
	if n := longestRun(ms, "c"); n != 50 {
		t.Fatalf("min-served: c's longest run %d, want 50 (its banked credit)", n)
	}
	rot, err := SimulateRotation(nil, arrivals, 300)
	if err != nil {
		t.Fatal(err)
	}
	if n := longestRun(rot, "c"); n != 1 {
		t.Fatalf("rotation: c's longest run %d, want 1", n)
	}
	if got := count(rot[100:], "c"); got < 66 || got > 67 {
		t.Fatalf("rotation: c got %d of the 200 claims after it arrived, want a third (66 or 67)", got)
	}
}

// TestRotationBoundIsTight: the per-flow bound (b) is reached. x (weight 1) is
// claimed once, so vtail = Scale; j (weight 1000) is still at pass 0 when F
// arrives at vtail. Before F, j is claimed at passes 0, ~720, …, Scale (the
// last one a tie that j's earlier arrival wins): 1,001 = ceil(1000/1) + 1
// times, and x once more at Scale, so F waits 1,002 claims of its bound 1,003.
func TestRotationBoundIsTight(t *testing.T) {
	t.Parallel()
	o := newOracle()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(o.setWeight("j", 1000))
	must(o.arrive("x"))
	must(o.arrive("j"))
	if f, _, err := o.pick(); err != nil || f != "x" {
		t.Fatalf("first pick %q (%v), want x", f, err)
	}
	must(o.arrive("F"))
	if w := o.waits["F"]; w.bound != 1003 {
		t.Fatalf("F's bound %d, want (1000+1) + (1+1) = 1003", w.bound)
	}
	got := map[string]int{}
	for {
		f, ok, err := o.pick()
		if err != nil || !ok {
			t.Fatalf("pick: %q %v %v", f, ok, err)
		}
		if f == "F" {
			break
		}
		got[f]++
	}
	if got["j"] != 1001 || got["x"] != 1 {
		t.Fatalf("before F: %v, want j 1001 (its bound), x 1", got)
	}
}
