package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRuntimeCasesDeliver runs one Step of each runtime case on a small
// backlog: every kind delivers, nothing is quarantined (Step checks), and a
// drained backlog is ErrBacklogEmpty, never a silently short measurement.
func TestRuntimeCasesDeliver(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []RuntimeKind{RuntimeInProcess, RuntimeHTTP, RuntimeSleep} {
		t.Run(string(kind), func(t *testing.T) {
			w, err := RuntimeCase(kind, 16, 8, 10, 40, 150*time.Millisecond).Setup(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			n, err := w.Step(ctx)
			if err != nil || n == 0 {
				t.Fatalf("Step() = %d, %v; want deliveries", n, err)
			}
			rw := w.(*runtimeRun)
			rw.step = 300 * time.Millisecond
			for {
				if _, err = w.Step(ctx); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrBacklogEmpty) {
				t.Fatalf("Step() on a drained backlog = %v, want ErrBacklogEmpty", err)
			}
			st, err := rw.q.Stats(ctx)
			if err != nil || st.Events.Acked != 400 {
				t.Fatalf("acked = %d, %v; want all 400", st.Events.Acked, err)
			}
		})
	}
}

// TestRuntimeFairnessSmallFlowsFinishFirst: under min-served, 10 small flows
// of 3 events finish long before a big flow of 200 does.
func TestRuntimeFairnessSmallFlowsFinishFirst(t *testing.T) {
	res, err := RuntimeFairness(context.Background(), t.TempDir(), 200, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deliveries < 30 || res.Deliveries > 60 || res.BigServed > 30 {
		t.Fatalf("RuntimeFairness() = %+v, want the 30 small events done within 60 deliveries", res)
	}
}
