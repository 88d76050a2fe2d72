//go:build mage

// The magefile only orchestrates: every piece of logic lives in a module.
// Run the targets with `go tool mage <target>` (mage is pinned as a tool in the
// root go.mod) or with `mage <target>` once mage is installed.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/magefile/mage/mg"
)

// Experiment groups the targets that run the experiment.
type Experiment mg.Namespace

// Soak runs the kill -9 soak with faults: producers, four relays and a
// receiver as real processes, one killed with SIGKILL every 50-500 ms and
// restarted, network faults between the relays and the receiver (cut,
// blackhole, delay) and, on PostgreSQL, database faults; then the relays'
// recovery, a drain and a check of every guarantee. On SQLite by default;
// FAIRRELAY_BACKEND=postgres runs it on a private PostgreSQL cluster of its
// own (initdb, a free port; restarted fast and immediate, sessions
// terminated, connections cut, blackholed and delayed by a fault proxy),
// or on FAIRRELAY_POSTGRES when that is set (never restarted). About a
// minute; SOAK_FOR=30m for a long run, SOAK_SEED=N to replay one,
// SOAK_FAULTS=kind,... to choose the faults, SOAK_SHARDS=N for a queue of N
// shards (docs/scale.md; CI runs both backends with 2).
func Soak() error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	return run(root, "go", "run", "./soak/cmd/soak")
}

// Console groups the targets of the operator's web console.
type Console mg.Namespace

// Screenshots seeds a demo queue and receiver, serves the console and saves a
// PNG of each page under docs/console/ (needs Debian's chromium).
func (Console) Screenshots() error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	cmd := command(filepath.Join(root, "console"), "go", "test", "-count=1", "-run", "^TestScreenshots$", ".")
	cmd.Env = append(os.Environ(), "FAIRRELAY_SCREENSHOTS="+filepath.Join(root, "docs", "console"))
	return cmd.Run()
}

// Fairness groups the targets of the fairness module.
type Fairness mg.Namespace

// Figure draws docs/fairness-crowding.svg from the fairness module's
// simulators: an old flow's claims under min-served and under rotation while
// a new flow arrives before every claim.
func (Fairness) Figure() error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	return run(filepath.Join(root, "fairness"), "go", "run", "./cmd/fairfigure", "-o", filepath.Join(root, "docs", "fairness-crowding.svg"))
}

// Test runs go vet and go test in every module of the workspace, with the race
// detector where this machine can build it (cgo and a C compiler present;
// FAIRRELAY_RACE=0 turns it off). Its runs go FAIRRELAY_TEST_JOBS at a time
// (default 3): many tests wait on fsync, PostgreSQL, child processes or a
// minute's outage, and on a 2-core machine three at once kept both cores busy
// where two left one idle for stretches (mage test took 20 minutes instead of
// 23, 2026-12-07, docs/decisions/ci-runs.md). A module's vet and race-built tests are
// one run; each of its full-count model runs (fullCountModels) is a run of its
// own, so that the longest module's runs do not queue behind each other. Each
// run's output is printed whole when it ends, with its time, the slowest
// started first.
func Test() error {
	mods, err := modules()
	if err != nil {
		return err
	}
	// A package gets 30 minutes rather than go test's 10: the randomized model
	// tests under -race run for minutes on a busy 2-core machine.
	testArgs := []string{"test", "-count=1", "-timeout", "30m"}
	raceOn := raceAvailable()
	if raceOn {
		testArgs = append(testArgs, "-race")
		fmt.Println("mage test: race detector on")
	} else {
		fmt.Println("mage test: race detector off (needs cgo and a C compiler, and FAIRRELAY_RACE unset or 1)")
	}
	testArgs = append(testArgs, "./...")
	jobs := 3
	if v := os.Getenv("FAIRRELAY_TEST_JOBS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			jobs = n
		}
	}
	sort.SliceStable(mods, func(i, j int) bool { return slowFirst(mods[i]) < slowFirst(mods[j]) })
	var runs []testRun
	for _, dir := range mods {
		name := filepath.Base(dir)
		runs = append(runs, testRun{name: name, do: func(out *bytes.Buffer) error {
			if err := runTo(out, dir, "go", vetArgs(dir)...); err != nil {
				return err
			}
			if !hasTests(dir) {
				return nil
			}
			return runTo(out, dir, "go", testArgs...)
		}})
		// A race-built run cuts the randomized model tests to a fraction of
		// their sequences; run them once more at full count without it.
		if !raceOn {
			continue
		}
		for _, pattern := range fullCountModels[name] {
			runs = append(runs, testRun{name: name + " " + pattern, do: func(out *bytes.Buffer) error {
				return runTo(out, dir, "go", "test", "-count=1", "-timeout", "30m", "-run", pattern, "./...")
			}})
		}
	}
	fmt.Printf("mage test: %d modules, %d runs, %d at a time\n", len(mods), len(runs), jobs)
	var (
		mu     sync.Mutex
		failed []string
		wg     sync.WaitGroup
		next   = make(chan testRun)
	)
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				var out bytes.Buffer
				t0 := time.Now()
				err := r.do(&out)
				mu.Lock()
				os.Stdout.Write(out.Bytes())
				status := "ok"
				if err != nil {
					status = "FAIL: " + err.Error()
					failed = append(failed, r.name)
				}
				fmt.Printf("mage test: [%s] %s in %s\n", r.name, status, time.Since(t0).Round(time.Second))
				mu.Unlock()
			}
		}()
	}
	for _, r := range runs {
		mu.Lock()
		stop := len(failed) > 0
		mu.Unlock()
		if stop {
			break
		}
		next <- r
	}
	close(next)
	wg.Wait()
	if len(failed) > 0 {
		return mg.Fatalf(1, "mage test: failed in %s", strings.Join(failed, ", "))
	}
	return nil
}

// testRun is one of Test's runs: a module's vet and tests, or one of its
// full-count model runs.
type testRun struct {
	name string
	do   func(out *bytes.Buffer) error
}

// slowModules are the modules whose tests take longest, slowest first
// (measured on CI and on clean clones); Test starts them first so that its
// runs end together.
var slowModules = []string{"conformance", "experiment", "soak", "relayctl", "console", "pgqueuestore", "queuestore", "bench", "fairness", "pgreceiverstore", "relay", "shard", "inbox"}

// slowFirst is a module's place in Test's order: its index in slowModules,
// or after all of them.
func slowFirst(dir string) int {
	for i, m := range slowModules {
		if filepath.Base(dir) == m {
			return i
		}
	}
	return len(slowModules)
}

// runTo runs name in dir with its output written to out.
func runTo(out *bytes.Buffer, dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	fmt.Fprintf(out, "[%s] %s %s\n", filepath.Base(dir), name, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s in %s: %v", name, strings.Join(args, " "), dir, err)
	}
	return nil
}

// fullCountModels are the modules whose randomized model tests run fewer
// sequences under the race detector, with the tests to run again without it.
var fullCountModels = map[string][]string{
	"queuestore": {"^TestRedriveAll_EquivalentToRedriveSequence$"},
	// The twin clauses again at full count on both backends (two seeds
	// each under the detector), and the model clauses on SQLite only:
	// under the detector SQLite runs its RaceSequences (a fortieth);
	// PostgreSQL's quarter runs mostly in the server, which the detector
	// does not slow.
	"conformance": {"^TestQueue(SQLite|Postgres)$/^(SettleClaimBatch|EnqueueBatch)_Twin", "^TestQueueSQLite$/^Model_"},
}

// Lint fails when gofmt would change a file or go vet reports anything.
func Lint() error {
	mods, err := modules()
	if err != nil {
		return err
	}
	for _, dir := range mods {
		out, err := exec.Command("gofmt", "-l", dir).Output()
		if err != nil {
			return fmt.Errorf("gofmt -l %s: %w", dir, err)
		}
		// Nested modules are listed on their own; keep only this module's files.
		var bad []string
		for _, f := range strings.Fields(string(out)) {
			if owner(f, mods) == dir {
				bad = append(bad, f)
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("gofmt would change:\n%s", strings.Join(bad, "\n"))
		}
		if err := run(dir, "go", vetArgs(dir)...); err != nil {
			return err
		}
	}
	return nil
}

// Bench runs the benchmark harness of the bench module and writes its table to
// docs/performance.md. BENCH_QUICK=1 runs a short smoke version.
func Bench() error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "bench")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return fmt.Errorf("bench: not built yet (the bench module lands with the performance issue)")
	}
	args := []string{"run", "./cmd/benchrun", "-out", filepath.Join(root, "docs", "performance.md")}
	if os.Getenv("BENCH_QUICK") == "1" {
		args = append(args, "-quick")
	}
	return run(dir, "go", args...)
}

// Check runs every scenario of the experiment, one line per scenario, and fails
// on any failed check or any difference from the golden files. The stores are
// SQLite files; FAIRRELAY_BACKEND=postgres puts them in PostgreSQL schemas on
// FAIRRELAY_POSTGRES (default postgres://postgres@127.0.0.1:5432/test),
// compared with the same golden files.
func (Experiment) Check() error {
	return experiment("check")
}

// Output runs every scenario and writes their snapshots, verdicts and the
// environment (Go, SQLite, OS; the backend and PostgreSQL's version with
// FAIRRELAY_BACKEND=postgres) as JSON to file.
func (Experiment) Output(file string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	return experiment("output", abs)
}

// Update rewrites the experiment's golden files from a fresh run on SQLite, for
// a change that has been reviewed. Read the diff before committing it, then
// run experiment:check with FAIRRELAY_BACKEND=postgres: PostgreSQL must give
// the same bytes and never writes a golden file.
func (Experiment) Update() error {
	dir, err := experimentDir()
	if err != nil {
		return err
	}
	cmd := command(dir, "go", "test", "-count=1", "./...")
	cmd.Env = append(os.Environ(), "GOLDIE_UPDATE=1")
	return cmd.Run()
}

func experiment(args ...string) error {
	dir, err := experimentDir()
	if err != nil {
		return err
	}
	return run(dir, "go", append([]string{"run", "./cmd/experiment"}, args...)...)
}

func experimentDir() (string, error) {
	root, err := os.Getwd()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "experiment")
	if _, err := os.Stat(filepath.Join(dir, "cmd", "experiment")); err != nil {
		return "", fmt.Errorf("experiment: not built yet (it lands with the experiment issue)")
	}
	return dir, nil
}

// modules lists the directory of every module in the workspace.
func modules() ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// owner returns the module directory that holds file: the longest prefix.
func owner(file string, mods []string) string {
	best := ""
	for _, m := range mods {
		if strings.HasPrefix(file, m+string(filepath.Separator)) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// vetArgs vets the root module with the mage tag, so the magefile is checked too.
func vetArgs(dir string) []string {
	if _, err := os.Stat(filepath.Join(dir, "magefile.go")); err == nil {
		return []string{"vet", "-tags", "mage", "./..."}
	}
	return []string{"vet", "./..."}
}

// hasTests reports whether the module has any _test.go file outside testdata.
func hasTests(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipDir
		}
		if d.IsDir() && p != dir {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		if strings.HasSuffix(p, "_test.go") {
			found = true
		}
		return nil
	})
	return found
}

func raceAvailable() bool {
	if os.Getenv("FAIRRELAY_RACE") == "0" {
		return false
	}
	out, err := exec.Command("go", "env", "CGO_ENABLED", "CC").Output()
	if err != nil {
		return false
	}
	f := strings.Fields(string(out))
	if len(f) < 2 || f[0] != "1" {
		return false
	}
	_, err = exec.LookPath(f[1])
	return err == nil
}

func command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	fmt.Printf("[%s] %s %s\n", filepath.Base(dir), name, strings.Join(args, " "))
	return cmd
}

func run(dir, name string, args ...string) error {
	if err := command(dir, name, args...).Run(); err != nil {
		return mg.Fatalf(1, "%s %s in %s: %v", name, strings.Join(args, " "), dir, err)
	}
	return nil
}
