package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
)

// A steady-load run relays every event once (relayCycle checks each
// outcome) and, with a window, its prune passes delete exactly what the
// window no longer keeps at the last tick, from both stores; without one,
// nothing.
func TestSteadyLoadPrunesWhatTheWindowNoLongerKeeps(t *testing.T) {
	t.Parallel()
	testSteadyLoad(t, SQLiteSteadyStores)
}

func TestSteadyLoadPostgres(t *testing.T) {
	t.Parallel()
	testSteadyLoad(t, PGSteadyStores(pgtest.Require(t)))
}

func testSteadyLoad(t *testing.T, open SteadyStores) {
	t.Helper()
	ctx := context.Background()
	// 31 cycles, 30 of 10 events and the last of 5: ticks 1..31.
	spec := RetentionSpec{Events: 305, Flows: 20, Batch: 10, Retention: 10, PruneEvery: 7}
	res, err := SteadyLoad(ctx, t.TempDir(), open, spec)
	if err != nil {
		t.Fatal(err)
	}
	// At the last tick, 31, the events of ticks 1..21 are out of the window.
	const want = 21 * 10
	if res.Events != want || res.Receipts != want {
		t.Errorf("pruned %d events and %d receipts, want %d of each", res.Events, res.Receipts, want)
	}
	if res.Start.Queue <= 0 || res.End.Queue <= 0 || res.Peak.Queue < res.End.Queue || res.Peak.Receiver < res.End.Receiver || res.Mid.Queue <= 0 {
		t.Errorf("sizes: start %+v mid %+v end %+v peak %+v; want positive, peak >= end", res.Start, res.Mid, res.End, res.Peak)
	}

	spec.Retention = 0
	res, err = SteadyLoad(ctx, t.TempDir(), open, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 0 || res.Receipts != 0 {
		t.Errorf("without retention: pruned %d events and %d receipts, want none", res.Events, res.Receipts)
	}
	if res.End.Queue <= res.Start.Queue || res.End.Receiver <= res.Start.Receiver {
		t.Errorf("without retention: sizes %+v → %+v, want both to grow", res.Start, res.End)
	}
}

func TestSteadyLoadRefusesABadSpec(t *testing.T) {
	t.Parallel()
	_, err := SteadyLoad(context.Background(), t.TempDir(), SQLiteSteadyStores, RetentionSpec{Events: 10, Flows: 4, Batch: 8, PruneEvery: 1})
	if err == nil {
		t.Fatal("SteadyLoad with a batch larger than the flows: no error")
	}
}

// The pruner's case drains as the plain one does, and its pruner deletes
// the acked events once they leave the window.
func TestPruneClaimSettleWithAPruner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := setUp(t, PruneClaimSettle(10, 60, 50, true))
	c := w.(*pruneClaimSettle)
	for i := range 3 {
		if n, err := w.Step(ctx); err != nil || n != pruneSteps {
			t.Fatalf("step %d: Step() = %d, %v; want %d, nil", i+1, n, err, pruneSteps)
		}
	}
	// One more batch at the last tick: everything acked at or before
	// tick 601-50 is gone, whatever the pruner had done already.
	for {
		res, err := c.q.Prune(ctx, c.tick, 1000)
		if err != nil {
			t.Fatal(err)
		}
		c.pruned += res.Events
		if !res.More {
			break
		}
	}
	// Claims took ticks 2..601; acked at or below 551: 550 events.
	if c.pruned != 550 {
		t.Errorf("pruned %d events, want 550", c.pruned)
	}
	if _, err := w.Step(ctx); !errors.Is(err, ErrBacklogEmpty) {
		t.Fatalf("step on an empty backlog: err = %v, want ErrBacklogEmpty", err)
	}
}
