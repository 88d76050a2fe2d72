package bench

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/queuestore"
)

func TestLoadBacklogLoadsEveryFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, err := queuestore.Open(filepath.Join(t.TempDir(), "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const flows, per = 1500, 2 // crosses the 1,000-event chunk boundary
	if err := LoadBacklog(ctx, q, "e", flows, per); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Flows != flows || st.Events.Pending != flows*per {
		t.Fatalf("Stats() flows = %d, pending = %d; want %d, %d", st.Flows, st.Events.Pending, flows, flows*per)
	}
}

// The claim+settle cases on SQLite, plain and over registered
// destinations, step through exactly the backlog they loaded.
func TestClaimSettleStepsThroughTheWholeBacklog(t *testing.T) {
	t.Parallel()
	for _, c := range []Case{ClaimSettle(3, 2), ClaimSettleDests(3, 2, 2)} {
		t.Run(c.Name, func(t *testing.T) { stepThroughBacklog(t, c, 6) })
	}
}

// stepThroughBacklog sets c up and checks that it steps through exactly
// n events, one a step, then says its backlog is empty.
func stepThroughBacklog(t *testing.T, c Case, n int) {
	t.Helper()
	ctx := context.Background()
	w := setUp(t, c)
	for i := range n {
		if got, err := w.Step(ctx); err != nil || got != 1 {
			t.Fatalf("step %d: Step() = %d, %v; want 1, nil", i+1, got, err)
		}
	}
	if _, err := w.Step(ctx); !errors.Is(err, ErrBacklogEmpty) {
		t.Fatalf("step %d on an empty backlog: err = %v, want ErrBacklogEmpty", n+1, err)
	}
}

// The relay workloads check every outcome themselves (accepted, acked, one
// claim per event): stepping them is the test.
func TestRelayWorkloadsStep(t *testing.T) {
	t.Parallel()
	for _, c := range []Case{RelayCycle(), BatchedRelayCycle(1), BatchedRelayCycle(16)} {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := setUp(t, c)
			total := 0
			for range 5 {
				n, err := w.Step(ctx)
				if err != nil {
					t.Fatal(err)
				}
				total += n
			}
			want := 5
			if b, ok := w.(*batched); ok {
				want = 5 * b.size
			}
			if total != want {
				t.Fatalf("items = %d, want %d", total, want)
			}
		})
	}
}

func TestGoqiteAndCeilingStep(t *testing.T) {
	t.Parallel()
	for _, c := range []Case{Ceiling(), Goqite()} {
		ctx := context.Background()
		w, err := c.Setup(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if n, err := w.Step(ctx); err != nil || n != 1 {
				t.Fatalf("%s: Step() = %d, %v; want 1, nil", c.Name, n, err)
			}
		}
		w.Close()
	}
}

// TestHelperQueueChild is the child of TestQueueDrainCountsMatchTheStore: the
// arg after "--" is the queue path.
func TestHelperQueueChild(t *testing.T) {
	if os.Getenv(EnvProc) == "" {
		t.Skip("helper process")
	}
	if err := QueueChild(context.Background(), flag.Arg(0)); err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(2)
	}
	os.Exit(0)
}

// Three claimant processes drain a queue store to the end: what they count is
// what the store acked, each event once.
func TestQueueDrainCountsMatchTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "template.db")
	const flows, per = 20, 5
	if err := MakeQueueTemplate(ctx, tmpl, flows, per); err != nil {
		t.Fatal(err)
	}
	spec := QueueDrain("q", tmpl, "-test.run=^TestHelperQueueChild$")
	args, err := spec.Prepare(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	path := args[len(args)-1]
	args = append(args[:len(args)-2], "--", path) // the test binary takes the path as an argument
	ps, err := SpawnDrain(ctx, os.Args[0], args, 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := SummarizeDrain(ps)
	if s.OtherErrs != 0 {
		t.Fatalf("errors in the children: %d, first: %s", s.OtherErrs, s.FirstError)
	}
	q, err := queuestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Events != flows*per || st.Events.Acked != flows*per || st.Ticket != flows*per {
		t.Fatalf("counted %d events; store acked %d, last ticket %d; want %d each", s.Events, st.Events.Acked, st.Ticket, flows*per)
	}
}
