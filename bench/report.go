package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

// A Row is one line of the report's table.
type Row struct {
	What   string  // what was measured
	Value  Summary // median and range over the rounds
	Verb   string  // number format for Value, e.g. "%.0f"
	Unit   string
	Target string // "" when the row is context, not a target
	Met    string // "yes", "NO (…)", or "" for context rows
	Why    string // why a missed target was missed, for the notes under the table
}

// WriteTable writes rows as one markdown table.
func WriteTable(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| measure | median (min–max) | unit | target | met |\n")
	b.WriteString("|---|---:|---|---|---|\n")
	for _, r := range rows {
		verb := r.Verb
		if verb == "" {
			verb = "%.0f"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n",
			r.What, r.Value.Format(verb), r.Unit, r.Target, r.Met)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMisses writes, for every row whose target was missed, what was missed
// and why, as a markdown list. It writes nothing when every target was met.
func WriteMisses(w io.Writer, rows []Row) error {
	var b strings.Builder
	for _, r := range rows {
		if !strings.HasPrefix(r.Met, "NO") {
			continue
		}
		verb := r.Verb
		if verb == "" {
			verb = "%.0f"
		}
		fmt.Fprintf(&b, "- **%s**: %s %s, target %s, %s. %s\n", r.What, r.Value.Format(verb), r.Unit, r.Target, r.Met, r.Why)
	}
	if b.Len() == 0 {
		_, err := io.WriteString(w, "Every target was met in this run.\n")
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Machine describes the machine, for the report's header.
func Machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s/%s, %d logical CPUs (%s)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpu)
}

// AtLeast returns "yes" when got ≥ want, or "NO (x.xx× of the target)".
func AtLeast(got, want float64) string {
	if got >= want {
		return "yes"
	}
	return fmt.Sprintf("NO (%.2f× of the target)", got/want)
}

// AtMost returns "yes" when got ≤ want, or "NO (x.xx× of the limit)".
func AtMost(got, want float64) string {
	if got <= want {
		return "yes"
	}
	if want == 0 {
		return fmt.Sprintf("NO (%g)", got)
	}
	return fmt.Sprintf("NO (%.2f× of the limit)", got/want)
}
