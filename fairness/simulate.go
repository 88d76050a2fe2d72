package fairness

import "sort"

// Arrivals says which flows receive one new event at a step: each name in the
// returned slice adds one event to that flow's backlog (a name may repeat).
// Steps count from 0.
type Arrivals func(step int) []string

// Simulate runs steps rounds of a single server. At each step the arrivals of
// that step join their flows' backlogs first; then sel picks one flow among
// those with a backlog, that flow is served once (its backlog shrinks by one and
// its served count grows by one). The result holds the served flow of each step,
// or "" for a step where no flow had work.
//
// Candidates are offered to sel sorted by flow ID, so a run is deterministic.
// Simulate is a model of the queue's choice only: no leases, failures or time.
func Simulate(sel Selector, arrivals Arrivals, steps int) []string {
	backlog := map[string]int{}
	served := map[string]int64{}
	out := make([]string, 0, max(steps, 0))
	for step := 0; step < steps; step++ {
		if arrivals != nil {
			for _, f := range arrivals(step) {
				backlog[f]++
			}
		}
		cands := make([]Candidate, 0, len(backlog))
		for f, n := range backlog {
			if n > 0 {
				cands = append(cands, Candidate{Flow: f, Served: served[f]})
			}
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].Flow < cands[j].Flow })
		i, ok := sel.Select(cands)
		if !ok {
			out = append(out, "")
			continue
		}
		f := cands[i].Flow
		backlog[f]--
		served[f]++
		out = append(out, f)
	}
	return out
}

// Backlogs returns an [Arrivals] that puts all of the given backlog in at
// step 0 and nothing after.
func Backlogs(backlog map[string]int) Arrivals {
	flows := make([]string, 0, len(backlog))
	for f := range backlog {
		flows = append(flows, f)
	}
	sort.Strings(flows)
	return func(step int) []string {
		if step != 0 {
			return nil
		}
		var out []string
		for _, f := range flows {
			for n := 0; n < backlog[f]; n++ {
				out = append(out, f)
			}
		}
		return out
	}
}
