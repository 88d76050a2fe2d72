package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/crashpoint"
)

// Scenario is one named experiment: it drives the stores in a fresh folder
// and records named checks. Its result, with both stores' snapshots, is
// compared with testdata/<Name>.golden.json.
type Scenario struct {
	// Name is kebab-case and names the golden file.
	Name string
	// Clause names the clauses of docs/contract.md the scenario proves, e.g. "§2.3".
	Clause string
	// Shows says in one sentence what the scenario shows.
	Shows string
	// Processes is how many child processes the scenario starts; more than
	// one gives it the multi-process watchdog.
	Processes int
	// Crash is the crash point its child is armed at, if any.
	Crash crashpoint.Point
	// Run drives the scenario. It returns an error only when the scenario
	// could not be carried out (an unexpected store error); every expected
	// property is a [Lab.Check].
	Run func(ctx context.Context, lab *Lab) error
}

// Watchdog returns how long the scenario may run before it is stopped as a
// hang: 30 s for a multi-process scenario, 20 s for any other. It is not
// business time: nothing in a scenario depends on it.
func (s Scenario) Watchdog() time.Duration {
	if s.Processes > 1 {
		return 30 * time.Second
	}
	return 20 * time.Second
}

// Check is one named assertion of a scenario and its verdict. Detail says
// what was seen; it never holds paths, PIDs or durations.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// Result is what a scenario produced. Everything but Elapsed is
// deterministic: it is what the golden file holds.
type Result struct {
	Name   string `json:"name"`
	Clause string `json:"clause"`
	// Passed is true when every check passed.
	Passed bool    `json:"passed"`
	Checks []Check `json:"checks"`
	// Trace is the scenario's story, one line a step, in logical time.
	Trace []string `json:"trace"`
	// Queue and Receiver are the stores' full snapshots, taken after every
	// child process exited, with race-decided fields normalised.
	Queue    json.RawMessage `json:"queue"`
	Receiver json.RawMessage `json:"receiver"`
	// Elapsed is the wall time the scenario took. It is shown on the console
	// only and never marshalled.
	Elapsed time.Duration `json:"-"`
}

// Failed lists the checks that did not pass.
func (r Result) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c)
		}
	}
	return out
}

// Lab is one scenario's workspace: its folder (with queue.db and
// receiver.db on SQLite), the stores it opened, its checks and its trace.
type Lab struct {
	// Dir is the scenario's own temporary folder.
	Dir       string
	backend   Backend  // nil: SQLite
	name      string   // the scenario's name
	key       string   // the scenario's schema prefix on PostgreSQL, set on first use
	files     []string // the store names opened, for the cleanup
	checks    []Check
	trace     []string
	closers   []func() error
	normalise []fieldRule
}

// fieldRule replaces every row's field of a snapshot table by a marker.
type fieldRule struct {
	table, field, marker string
}

// Check records a named assertion. The detail is formatted with args; it
// must be deterministic.
func (l *Lab) Check(name string, ok bool, format string, args ...any) bool {
	l.checks = append(l.checks, Check{Name: name, Passed: ok, Detail: l.scrub(fmt.Sprintf(format, args...))})
	return ok
}

// Equal records a check that got equals want (reflect.DeepEqual). The detail
// is the value when they agree and "got …, want …" when they do not.
func (l *Lab) Equal(name string, got, want any) bool {
	if reflect.DeepEqual(got, want) {
		return l.Check(name, true, "%v", got)
	}
	return l.Check(name, false, "got %v, want %v", got, want)
}

// Trace adds a line to the scenario's story.
func (l *Lab) Trace(format string, args ...any) {
	l.trace = append(l.trace, l.scrub(fmt.Sprintf(format, args...)))
}

// NoError records a check that err is nil.
func (l *Lab) NoError(name string, err error) bool {
	if err != nil {
		return l.Check(name, false, "error: %v", err)
	}
	return l.Check(name, true, "no error")
}

// Normalise makes the final queue snapshot show marker instead of field in
// every row of table: for a value that a race decides. The scenario must
// check what the race may and may not decide in a named check of its own.
func (l *Lab) Normalise(table, field, marker string) {
	l.normalise = append(l.normalise, fieldRule{table, field, marker})
}

// scrub removes the temporary folder from a message.
func (l *Lab) scrub(s string) string {
	if l.Dir == "" {
		return s
	}
	return strings.ReplaceAll(s, l.Dir, "$DIR")
}

// closeAll closes every store the scenario opened, in reverse order.
func (l *Lab) closeAll() error {
	var first error
	for i := len(l.closers) - 1; i >= 0; i-- {
		if err := l.closers[i](); err != nil && first == nil {
			first = err
		}
	}
	l.closers = nil
	return first
}

// onClose registers a closer that runs at most once.
func (l *Lab) onClose(close func() error) func() error {
	done := false
	var err error
	once := func() error {
		if !done {
			done = true
			err = close()
		}
		return err
	}
	l.closers = append(l.closers, once)
	return once
}
