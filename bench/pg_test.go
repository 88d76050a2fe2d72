package bench

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/jackc/pgx/v5"
)

// schemaCount counts the schemas named like the bench's.
func schemaCount(t *testing.T, url string) int {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench\_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// runSteps sets c up, runs steps Steps and returns what each counted; the
// case is closed before it returns.
func runSteps(t *testing.T, c Case, steps int) []int {
	t.Helper()
	ctx := context.Background()
	w, err := c.Setup(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for range steps {
		n, err := w.Step(ctx)
		if err != nil {
			w.Close()
			t.Fatal(err)
		}
		got = append(got, n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

// The PostgreSQL batched cycle moves whole batches and drops its schema.
func TestPGBatchedCycle(t *testing.T) {
	url := pgtest.Require(t)
	before := schemaCount(t, url)
	for _, n := range runSteps(t, PGBatchedCycle(url, 4), 3) {
		if n != 4 {
			t.Fatalf("step counted %d events, want 4", n)
		}
	}
	if after := schemaCount(t, url); after > before {
		t.Fatalf("bench schemas: %d before, %d after Close", before, after)
	}
}

// The PostgreSQL ceiling commits one row a Step and drops its schema.
func TestPGCeiling(t *testing.T) {
	url := pgtest.Require(t)
	before := schemaCount(t, url)
	for _, n := range runSteps(t, PGCeiling(url), 3) {
		if n != 1 {
			t.Fatalf("step counted %d commits, want 1", n)
		}
	}
	if after := schemaCount(t, url); after > before {
		t.Fatalf("bench schemas: %d before, %d after Close", before, after)
	}
}

// claim+settle on PostgreSQL, plain and over registered destinations,
// drains exactly the backlog it loaded, then says the backlog is empty.
func TestPGClaimSettleDrainsItsBacklog(t *testing.T) {
	url := pgtest.Require(t)
	for _, c := range []Case{PGClaimSettle(url, 3, 2), PGClaimSettleDests(url, 3, 2, 2)} {
		t.Run(c.Name, func(t *testing.T) { stepThroughBacklog(t, c, 6) })
	}
}

// checkRiver runs two timed steps of a River case: together they count some
// jobs and no more than were inserted, each reports about its window, not
// the untimed wait for its last jobs, and after each every job inserted has
// completed and the client has stopped (so that it polls nothing during
// other cases' slices), to start again for the next step.
func checkRiver(t *testing.T, c Case) {
	t.Helper()
	ctx := context.Background()
	w, err := c.Setup(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	}()
	tw, ok := w.(TimedWorkload)
	if !ok {
		t.Fatalf("%T is not a TimedWorkload", w)
	}
	total := 0
	for range 2 {
		n, took, err := tw.TimedStep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n < 0 || took <= 0 {
			t.Fatalf("step: %d jobs in %s", n, took)
		}
		total += n
		done, inserted := w.(interface{ counts() (int64, int64) }).counts()
		if done != inserted || int64(total) > inserted {
			t.Fatalf("after the step: %d completed, %d inserted, %d counted", done, inserted, total)
		}
		if !w.(interface{ clientStopped() bool }).clientStopped() {
			t.Fatal("the River client still runs after the step")
		}
	}
	// River takes a moment to start fetching after Start, so one short
	// step may count nothing; two must count something.
	if total == 0 {
		t.Fatal("two steps counted no completed job")
	}
}

func TestRiverPG(t *testing.T) {
	url := pgtest.Require(t)
	before := schemaCount(t, url)
	checkRiver(t, RiverPG(url, 8, 4, 500*time.Millisecond))
	if after := schemaCount(t, url); after > before {
		t.Fatalf("bench schemas: %d before, %d after Close", before, after)
	}
}

func TestRiverSQLite(t *testing.T) {
	checkRiver(t, RiverSQLite(8, 4, 500*time.Millisecond))
}

// TestHelperPGDrainChild is the child of the PostgreSQL drain test: args
// after "--" are the server's URL and the schema.
func TestHelperPGDrainChild(t *testing.T) {
	if os.Getenv(EnvProc) == "" || os.Getenv("FAIRRELAY_BENCH_PG_CHILD") == "" {
		t.Skip("helper process")
	}
	args := flag.Args()
	if err := PGQueueChild(context.Background(), args[0], args[1], 4); err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(2)
	}
	os.Exit(0)
}

// Two processes with batched claims drain a copy of a template: the events
// they count are exactly those the database shows acked, and the template
// is untouched.
func TestPGDrainCountsMatchTheDatabase(t *testing.T) {
	url := pgtest.Require(t)
	ctx := context.Background()
	tmpl, copy := NewPGSchema(), NewPGSchema()
	defer DropPGSchema(ctx, url, tmpl)
	defer DropPGSchema(ctx, url, copy)
	const flows, perFlow = 3, 10
	if err := MakePGTemplate(ctx, url, tmpl, flows, perFlow); err != nil {
		t.Fatal(err)
	}
	if err := CopyPGTemplate(ctx, url, tmpl, copy); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAIRRELAY_BENCH_PG_CHILD", "1")
	ps, err := SpawnDrain(ctx, os.Args[0], []string{"-test.run=^TestHelperPGDrainChild$", "--", url, copy}, 2, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := SummarizeDrain(ps)
	if s.OtherErrs != 0 {
		t.Fatalf("errors in the children: %d, first: %s", s.OtherErrs, s.FirstError)
	}
	if s.Events != flows*perFlow {
		t.Fatalf("children counted %d events, want %d", s.Events, flows*perFlow)
	}
	for _, sc := range []struct {
		schema string
		acked  int64
	}{{copy, flows * perFlow}, {tmpl, 0}} {
		q, err := pgqueuestore.Open(ctx, url, pgqueuestore.WithSchema(sc.schema))
		if err != nil {
			t.Fatal(err)
		}
		st, err := q.Stats(ctx)
		q.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Events.Acked != sc.acked || st.Events.Pending+st.Events.Acked != flows*perFlow || st.Events.Inflight != 0 {
			t.Fatalf("schema %s: %+v, want %d acked of %d", sc.schema, st.Events, sc.acked, flows*perFlow)
		}
	}
}

// timedWorkload reports 100 items in 100 ms per step, whatever its wall time.
type timedWorkload struct{ countingWorkload }

func (w *timedWorkload) TimedStep(context.Context) (int, time.Duration, error) {
	w.steps++
	time.Sleep(time.Millisecond)
	return 100, 100 * time.Millisecond, nil
}

// Measure takes a TimedWorkload's rate from the time its steps report, not
// from the wall time they took.
func TestMeasureUsesTheTimeATimedWorkloadReports(t *testing.T) {
	t.Parallel()
	rates, err := Measure(context.Background(), t.TempDir(), []Case{{Name: "timed", Setup: func(context.Context, string) (Workload, error) {
		return &timedWorkload{}, nil
	}}}, Plan{Rounds: 2, Slice: 5 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rates["timed"] {
		if r != 1000 {
			t.Fatalf("rates = %v, want 1000 items/s in every round (100 items per reported 100 ms)", rates["timed"])
		}
	}
}

// MeasurePGDrains gives every process count one summary per round, with
// events counted and no error, and drops every copy it drained.
func TestMeasurePGDrains(t *testing.T) {
	url := pgtest.Require(t)
	ctx := context.Background()
	tmpl := NewPGSchema()
	defer DropPGSchema(ctx, url, tmpl)
	// Many more flows than events in flight (2 processes × 4): a flow's head
	// in flight blocks the flow, and a claim that finds no head reads as an
	// empty backlog. 8,000 events: a drain of 300 ms must not run dry (1,200
	// did, at the one-call path's speed, under the race detector).
	if err := MakePGTemplate(ctx, url, tmpl, 40, 200); err != nil {
		t.Fatal(err)
	}
	before := schemaCount(t, url)
	t.Setenv("FAIRRELAY_BENCH_PG_CHILD", "1")
	args := func(schema string) []string {
		return []string{"-test.run=^TestHelperPGDrainChild$", "--", url, schema}
	}
	out, err := MeasurePGDrains(ctx, url, tmpl, os.Args[0], args, []int{1, 2}, 2, 300*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2} {
		if len(out[n]) != 2 {
			t.Fatalf("%d processes: %d rounds, want 2", n, len(out[n]))
		}
		for _, s := range out[n] {
			if s.Procs != n || s.Events <= 0 || s.OtherErrs != 0 {
				t.Fatalf("%d processes: %+v", n, s)
			}
		}
	}
	if after := schemaCount(t, url); after != before {
		t.Fatalf("bench schemas: %d before the drains, %d after", before, after)
	}
}
