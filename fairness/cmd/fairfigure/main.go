// Command fairfigure draws docs/fairness-crowding.svg: the cumulative claims
// of an old flow while one new flow arrives at every step, under MinServed
// (the default) and under the opt-in rotation policy, computed with
// fairness.Simulate and fairness.SimulateRotation. The SVG is written by hand
// (no dependencies) and is byte-for-byte deterministic.
//
// Usage:
//
//	go run ./fairness/cmd/fairfigure -o docs/fairness-crowding.svg
//
// Without -o it writes to standard output.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fairrelay/fairrelay/fairness"
)

func main() {
	out := flag.String("o", "", "write the SVG to this file instead of standard output")
	steps := flag.Int("steps", 200, "number of claims (steps) to simulate, 10..100000")
	flag.Parse()
	if err := run(*out, *steps, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fairfigure:", err)
		os.Exit(1)
	}
}

func run(out string, steps int, stdout io.Writer) error {
	if steps < 10 || steps > 100000 {
		return fmt.Errorf("-steps %d: want 10..100000", steps)
	}
	series, err := simulate(steps)
	if err != nil {
		return err
	}
	svg := draw(series, steps)
	if out == "" {
		_, err := stdout.Write(svg)
		return err
	}
	return os.WriteFile(out, svg, 0o644)
}

// line is one policy's cumulative claims of the old flow after each step.
type line struct {
	label, color, dash string
	cum                []int
}

// simulate runs the crowd-out schedule: old has a backlog of steps events at
// step 0, and a new flow with one event arrives at every later step.
func simulate(steps int) ([]line, error) {
	arrivals := func(step int) []string {
		if step == 0 {
			out := make([]string, steps)
			for i := range out {
				out[i] = "old"
			}
			return out
		}
		return []string{fmt.Sprintf("new%06d", step)}
	}
	cum := func(order []string) []int {
		c, n := make([]int, len(order)), 0
		for i, f := range order {
			if f == "old" {
				n++
			}
			c[i] = n
		}
		return c
	}
	rot, err := fairness.SimulateRotation(nil, arrivals, steps)
	if err != nil {
		return nil, err
	}
	rot10, err := fairness.SimulateRotation(func(f string) int {
		if f == "old" {
			return 10
		}
		return 1
	}, arrivals, steps)
	if err != nil {
		return nil, err
	}
	return []line{
		{"rotation, old has weight 10", "#2b8a3e", "6 4", cum(rot10)},
		{"rotation (every weight 1)", "#1c5fb8", "", cum(rot)},
		{"min-served (the default)", "#c92a2a", "", cum(fairness.Simulate(fairness.MinServed, arrivals, steps))},
	}, nil
}

// draw renders the lines as step plots on one chart.
func draw(lines []line, steps int) []byte {
	const (
		width, height          = 760, 440
		left, right, top, bott = 70, 20, 50, 60
	)
	ymax := 1
	for _, l := range lines {
		ymax = max(ymax, l.cum[len(l.cum)-1])
	}
	ystep := niceStep(ymax)
	ymax = (ymax + ystep - 1) / ystep * ystep
	xstep := niceStep(steps)
	pw, ph := float64(width-left-right), float64(height-top-bott)
	x := func(s int) float64 { return float64(left) + pw*float64(s)/float64(steps) }
	y := func(v int) float64 { return float64(top) + ph - ph*float64(v)/float64(ymax) }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">Claims of an old flow while a new flow arrives before every claim</text>`+"\n", left)
	fmt.Fprintf(&b, `<text x="%d" y="40" font-size="12" fill="#444444">old has %d events at step 0; each newcomer has one event and leaves once served</text>`+"\n", left, steps)
	for v := 0; v <= ymax; v += ystep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>`+"\n", left, y(v), width-right, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n", left-8, y(v)+4, v)
	}
	for s := 0; s <= steps; s += xstep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eeeeee"/>`+"\n", x(s), top, x(s), height-bott)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(s), height-bott+18, s)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#555555"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">claims (steps); one new flow with one event arrives at each step</text>`+"\n", float64(left)+pw/2, height-16)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">claims of the old flow</text>`+"\n", float64(top)+ph/2)
	for i, l := range lines {
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2.2"`, l.color)
		if l.dash != "" {
			fmt.Fprintf(&b, ` stroke-dasharray="%s"`, l.dash)
		}
		b.WriteString(` points="`)
		prev := 0
		fmt.Fprintf(&b, "%.1f,%.1f", x(0), y(0))
		for s, v := range l.cum {
			if v != prev {
				fmt.Fprintf(&b, " %.1f,%.1f %.1f,%.1f", x(s), y(prev), x(s), y(v))
				prev = v
			}
		}
		fmt.Fprintf(&b, " %.1f,%.1f\"/>\n", x(steps), y(prev))
		ly := top + 20 + 20*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.2"`, left+16, ly, left+46, ly, l.color)
		if l.dash != "" {
			fmt.Fprintf(&b, ` stroke-dasharray="%s"`, l.dash)
		}
		unit := "claims"
		if prev == 1 {
			unit = "claim"
		}
		fmt.Fprintf(&b, "/>\n"+`<text x="%d" y="%d">%s: %d %s</text>`+"\n", left+54, ly+4, l.label, prev, unit)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceStep returns a grid step of 1, 2 or 5 times a power of ten giving about
// five to ten lines up to v.
func niceStep(v int) int {
	step := 1
	for {
		for _, m := range []int{1, 2, 5} {
			if v/(step*m) <= 10 {
				return step * m
			}
		}
		step *= 10
	}
}
