package fairness

import (
	"fmt"
	"slices"
	"testing"
)

func TestSelectEmpty(t *testing.T) {
	t.Parallel()
	for name, sel := range map[string]Selector{"MinServed": MinServed, "Lexicographic": Lexicographic} {
		if i, ok := sel.Select(nil); ok {
			t.Errorf("%s.Select(nil) = %d, true; want ok false", name, i)
		}
	}
}

func TestMinServedPicksLeastServedThenSmallestFlow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    []Candidate
		want string
	}{
		{"single", []Candidate{{"a", 9}}, "a"},
		{"least served wins over smaller id", []Candidate{{"a", 2}, {"b", 1}}, "b"},
		{"tie goes to smallest flow", []Candidate{{"c", 1}, {"b", 1}, {"d", 1}}, "b"},
		{"tie order independent of position", []Candidate{{"b", 0}, {"a", 0}}, "a"},
		{"byte order, not length", []Candidate{{"b", 0}, {"aa", 0}}, "aa"},
		{"negative served is still least", []Candidate{{"a", 0}, {"z", -1}}, "z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, ok := MinServed.Select(tt.c)
			if !ok || tt.c[i].Flow != tt.want {
				t.Fatalf("MinServed.Select(%v) = %d,%v; want flow %q", tt.c, i, ok, tt.want)
			}
		})
	}
}

func TestLexicographicIgnoresServed(t *testing.T) {
	t.Parallel()
	c := []Candidate{{"b", 0}, {"a", 100}}
	if i, ok := Lexicographic.Select(c); !ok || c[i].Flow != "a" {
		t.Fatalf("Lexicographic.Select(%v) = %d,%v; want flow a", c, i, ok)
	}
}

func TestSimulateMinServedRotatesFiniteBacklogs(t *testing.T) {
	t.Parallel()
	got := Simulate(MinServed, Backlogs(map[string]int{"a": 2, "b": 2, "c": 2}), 7)
	want := []string{"a", "b", "c", "a", "b", "c", ""}
	if !slices.Equal(got, want) {
		t.Fatalf("Simulate(MinServed) = %v, want %v", got, want)
	}
}

// TestSimulateLexicographicStarvesLaterFlows is the kept counterexample: a flow
// that always has work takes every turn under lexicographic order.
func TestSimulateLexicographicStarvesLaterFlows(t *testing.T) {
	t.Parallel()
	arrivals := func(step int) []string {
		if step == 0 {
			return []string{"a", "b"}
		}
		return []string{"a"}
	}
	got := Simulate(Lexicographic, arrivals, 100)
	if n := count(got, "b"); n != 0 {
		t.Fatalf("Lexicographic served b %d times in 100 steps, want 0 (starvation)", n)
	}
	got = Simulate(MinServed, arrivals, 100)
	if i := slices.Index(got, "b"); i < 0 || i > 1 {
		t.Fatalf("MinServed first served b at step %d, want within the first two steps", i)
	}
}

// TestSimulateNewFlowsCrowdOutOldFlow is the kept counterexample for min-served:
// a new flow at every step (served 0) keeps an older flow (served >= 1) waiting.
func TestSimulateNewFlowsCrowdOutOldFlow(t *testing.T) {
	t.Parallel()
	arrivals := func(step int) []string {
		if step == 0 {
			return []string{"old", "old"}
		}
		return []string{newFlow(step)}
	}
	got := Simulate(MinServed, arrivals, 200)
	if got[0] != "old" {
		t.Fatalf("step 0 served %q, want old", got[0])
	}
	if n := count(got[1:], "old"); n != 0 {
		t.Fatalf("old served %d times after its first turn, want 0 (crowded out by new flows)", n)
	}
}

func newFlow(step int) string { return fmt.Sprintf("new%04d", step) }

func count(s []string, f string) int {
	n := 0
	for _, x := range s {
		if x == f {
			n++
		}
	}
	return n
}

// TestSimulateNoSteps: a negative or zero number of steps is no step, as
// for SimulateRotation, not a panic.
func TestSimulateNoSteps(t *testing.T) {
	for _, steps := range []int{-1, 0} {
		if got := Simulate(MinServed, nil, steps); len(got) != 0 {
			t.Errorf("Simulate(MinServed, nil, %d) = %v, want no step", steps, got)
		}
	}
}
