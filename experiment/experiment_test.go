package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sebdah/goldie/v2"

	"github.com/fairrelay/fairrelay/crashpoint"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// TestMain lets a scenario re-execute this test binary as a child process
// (docs/contract.md §4, §5): with FAIRRELAY_EXPERIMENT_CHILD set, it runs the child's job
// and exits before any test runs.
func TestMain(m *testing.M) {
	RunChildIfRequested()
	os.Exit(m.Run())
}

// raceWatchdogScale is how many times longer a scenario's watchdog is in
// a race-built test binary. The watchdog only stops a hang (docs/experiment.md
// "Watchdog"); the race detector makes the scenarios' own code several
// times slower, and mage test runs it beside two other test binaries on two
// cores, where weighted-shares (560 fsync'd commits in one process)
// outlasted 20 s while it was still committing. No verdict or snapshot
// depends on the watchdog; experiment:check, which is not race-built, keeps
// 20 and 30 s.
const raceWatchdogScale = 3

// runScenario is RunOn with the watchdog of this test binary: the
// scenario's own, times raceWatchdogScale under the race detector.
func runScenario(ctx context.Context, b Backend, s Scenario, dir string) Result {
	limit := s.Watchdog()
	if raceBuilt {
		limit *= raceWatchdogScale
	}
	return run(ctx, b, s, dir, limit)
}

// TestScenarios runs every scenario and compares its result with its golden
// file (docs/contract.md §5: snapshots of both stores after every child exited, checks
// with verdicts). GOLDIE_UPDATE=1 rewrites the golden files.
func TestScenarios(t *testing.T) {
	t.Parallel()
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			res := runScenario(context.Background(), SQLite(), s, t.TempDir())
			for _, c := range res.Failed() {
				t.Errorf("%s: check %q failed: %s", s.Name, c.Name, c.Detail)
			}
			data, err := Marshal(res)
			if err != nil {
				t.Fatalf("Marshal(%s): %v", s.Name, err)
			}
			g := goldie.New(t, goldie.WithFixtureDir("testdata"), goldie.WithNameSuffix(GoldenSuffix))
			g.Assert(t, s.Name, data)
		})
	}
}

// TestScenarioList proves the list of docs/contract.md §5: at least 16 kebab-case
// scenarios, each with a golden file, no stray golden file, a clause and a
// sentence for docs/experiment.md.
func TestScenarioList(t *testing.T) {
	t.Parallel()
	all := Scenarios()
	if len(all) < 16 {
		t.Fatalf("Scenarios() has %d scenarios, want at least 16", len(all))
	}
	kebab := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, s := range all {
		if !kebab.MatchString(s.Name) {
			t.Errorf("scenario name %q is not kebab-case", s.Name)
		}
		if seen[s.Name] {
			t.Errorf("scenario name %q is used twice", s.Name)
		}
		seen[s.Name] = true
		if s.Clause == "" || s.Shows == "" || s.Run == nil {
			t.Errorf("scenario %q lacks a clause, a description or a Run", s.Name)
		}
		if _, err := os.Stat(filepath.Join("testdata", s.Name+GoldenSuffix)); err != nil && os.Getenv("GOLDIE_UPDATE") == "" {
			t.Errorf("scenario %q has no golden file: %v", s.Name, err)
		}
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*"+GoldenSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), GoldenSuffix); !seen[name] {
			t.Errorf("golden file %s belongs to no scenario", f)
		}
	}
}

// TestEveryCrashPointHasAScenario proves docs/contract.md §4 is covered: each of the six
// points is the armed point of exactly one single-child scenario.
func TestEveryCrashPointHasAScenario(t *testing.T) {
	t.Parallel()
	byPoint := map[crashpoint.Point][]string{}
	for _, s := range Scenarios() {
		if s.Crash != "" {
			byPoint[s.Crash] = append(byPoint[s.Crash], s.Name)
			if s.Processes != 1 {
				t.Errorf("crash scenario %s declares %d processes, want 1", s.Name, s.Processes)
			}
		}
	}
	for _, p := range crashpoint.Points() {
		if len(byPoint[p]) != 1 {
			t.Errorf("crash point %s is armed by scenarios %v, want exactly one", p, byPoint[p])
		}
	}
}

// TestEightClaimantsIsMultiProcess proves the §5 requirement of eight
// claimant processes and its longer watchdog.
func TestEightClaimantsIsMultiProcess(t *testing.T) {
	t.Parallel()
	for _, s := range Scenarios() {
		if s.Name == "eight-claimants" {
			if s.Processes != 8 || s.Watchdog() != 30*time.Second {
				t.Fatalf("eight-claimants: %d processes, watchdog %s; want 8 and 30s", s.Processes, s.Watchdog())
			}
			return
		}
	}
	t.Fatal("no eight-claimants scenario")
}

// TestWatchdogStopsAHang proves docs/contract.md §5's watchdog: a scenario that never
// finishes on its own is stopped and fails, and the runner still takes the
// snapshots.
func TestWatchdogStopsAHang(t *testing.T) {
	t.Parallel()
	hang := Scenario{Name: "hang", Clause: "test", Shows: "test", Run: func(ctx context.Context, lab *Lab) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	res := run(context.Background(), SQLite(), hang, t.TempDir(), 50*time.Millisecond)
	if res.Passed {
		t.Fatal("a hung scenario passed, want it failed by the watchdog")
	}
	if len(res.Checks) == 0 || res.Checks[0].Name != "watchdog" {
		t.Fatalf("checks = %+v, want a failed watchdog check first", res.Checks)
	}
	if res.Queue == nil || res.Receiver == nil {
		t.Fatalf("snapshots missing after the watchdog: queue %s receiver %s", res.Queue, res.Receiver)
	}
}

// TestRunRecordsErrorsAndPanics proves a scenario error or panic is a failed
// check, not a crash of the whole run.
func TestRunRecordsErrorsAndPanics(t *testing.T) {
	t.Parallel()
	for name, fn := range map[string]func(context.Context, *Lab) error{
		"error": func(context.Context, *Lab) error { return errors.New("boom") },
		"panic": func(context.Context, *Lab) error { panic("boom") },
	} {
		res := Run(context.Background(), Scenario{Name: name, Run: fn}, t.TempDir())
		if res.Passed {
			t.Errorf("%s: scenario passed, want failed", name)
		}
		if f := res.Failed(); len(f) != 1 || f[0].Name != "scenario ran to its end" || !strings.Contains(f[0].Detail, "boom") {
			t.Errorf("%s: failed checks = %+v, want one 'scenario ran to its end' with boom", name, f)
		}
	}
}

// TestLabScrubsTheTemporaryFolder proves the determinism rule of docs/contract.md §5: a
// check or trace line never shows the scenario's temporary path.
func TestLabScrubsTheTemporaryFolder(t *testing.T) {
	t.Parallel()
	lab := &Lab{Dir: t.TempDir()}
	lab.Check("c", false, "open %s/queue.db: denied", lab.Dir)
	lab.Trace("file %s", lab.QueuePath())
	if got, want := lab.checks[0].Detail, "open $DIR/queue.db: denied"; got != want {
		t.Fatalf("check detail = %q, want %q", got, want)
	}
	if got, want := lab.trace[0], "file $DIR/queue.db"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}

func TestResultFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   receiverstore.Outcome
		want queuestore.Result
	}{
		{receiverstore.Accepted, queuestore.Result{OK: true}},
		{receiverstore.Duplicate, queuestore.Result{OK: true}},
		{receiverstore.Conflict, queuestore.Result{Reason: "conflict"}},
		{receiverstore.Gap, queuestore.Result{Reason: "gap"}},
		{receiverstore.UnsupportedDelta, queuestore.Result{Reason: "unsupported_delta"}},
	}
	for _, tt := range tests {
		got, err := ResultFor(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ResultFor(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	if _, err := ResultFor("teapot"); err == nil {
		t.Error(`ResultFor("teapot") error = nil, want an error`)
	}
}

// TestMarshalLayout pins the one marshalling shared by golden files, check
// and output: one line per check, trace entry and snapshot row.
func TestMarshalLayout(t *testing.T) {
	t.Parallel()
	r := Result{
		Name: "x", Clause: "§0", Passed: true,
		Checks:   []Check{{Name: "a <b>", Passed: true, Detail: "1"}},
		Trace:    []string{"t=0 enqueue {\"delta\":5}"},
		Queue:    json.RawMessage(`{"ticket":2,"events":[{"id":"e","n":1},{"id":"f","n":2}],"audit":[]}`),
		Receiver: json.RawMessage(`{"flows":[]}`),
	}
	got, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "name": "x",
  "clause": "§0",
  "passed": true,
  "checks": [
    {"name":"a <b>","passed":true,"detail":"1"}
  ],
  "trace": [
    "t=0 enqueue {\"delta\":5}"
  ],
  "queue": {
    "ticket": 2,
    "events": [
      {"id":"e","n":1},
      {"id":"f","n":2}
    ],
    "audit": []
  },
  "receiver": {
    "flows": []
  }
}
`
	if string(got) != want {
		t.Fatalf("Marshal() =\n%s\nwant\n%s", got, want)
	}
	if !json.Valid(got) {
		t.Fatal("Marshal() is not valid JSON")
	}
}

// TestNormaliseReplacesARaceDecidedField proves the normalisation used by
// the eight-claimant run replaces exactly the named field of every row.
func TestNormaliseReplacesARaceDecidedField(t *testing.T) {
	t.Parallel()
	snap := map[string]any{"ticket": 3, "events": []map[string]any{{"id": "a", "ticket": 2}, {"id": "b", "ticket": 1}}}
	got, err := marshalSnapshot(snap, []fieldRule{{"events", "ticket", TicketMarker}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"events":[{"id":"a","ticket":"<race>"},{"id":"b","ticket":"<race>"}],"ticket":3}`
	if string(got) != want {
		t.Fatalf("marshalSnapshot() = %s, want %s", got, want)
	}
	if _, err := marshalSnapshot(snap, []fieldRule{{"events", "nope", "x"}}); err == nil {
		t.Fatal("normalising a missing field: error = nil, want an error")
	}
}

// TestOutputLayout proves the output file is JSON with the environment and
// every scenario exactly as Marshal writes it.
func TestOutputLayout(t *testing.T) {
	t.Parallel()
	rs := []Result{
		{Name: "a", Checks: []Check{}, Trace: []string{}, Queue: json.RawMessage(`{}`), Receiver: json.RawMessage(`{}`)},
		{Name: "b", Passed: true, Checks: []Check{}, Trace: []string{}, Queue: json.RawMessage(`{}`), Receiver: json.RawMessage(`{}`)},
	}
	data, err := Output(Environment{Go: "go1", SQLite: "3", OS: "linux", Arch: "amd64"}, rs)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Environment map[string]string `json:"environment"`
		Scenarios   []json.RawMessage `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("Output() is not valid JSON: %v\n%s", err, data)
	}
	for _, k := range []string{"go", "sqlite", "os", "arch"} {
		if got.Environment[k] == "" {
			t.Errorf("environment lacks %q", k)
		}
	}
	if len(got.Scenarios) != 2 {
		t.Fatalf("Output() has %d scenarios, want 2", len(got.Scenarios))
	}
	for i, r := range rs {
		want, _ := Marshal(r)
		var a, b any
		_ = json.Unmarshal(want, &a)
		_ = json.Unmarshal(got.Scenarios[i], &b)
		if ja, jb := mustJSON(t, a), mustJSON(t, b); ja != jb {
			t.Errorf("scenario %d in Output() = %s, want %s", i, jb, ja)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestChildRefusesBadInput proves that a child with an unknown program or an
// unknown crash point stops with ChildBadJob before touching any file
// (docs/contract.md §4: an unknown point is an error at arming, not a silent no-op).
func TestChildRefusesBadInput(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string][]string{
		"unknown program": {ChildEnv + `={"program":"dance"}`},
		"unknown point":   {ChildEnv + `={"program":"relay"}`, crashpoint.EnvVar + "=nowhere"},
		"bad job":         {ChildEnv + `={`},
		"unknown backend": {ChildEnv + `={"program":"relay","backend":"oracle"}`},
	} {
		dir := t.TempDir()
		env[0] = strings.Replace(env[0], `"}`, `","dir":"`+dir+`"}`, 1)
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), env...)
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != ChildBadJob {
			t.Errorf("%s: child ended with %v, want exit status %d", name, err, ChildBadJob)
		}
		if files, err := os.ReadDir(dir); err != nil || len(files) != 0 {
			t.Errorf("%s: the child's folder holds %v (%v), want it untouched", name, files, err)
		}
	}
}

func TestLabChildRefusesUnknownPoint(t *testing.T) {
	t.Parallel()
	lab := &Lab{Dir: t.TempDir()}
	_, err := lab.Child(context.Background(), Job{Program: ProgRelay}, "nowhere")
	if !errors.Is(err, crashpoint.ErrUnknownPoint) {
		t.Fatalf("Child() armed at an unknown point: error = %v, want ErrUnknownPoint", err)
	}
}

// TestDocsListEveryScenario keeps docs/experiment.md in step with the code:
// every scenario is described there under its name.
func TestDocsListEveryScenario(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "experiment.md"))
	if err != nil {
		t.Fatalf("read docs/experiment.md: %v", err)
	}
	for _, s := range Scenarios() {
		if !strings.Contains(string(doc), "**`"+s.Name+"`**") {
			t.Errorf("docs/experiment.md does not describe scenario %s", s.Name)
		}
	}
}
