// Command experiment runs fairrelay's experiment: every scenario of the
// experiment package, each in a fresh temporary folder with its own queue.db
// and receiver.db.
//
// Usage, from the experiment folder:
//
//	experiment check [-run REGEXP] [-testdata DIR]
//	experiment output [-run REGEXP] FILE
//
// check prints one line per scenario as it runs (verdict, name, time),
// compares each result with its golden file testdata/<name>.golden.json and
// prints the difference; it exits 1 on any failed check or difference.
// output writes every scenario's checks and snapshots, plus the Go, SQLite
// and OS versions, as JSON to FILE; it exits 1 when a check failed (the file
// is written all the same). Golden files are rewritten by the experiment's
// tests with GOLDIE_UPDATE=1 (mage experiment:update), never by this command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/fairrelay/fairrelay/experiment"
)

func main() {
	// A scenario's child process is this same binary: run its job and exit.
	experiment.RunChildIfRequested()
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: experiment check [-run REGEXP] [-testdata DIR]")
	fmt.Fprintln(w, "       experiment output [-run REGEXP] FILE")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	pattern := fs.String("run", "", "run only the scenarios whose name matches this regular expression")
	testdata := fs.String("testdata", "testdata", "folder of the golden files (check)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	scenarios, err := selectScenarios(*pattern)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if (args[0] != "check" || fs.NArg() != 0) && (args[0] != "output" || fs.NArg() != 1) {
		usage(stderr)
		return 2
	}
	backend, err := experiment.BackendFromEnv()
	if err != nil {
		fmt.Fprintln(stderr, "experiment:", err)
		return 2
	}
	if backend.Name() != experiment.BackendSQLite {
		fmt.Fprintf(stdout, "backend: %s\n", backend)
	}
	switch args[0] {
	case "check":
		return check(ctx, backend, scenarios, *testdata, stdout)
	case "output":
		return output(ctx, backend, scenarios, fs.Arg(0), stdout, stderr)
	}
	usage(stderr)
	return 2
}

func selectScenarios(pattern string) ([]experiment.Scenario, error) {
	all := experiment.Scenarios()
	if pattern == "" {
		return all, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	var out []experiment.Scenario
	for _, s := range all {
		if re.MatchString(s.Name) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-run %q matches no scenario", pattern)
	}
	return out, nil
}

// runAll runs each scenario in its own temporary folder and prints its
// console line: verdict, name and wall time (the time is never stored).
func runAll(ctx context.Context, backend experiment.Backend, scenarios []experiment.Scenario, stdout io.Writer, line func(experiment.Result) string) ([]experiment.Result, error) {
	results := make([]experiment.Result, 0, len(scenarios))
	for _, s := range scenarios {
		dir, err := os.MkdirTemp("", "fairrelay-"+s.Name+"-")
		if err != nil {
			return nil, err
		}
		res := experiment.RunOn(ctx, backend, s, dir)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "%-4s %-34s %6.2fs%s\n", verdict(res), s.Name, res.Elapsed.Seconds(), line(res))
		for _, c := range res.Failed() {
			fmt.Fprintf(stdout, "     failed check %q: %s\n", c.Name, c.Detail)
		}
		results = append(results, res)
	}
	return results, nil
}

func verdict(r experiment.Result) string {
	if r.Passed {
		return "PASS"
	}
	return "FAIL"
}

func check(ctx context.Context, backend experiment.Backend, scenarios []experiment.Scenario, testdata string, stdout io.Writer) int {
	start := time.Now()
	var diffs []string
	failed, differ := 0, 0
	_, err := runAll(ctx, backend, scenarios, stdout, func(r experiment.Result) string {
		if !r.Passed {
			failed++
		}
		got, err := experiment.Marshal(r)
		if err != nil {
			differ++
			return "  (cannot marshal: " + err.Error() + ")"
		}
		want, err := os.ReadFile(filepath.Join(testdata, r.Name+experiment.GoldenSuffix))
		if errors.Is(err, os.ErrNotExist) {
			differ++
			return "  golden file missing"
		}
		if err != nil {
			differ++
			return "  (" + err.Error() + ")"
		}
		if d := experiment.Diff(r.Name, want, got); d != "" {
			differ++
			diffs = append(diffs, d)
			return "  DIFFERS from its golden file"
		}
		return "  golden ok"
	})
	if err != nil {
		fmt.Fprintln(stdout, "experiment:", err)
		return 1
	}
	for _, d := range diffs {
		fmt.Fprint(stdout, "\n"+d)
	}
	fmt.Fprintf(stdout, "\n%d scenarios, %d failed, %d differ from their golden files (%.1fs)\n",
		len(scenarios), failed, differ, time.Since(start).Seconds())
	if failed > 0 || differ > 0 {
		return 1
	}
	return 0
}

func output(ctx context.Context, backend experiment.Backend, scenarios []experiment.Scenario, file string, stdout, stderr io.Writer) int {
	env, err := experiment.EnvironmentOn(ctx, backend)
	if err != nil {
		fmt.Fprintln(stderr, "experiment:", err)
		return 1
	}
	results, err := runAll(ctx, backend, scenarios, stdout, func(experiment.Result) string { return "" })
	if err != nil {
		fmt.Fprintln(stderr, "experiment:", err)
		return 1
	}
	data, err := experiment.Output(env, results)
	if err != nil {
		fmt.Fprintln(stderr, "experiment:", err)
		return 1
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		fmt.Fprintln(stderr, "experiment:", err)
		return 1
	}
	failed := 0
	for _, r := range results {
		if !r.Passed {
			failed++
		}
	}
	fmt.Fprintf(stdout, "wrote %s: %d scenarios, %d failed\n", file, len(results), failed)
	if failed > 0 {
		return 1
	}
	return 0
}
