package experiment

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
)

// postgresBackendFor returns the PostgreSQL backend on pgtest's server,
// skipping t (failing it with FAIRRELAY_REQUIRE_POSTGRES=1) without one.
func postgresBackendFor(t *testing.T) postgresBackend {
	t.Helper()
	url := pgtest.Require(t)
	b, err := Postgres(url)
	if err != nil {
		t.Fatalf("Postgres(%s): %v", url, err)
	}
	return b.(postgresBackend)
}

// TestScenariosPostgres runs every scenario with its stores on PostgreSQL
// and compares the result with the SAME golden file as on SQLite, byte for
// byte (docs/experiment.md "On PostgreSQL"): checks, trace and both
// snapshots. It never writes a golden file.
//
// It is deliberately not parallel with the other tests: its scenarios run
// in parallel with each other, and only then the SQLite scenarios
// (TestScenarios) run, with the machine to themselves as before. Run
// together under -race on two cores, the SQLite weighted-shares outlasted
// its 20 s watchdog.
func TestScenariosPostgres(t *testing.T) {
	if os.Getenv("GOLDIE_UPDATE") != "" {
		t.Skip("GOLDIE_UPDATE: golden files are written from SQLite only; run the tests again to compare PostgreSQL with them")
	}
	b := postgresBackendFor(t)
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			res := runScenario(context.Background(), b, s, t.TempDir())
			for _, c := range res.Failed() {
				t.Errorf("%s: check %q failed: %s", s.Name, c.Name, c.Detail)
			}
			got, err := Marshal(res)
			if err != nil {
				t.Fatalf("Marshal(%s): %v", s.Name, err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", s.Name+GoldenSuffix))
			if err != nil {
				t.Fatal(err)
			}
			if d := Diff(s.Name, want, got); d != "" {
				t.Errorf("%s on PostgreSQL differs from its golden file:\n%s", s.Name, d)
			}
		})
	}
}

// TestPostgresIntegrityChecksEveryIndex proves the PostgreSQL integrity
// check is not empty: on a queue and a receiver that hold rows it runs
// amcheck over every B-tree index of their schemas and finds them ok.
func TestPostgresIntegrityChecksEveryIndex(t *testing.T) {
	t.Parallel()
	b := postgresBackendFor(t)
	ctx := context.Background()
	lab := &Lab{Dir: t.TempDir(), backend: b, name: "integrity"}
	t.Cleanup(func() {
		if err := b.cleanup(ctx, lab); err != nil {
			t.Error(err)
		}
	})
	relay, err := lab.relay()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Queue.Enqueue(ctx, Ev("a-1", "a", 1), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Drain(ctx, 0); err != nil {
		t.Fatal(err)
	}
	p, err := b.pool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var amcheck bool
	if err := p.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'amcheck')`).Scan(&amcheck); err != nil {
		t.Fatal(err)
	}
	if !amcheck {
		// Skipped on a user's server without it; a failure where nothing
		// may be missing (CI), since every scenario's integrity line would
		// read ok without checking an index.
		pgtest.Missing(t, "the server has no amcheck extension (Debian: postgresql-contrib; CREATE EXTENSION amcheck as a superuser): the integrity check only looks for prepared transactions")
	}
	for _, file := range []string{QueueFile, ReceiverFile} {
		res, indexes, err := b.checkSchema(ctx, b.schema(lab, file))
		if err != nil || res != "ok" {
			t.Fatalf("%s: checkSchema = %q, %v; want ok", file, res, err)
		}
		if len(indexes) < 2 {
			t.Errorf("%s: amcheck checked %v, want every index of the store (at least 2)", file, indexes)
		}
	}
}

// TestPostgresDropsTheScenarioSchemas proves a scenario leaves nothing on
// the server: every schema it (or its child process) made is dropped, and
// the names stay short enough for the queue's wake-up channel.
func TestPostgresDropsTheScenarioSchemas(t *testing.T) {
	t.Parallel()
	b := postgresBackendFor(t)
	ctx := context.Background()
	var key string
	s := Scenario{Name: "a-scenario-name-far-longer-than-a-schema-name-may-be", Run: func(ctx context.Context, lab *Lab) error {
		if _, err := lab.OpenQueue("other.db"); err != nil {
			return err
		}
		key = lab.key
		exit, err := lab.Child(ctx, Job{Program: ProgEnqueue, Events: []queue.Event{Ev("a-1", "a", 1)}}, "")
		lab.ExpectExit("child enqueues", exit, ChildOK)
		return err
	}}
	res := runScenario(ctx, b, s, t.TempDir())
	if !res.Passed {
		t.Fatalf("scenario failed: %+v", res.Failed())
	}
	if !strings.Contains(string(res.Queue), `"a-1"`) {
		t.Fatalf("the child's enqueue is not in the queue snapshot: %s", res.Queue)
	}
	p, err := b.pool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE starts_with(nspname, $1)`, key).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if key == "" || left != 0 {
		t.Fatalf("schemas with prefix %q left after the scenario: %d, want 0", key, left)
	}
	if n := len(key + "_receiver"); n > maxSchemaLen {
		t.Fatalf("schema name of %d bytes, want at most %d", n, maxSchemaLen)
	}
}

// TestBackendFromEnv proves the selection: SQLite by default and for
// "sqlite", an error for anything but "postgres".
func TestBackendFromEnv(t *testing.T) {
	for _, v := range []string{"", "sqlite"} {
		t.Setenv(BackendEnv, v)
		b, err := BackendFromEnv()
		if err != nil || b.Name() != BackendSQLite {
			t.Errorf("%s=%q: backend %v, %v; want sqlite", BackendEnv, v, b, err)
		}
	}
	t.Setenv(BackendEnv, "oracle")
	if b, err := BackendFromEnv(); err == nil {
		t.Errorf("%s=oracle: backend %v, want an error", BackendEnv, b)
	}
}
