package bench

import (
	"fmt"
	"math"
	"slices"
)

// Summary is the median and the range of repeated measurements.
type Summary struct {
	Median, Min, Max float64
	N                int
}

// Summarize returns the median, minimum and maximum of xs. The median of an
// even count is the mean of the two middle values. An empty xs gives NaNs.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		nan := math.NaN()
		return Summary{Median: nan, Min: nan, Max: nan}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Summary{Median: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// Format writes the summary as "median (min–max)" with the given verb for each
// number, e.g. "%.0f" or "%.2f".
func (s Summary) Format(verb string) string {
	return fmt.Sprintf(verb+" ("+verb+"–"+verb+")", s.Median, s.Min, s.Max)
}
