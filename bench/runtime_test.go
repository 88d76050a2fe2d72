package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/queue"
	relayrt "github.com/fairrelay/fairrelay/relay"
)

// TestRuntimeCasesDeliver runs one Step of each runtime case on a small
// backlog: every kind delivers, nothing is quarantined (Step checks), and a
// drained backlog is ErrBacklogEmpty, never a silently short measurement.
func TestRuntimeCasesDeliver(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []RuntimeKind{RuntimeInProcess, RuntimeHTTP, RuntimeSleep} {
		t.Run(string(kind), func(t *testing.T) {
			// The first Step must not drain the backlog: the fast kinds
			// deliver thousands of events a second, the sleeping one 16
			// every 50 ms.
			flows, per := 40, 100
			if kind == RuntimeSleep {
				flows, per = 10, 40
			}
			w := setUp(t, RuntimeCase(kind, 16, 8, flows, per, 150*time.Millisecond))
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
			st, err := rw.q.(queue.Store).Stats(ctx)
			if err != nil || st.Events.Acked != int64(flows*per) {
				t.Fatalf("acked = %d, %v; want all %d", st.Events.Acked, err, flows*per)
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

// TestObservedRuntimeCaseTellsHandlerTimes: the observed sleep case reports
// one mean handler time per Step, and a handler that waits 50 ms cannot
// average less than 50 ms.
func TestObservedRuntimeCaseTellsHandlerTimes(t *testing.T) {
	ctx := context.Background()
	var ht HandlerTimes
	w := setUp(t, ObservedRuntimeCase(RuntimeSleep, 8, 8, 10, 40, 120*time.Millisecond, &ht))
	for range 2 {
		if _, err := w.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ms := ht.Means()
	if len(ms) != 2 {
		t.Fatalf("Means() = %v, want one per Step (2)", ms)
	}
	for _, m := range ms {
		if m < 50*time.Millisecond {
			t.Fatalf("mean handler time %s, want at least the handler's 50 ms wait", m)
		}
	}
}

// TestRuntimeCaseFailedDeliveryFailsStep: a delivery that fails ends the
// measurement with an error, never a silently lower rate.
func TestRuntimeCaseFailedDeliveryFailsStep(t *testing.T) {
	ctx := context.Background()
	w := setUp(t, RuntimeCase(RuntimeSleep, 4, 4, 10, 4, 100*time.Millisecond))
	w.(*runtimeRun).h = relayrt.HandlerFunc(func(context.Context, relayrt.Event) error { return errors.New("down") })
	if n, err := w.Step(ctx); err == nil || errors.Is(err, ErrBacklogEmpty) {
		t.Fatalf("Step() with a failing handler = %d, %v; want a failure error", n, err)
	}
}
