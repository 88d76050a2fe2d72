package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/experiment"
	"github.com/fairrelay/fairrelay/pgtest"
)

func TestMain(m *testing.M) {
	experiment.RunChildIfRequested()
	os.Exit(m.Run())
}

// TestCheckFailsOnADifference proves docs/contract.md §5: check exits non-zero on any
// difference from a golden file and shows it.
func TestCheckFailsOnADifference(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	golden, err := os.ReadFile(filepath.Join("..", "..", "testdata", "lexicographic-starvation"+experiment.GoldenSuffix))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lexicographic-starvation"+experiment.GoldenSuffix)
	if err := os.WriteFile(path, golden, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"check", "-run", "^lexicographic-starvation$", "-testdata", dir}, &out, &out); code != 0 {
		t.Fatalf("check against the real golden file: exit %d, want 0\n%s", code, out.String())
	}
	tampered := bytes.Replace(golden, []byte(`"detail":"50"`), []byte(`"detail":"49"`), 1)
	if bytes.Equal(tampered, golden) {
		t.Fatal("test setup: the golden file has no detail 50 to tamper with")
	}
	if err := os.WriteFile(path, tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"check", "-run", "^lexicographic-starvation$", "-testdata", dir}, &out, &out); code != 1 {
		t.Fatalf("check against a tampered golden file: exit %d, want 1\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), `-    {"name":"lexicographic serves a at every step","passed":true,"detail":"49"}`) {
		t.Fatalf("check output does not show the difference:\n%s", out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"check", "-run", "^lexicographic-starvation$", "-testdata", t.TempDir()}, &out, &out); code != 1 || !strings.Contains(out.String(), "golden file missing") {
		t.Fatalf("check without a golden file: exit %d, want 1 and 'golden file missing'\n%s", code, out.String())
	}
}

// TestOutputWritesJSON proves the output file's shape (docs/contract.md §5).
func TestOutputWritesJSON(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "out.json")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"output", "-run", "^lexicographic-starvation$", file}, &out, &out); code != 0 {
		t.Fatalf("output: exit %d, want 0\n%s", code, out.String())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Environment struct{ Go, SQLite, OS, Arch string } `json:"environment"`
		Scenarios   []struct {
			Name     string          `json:"name"`
			Passed   bool            `json:"passed"`
			Checks   []any           `json:"checks"`
			Queue    json.RawMessage `json:"queue"`
			Receiver json.RawMessage `json:"receiver"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("output file is not JSON: %v", err)
	}
	e := got.Environment
	if e.Go == "" || e.SQLite == "" || e.OS == "" || e.Arch == "" {
		t.Errorf("environment = %+v, want go, sqlite, os and arch", e)
	}
	if len(got.Scenarios) != 1 || got.Scenarios[0].Name != "lexicographic-starvation" || !got.Scenarios[0].Passed ||
		len(got.Scenarios[0].Checks) == 0 || got.Scenarios[0].Queue == nil || got.Scenarios[0].Receiver == nil {
		t.Errorf("scenarios = %+v, want the one passed scenario with checks and both snapshots", got.Scenarios)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"bogus"}, {"check", "extra"}, {"output"}, {"check", "-run", "("}, {"check", "-run", "nothing-matches-this"}} {
		var out bytes.Buffer
		if code := run(context.Background(), args, &out, &out); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
}

// TestCheckOnPostgres proves FAIRRELAY_BACKEND=postgres: a crash scenario
// with its child process runs with its stores on PostgreSQL and matches the
// same golden file; an unknown backend is refused before any scenario runs.
func TestCheckOnPostgres(t *testing.T) {
	pgtest.Require(t)
	t.Setenv(experiment.BackendEnv, experiment.BackendPostgres)
	t.Setenv(experiment.PostgresEnv, pgtest.URL())
	var out bytes.Buffer
	if code := run(context.Background(), []string{"check", "-run", "^crash-claim-committed$", "-testdata", filepath.Join("..", "..", "testdata")}, &out, &out); code != 0 {
		t.Fatalf("check on PostgreSQL: exit %d, want 0\n%s", code, out.String())
	}
	if !strings.HasPrefix(out.String(), "backend: postgres,") || !strings.Contains(out.String(), "golden ok") {
		t.Fatalf("check on PostgreSQL printed:\n%s\nwant the backend line and golden ok", out.String())
	}
	t.Setenv(experiment.BackendEnv, "oracle")
	out.Reset()
	if code := run(context.Background(), []string{"check", "-run", "^crash-claim-committed$"}, &out, &out); code != 2 || !strings.Contains(out.String(), experiment.BackendEnv) {
		t.Fatalf("check with an unknown backend: exit %d, want 2 naming %s\n%s", code, experiment.BackendEnv, out.String())
	}
}
