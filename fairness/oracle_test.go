package fairness

import "fmt"

// oracle drives a Rotation and checks, after every operation, the invariants
// of its doc comment and the waiting bound of docs/fairness.md, computed
// independently of the Rotation's own code (its own min scan, its own record
// of who was backlogged when a wait began). The property test and the fuzz
// test share it. A failed check is returned as an error describing it.
type oracle struct {
	r Rotation

	vnowSeen int64
	histMin  int            // the smallest weight at any pick so far (MaxWeight before the first)
	lastPick map[string]int // the weight at the flow's last pick since its last arrival; absent: none
	waits    map[string]*wait

	// Measurements.
	waitsClosed   int
	worstWait     int     // the longest wait observed (claims of other flows)
	worstBound    int     // the bound of that wait
	minSlack      int     // the smallest bound − wait over all waits
	tight         int     // waits that reached their bound exactly
	worstPerFlow  int     // the most claims one other flow got in one wait
	worstPerBound int     // its per-flow bound
	worstShare    float64 // the largest wait/bound among waits with a bound of at least 10
	shareWait     int
	shareBound    int
}

// wait is one period during which a flow is ready and not yet picked again.
type wait struct {
	present map[string]int // flows backlogged when it began → their largest weight since
	wlo     int
	count   map[string]int
	total   int
	bound   int // Σ over present (ceil(w_j/w_lo) + 1), kept up to date
}

func newOracle() *oracle {
	return &oracle{histMin: MaxWeight, lastPick: map[string]int{}, waits: map[string]*wait{}, minSlack: 1 << 30}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// begin opens a wait for flow f, which has just become ready.
func (o *oracle) begin(f string) {
	w := &wait{present: map[string]int{}, count: map[string]int{}, wlo: o.histMin}
	if pw, ok := o.lastPick[f]; ok {
		w.wlo = pw
	}
	for name, fl := range o.r.flows {
		if fl.backlogged && name != f {
			w.present[name] = fl.weight
			w.bound += ceilDiv(fl.weight, w.wlo) + 1
		}
	}
	o.waits[f] = w
}

func (o *oracle) setWeight(f string, wt int) error {
	err := o.r.SetWeight(f, wt)
	if err == nil {
		for _, w := range o.waits {
			if old, ok := w.present[f]; ok && wt > old {
				w.present[f] = wt
				w.bound += ceilDiv(wt, w.wlo) - ceilDiv(old, w.wlo)
			}
		}
	}
	return o.after(err)
}

func (o *oracle) arrive(f string) error {
	err := o.r.Arrive(f)
	if err == nil {
		delete(o.lastPick, f)
		o.begin(f)
	}
	return o.after(err)
}

func (o *oracle) block(f string) error {
	err := o.r.Block(f)
	if err == nil {
		delete(o.waits, f)
	}
	return o.after(err)
}

func (o *oracle) ready(f string) error {
	before, _ := o.r.Flow(f)
	err := o.r.Ready(f)
	if err == nil && !before.Ready {
		o.begin(f)
	}
	return o.after(err)
}

func (o *oracle) leave(f string) error {
	err := o.r.Leave(f)
	if err == nil {
		delete(o.waits, f)
	}
	return o.after(err)
}

// pick picks and checks the pick against the oracle's own scan and every
// open wait.
func (o *oracle) pick() (string, bool, error) {
	want, wantOK := "", false
	var wp, wj int64
	for name, fl := range o.r.flows {
		if fl.readyFlag && (!wantOK || fl.pass < wp || fl.pass == wp && fl.joined < wj) {
			want, wantOK, wp, wj = name, true, fl.pass, fl.joined
		}
	}
	var weight int
	if fl, ok := o.r.Flow(want); ok {
		weight = fl.Weight
	}
	got, ok := o.r.Pick()
	if got != want || ok != wantOK {
		return got, ok, fmt.Errorf("Pick() = %q,%v; want %q,%v (smallest (P, J))", got, ok, want, wantOK)
	}
	if !ok {
		return got, ok, o.after(nil)
	}
	o.histMin = min(o.histMin, weight)
	o.lastPick[got] = weight
	if w, open := o.waits[got]; open {
		o.close(w)
		delete(o.waits, got)
	}
	for f, w := range o.waits {
		wj, present := w.present[got]
		if !present {
			return got, ok, fmt.Errorf("%q picked while %q waited, but it was not backlogged when the wait began (a later arrival got ahead)", got, f)
		}
		w.count[got]++
		w.total++
		if per := ceilDiv(wj, w.wlo) + 1; w.count[got] > per {
			return got, ok, fmt.Errorf("%q picked %d times while %q waited; bound ceil(%d/%d)+1 = %d", got, w.count[got], f, wj, w.wlo, per)
		}
		if w.total > w.bound {
			return got, ok, fmt.Errorf("%q waited %d claims; bound %d", f, w.total, w.bound)
		}
	}
	if fl, _ := o.r.Flow(got); fl.Ready {
		o.begin(got) // still ready: its next event waits from now
	}
	return got, ok, o.after(nil)
}

func (o *oracle) close(w *wait) {
	b := w.bound
	o.waitsClosed++
	if w.total > o.worstWait || w.total == o.worstWait && b < o.worstBound {
		o.worstWait, o.worstBound = w.total, b
	}
	o.minSlack = min(o.minSlack, b-w.total)
	if b == w.total {
		o.tight++
	}
	if b >= 10 && float64(w.total)/float64(b) > o.worstShare {
		o.worstShare, o.shareWait, o.shareBound = float64(w.total)/float64(b), w.total, b
	}
	for j, c := range w.count {
		if c > o.worstPerFlow {
			o.worstPerFlow, o.worstPerBound = c, ceilDiv(w.present[j], w.wlo)+1
		}
	}
}

// after checks the invariants; a failed call (err != nil) is passed through
// after the same checks.
func (o *oracle) after(err error) error {
	c := o.r.Clock()
	if c.VNow < o.vnowSeen {
		return fmt.Errorf("vnow went back from %d to %d", o.vnowSeen, c.VNow)
	}
	o.vnowSeen = c.VNow
	joined := make(map[int64]string, len(o.r.flows))
	for name, f := range o.r.flows {
		fl := f.export(name)
		if fl.Pass > c.VTail {
			return fmt.Errorf("flow %q pass %d > vtail %d", fl.Flow, fl.Pass, c.VTail)
		}
		if fl.Ready && fl.Pass < c.VNow {
			return fmt.Errorf("ready flow %q pass %d < vnow %d", fl.Flow, fl.Pass, c.VNow)
		}
		if fl.Ready && !fl.Backlogged {
			return fmt.Errorf("flow %q ready without a backlog", fl.Flow)
		}
		if fl.Weight < MinWeight || fl.Weight > MaxWeight {
			return fmt.Errorf("flow %q weight %d", fl.Flow, fl.Weight)
		}
		if fl.Joined > c.Joins {
			return fmt.Errorf("flow %q joined %d > joins %d", fl.Flow, fl.Joined, c.Joins)
		}
		if fl.Joined > 0 {
			if other, dup := joined[fl.Joined]; dup {
				return fmt.Errorf("flows %q and %q share J %d", other, fl.Flow, fl.Joined)
			}
			joined[fl.Joined] = fl.Flow
		}
		if fl.Backlogged && fl.Joined == 0 {
			return fmt.Errorf("flow %q backlogged without a join number", fl.Flow)
		}
	}
	return err
}
