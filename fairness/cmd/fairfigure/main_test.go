package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The figure's numbers come from the simulators: over 200 steps min-served
// serves old once, rotation after every round (steps 0, 1, 3, 6, 10, …: 20
// claims), and weight 10 gives old ten turns per round.
func TestSimulateCrowdOut(t *testing.T) {
	t.Parallel()
	lines, err := simulate(200)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"min-served (the default)": 1, "rotation (every weight 1)": 20, "rotation, old has weight 10": 53}
	for _, l := range lines {
		if got := l.cum[len(l.cum)-1]; got != want[l.label] {
			t.Errorf("%s: %d claims of old, want %d", l.label, got, want[l.label])
		}
	}
	// Rotation serves old at the triangular steps: the k-th wait is k−1 claims,
	// one per newcomer that arrived during the round before.
	rot := lines[1].cum
	for k, step := 1, 0; step < 200; k, step = k+1, step+k {
		if rot[step] != k || step > 0 && rot[step-1] != k-1 {
			t.Fatalf("rotation: claim %d of old not at step %d (cumulative %v)", k, step, rot[:min(len(rot), step+1)])
		}
	}
}

// The committed docs/fairness-crowding.svg is what the program writes now.
func TestCommittedFigureIsCurrent(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := run("", 200, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "<svg ") || !strings.HasSuffix(buf.String(), "</svg>\n") {
		t.Fatalf("output is not an SVG document: %.80q", buf.String())
	}
	committed, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "fairness-crowding.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, buf.Bytes()) {
		t.Fatalf("docs/fairness-crowding.svg is stale: run go run ./fairness/cmd/fairfigure -o docs/fairness-crowding.svg")
	}
}

func TestRunRejectsBadSteps(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 9, 100001} {
		if err := run("", n, &bytes.Buffer{}); err == nil {
			t.Errorf("run(steps %d) = nil error, want one", n)
		}
	}
}
