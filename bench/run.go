package bench

import (
	"context"
	"fmt"
	"time"
)

// A Workload is a prepared case: Step does one unit of work and returns how
// many items (commits, events) it completed.
type Workload interface {
	Step(ctx context.Context) (int, error)
	Close() error
}

// A TimedWorkload is a Workload that times its own steps: TimedStep returns
// the items done and the time they took, which may be less than the call's
// wall time (a case that must settle work it started after its measured
// window, untimed, so that nothing of it runs into the next case's slice).
type TimedWorkload interface {
	Workload
	TimedStep(ctx context.Context) (int, time.Duration, error)
}

// A Case is one measured workload. Setup prepares it once, in its own
// directory, before any round is timed; loading a backlog belongs there.
type Case struct {
	Name  string
	Unit  string // what Step counts, per second: "commits/s", "events/s"
	Setup func(ctx context.Context, dir string) (Workload, error)
}

// Plan says how long and how often the cases run.
type Plan struct {
	Rounds int           // repeats of every case, interleaved
	Slice  time.Duration // wall-clock time of one case in one round
	Warmup time.Duration // untimed run of every case before the first round
}

// Rates holds, for every case name, its rate in each round, in round order.
type Rates map[string][]float64

// Measure sets up every case, warms each one up, then runs Plan.Rounds rounds;
// in each round every case runs for Plan.Slice, in an order rotated by one each
// round, so that no case is always first or last. progress, when not nil, is
// told each result as it comes.
func Measure(ctx context.Context, dir string, cases []Case, p Plan, progress func(round int, name string, rate float64)) (Rates, error) {
	ws := make([]Workload, len(cases))
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.Close()
			}
		}
	}()
	for i, c := range cases {
		sub := fmt.Sprintf("%s/case%02d", dir, i)
		w, err := c.Setup(ctx, sub)
		if err != nil {
			return nil, fmt.Errorf("%s: setup: %w", c.Name, err)
		}
		ws[i] = w
	}
	for i, c := range cases {
		if _, _, err := runFor(ctx, ws[i], p.Warmup); err != nil {
			return nil, fmt.Errorf("%s: warmup: %w", c.Name, err)
		}
	}
	rates := Rates{}
	for r := range p.Rounds {
		for j := range cases {
			i := (r + j) % len(cases)
			n, d, err := runFor(ctx, ws[i], p.Slice)
			if err != nil {
				return nil, fmt.Errorf("%s: round %d: %w", cases[i].Name, r+1, err)
			}
			rate := float64(n) / d.Seconds()
			rates[cases[i].Name] = append(rates[cases[i].Name], rate)
			if progress != nil {
				progress(r+1, cases[i].Name, rate)
			}
		}
	}
	return rates, nil
}

// runFor steps w until d has passed (at least one step) and returns the items
// done and the time taken: the wall time, or for a [TimedWorkload] the sum
// of the times its steps reported.
func runFor(ctx context.Context, w Workload, d time.Duration) (int, time.Duration, error) {
	start := time.Now()
	n := 0
	if tw, ok := w.(TimedWorkload); ok {
		var took time.Duration
		for {
			k, t, err := tw.TimedStep(ctx)
			n += k
			took += t
			if err != nil {
				return n, took, err
			}
			if time.Since(start) >= d {
				return n, took, nil
			}
		}
	}
	for {
		k, err := w.Step(ctx)
		if err != nil {
			return n, time.Since(start), err
		}
		n += k
		if el := time.Since(start); el >= d {
			return n, el, nil
		}
	}
}

// Ratio returns, round by round, a[i]/b[i]*scale. Rounds missing in either are
// skipped.
func Ratio(a, b []float64, scale float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] != 0 {
			out = append(out, a[i]/b[i]*scale)
		}
	}
	return out
}
