package bench

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		in            []float64
		med, min, max float64
	}{
		{"odd", []float64{5, 1, 3}, 3, 1, 5},
		{"even takes the mean of the middle two", []float64{4, 1, 2, 10}, 3, 1, 10},
		{"one", []float64{7}, 7, 7, 7},
	}
	for _, tt := range tests {
		got := Summarize(tt.in)
		if got.Median != tt.med || got.Min != tt.min || got.Max != tt.max || got.N != len(tt.in) {
			t.Errorf("%s: Summarize(%v) = %+v, want median %v min %v max %v", tt.name, tt.in, got, tt.med, tt.min, tt.max)
		}
	}
	if got := Summarize(nil); !math.IsNaN(got.Median) {
		t.Errorf("Summarize(nil).Median = %v, want NaN", got.Median)
	}
}

func TestSummarizeLeavesInputAlone(t *testing.T) {
	t.Parallel()
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Fatalf("Summarize sorted its input: %v", in)
	}
}

func TestRatioIsTakenRoundByRound(t *testing.T) {
	t.Parallel()
	got := Ratio([]float64{10, 20, 30}, []float64{5, 0, 10, 99}, 4)
	want := []float64{8, 12} // round 2 divides by zero and is skipped; round 4 has no a
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Ratio = %v, want %v", got, want)
	}
}

func TestAtLeastAtMost(t *testing.T) {
	t.Parallel()
	if got := AtLeast(0.9, 0.8); got != "yes" {
		t.Errorf("AtLeast(0.9, 0.8) = %q, want yes", got)
	}
	if got, want := AtLeast(0.4, 0.8), "NO (0.50× of the target)"; got != want {
		t.Errorf("AtLeast(0.4, 0.8) = %q, want %q", got, want)
	}
	if got, want := AtMost(3, 1.5), "NO (2.00× of the limit)"; got != want {
		t.Errorf("AtMost(3, 1.5) = %q, want %q", got, want)
	}
}

func TestSummarizeDrain(t *testing.T) {
	t.Parallel()
	ps := []ProcStats{
		{Proc: 0, Events: 30, Busy: 1, MaxWrite: 5, Elapsed: 2e9},
		{Proc: 1, Events: 10, MaxWrite: 9, Elapsed: 1e9},
	}
	s := SummarizeDrain(ps)
	if s.Events != 40 || s.Busy != 1 || s.MaxWrite != 9 {
		t.Fatalf("SummarizeDrain = %+v, want 40 events, 1 busy, max write 9", s)
	}
	if s.Rate != 20 { // 40 events over the longest elapsed, 2 s
		t.Errorf("Rate = %v, want 20", s.Rate)
	}
	if s.MinShare != 0.5 || s.MaxShare != 1.5 { // fair share is 20 each
		t.Errorf("shares = %v..%v, want 0.5..1.5", s.MinShare, s.MaxShare)
	}
}
