package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/relay"
)

// allAcked reports (under the fake's lock) that every event is acked.
func allAcked(q *fakeQueue) func() bool {
	return func() bool {
		for _, e := range q.byID {
			if e.state != "acked" {
				return false
			}
		}
		return true
	}
}

// TestSettleClaimerSettlesWithTheClaim: with 4 slots whose handlers are
// older than Linger (2 s), two handlers that finish free half the
// slots. A queue with SettleClaimBatch gets their results and the claim of
// the 2 freed slots in one call, so both are acked when the next events
// are claimed, with no SettleBatch; a queue without it gets a ClaimBatch of
// 2 and keeps the results waiting for their batch (2 handlers still run).
func TestSettleClaimerSettlesWithTheClaim(t *testing.T) {
	for _, combined := range []bool{true, false} {
		t.Run(fmt.Sprintf("combined=%v", combined), func(t *testing.T) {
			const linger = 2 * time.Second
			queue := plain
			if combined {
				queue = func(q *fakeQueue) relay.Queue { q.slots = 4; return fakeSettleClaimer{q} }
			}
			q, release, inFlight := gatherCase(t, queue, linger)
			time.Sleep(linger + linger/5) // the 4 handlers are now older than Linger
			close(release["f0"])
			inFlight(3)
			close(release["f1"])
			q.waitFor(t, "6 claimed", func() bool { return len(q.claimed) == 6 })
			q.get(func() {
				f0, f1 := q.byID["f0/1"].state, q.byID["f1/1"].state
				if combined {
					if q.calls["settle"] != 0 || q.calls["claim"] != 1 || q.calls["settle_claim"] != 1 || !slices.Equal(q.scNs, []int{2}) {
						t.Errorf("calls %v, SettleClaimBatch n %v; want one ClaimBatch, then one SettleClaimBatch of n 2", q.calls, q.scNs)
					}
					if f0 != "acked" || f1 != "acked" || len(q.settles) != 1 || len(q.settles[0]) != 2 {
						t.Errorf("f0/1 %s, f1/1 %s, settles %v; want both acked by the call that claimed", f0, f1, sizes(q.settles))
					}
				} else {
					if q.calls["settle_claim"] != 0 || !slices.Equal(q.claimNs, []int{4, 2}) || q.calls["settle"] != 0 {
						t.Errorf("calls %v, ClaimBatch n %v; want ClaimBatch 4 then 2, no settle yet", q.calls, q.claimNs)
					}
					if f0 != "inflight" || f1 != "inflight" {
						t.Errorf("f0/1 %s, f1/1 %s; want both still in flight (results lingering)", f0, f1)
					}
				}
			})
			for i := 2; i < 8; i++ {
				close(release[fmt.Sprintf("f%d", i)])
			}
			q.waitFor(t, "8 acked", allAcked(q))
			q.get(func() {
				if len(q.violations) > 0 {
					t.Errorf("claims beyond the free slots: %v", q.violations)
				}
				for i, id := range q.claimed {
					if want := fmt.Sprintf("f%d/1", i); id != want {
						t.Errorf("claim %d = %s, want %s (the queue's order)", i, id, want)
					}
				}
			})
		})
	}
}

// TestSettleClaimerNeverTwoHandlersOfOneFlow: many events of few flows at
// concurrency 8 through SettleClaimBatch, where the settle of a flow's head
// and the claim of its next event are one call: never two handlers of a
// flow at once, every flow in order, never more claims than free slots.
func TestSettleClaimerNeverTwoHandlersOfOneFlow(t *testing.T) {
	q := newFake(testPolicy(6, 3))
	q.slots = 8
	for i := range 4 {
		q.enqueue(fmt.Sprintf("f%d", i), 25)
	}
	var mu sync.Mutex
	active := map[string]int{}
	last := map[string]int64{}
	var worst int
	var order []string
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		mu.Lock()
		active[e.Flow]++
		worst = max(worst, active[e.Flow])
		if e.Seq != last[e.Flow]+1 {
			order = append(order, fmt.Sprintf("%s after seq %d", e.ID, last[e.Flow]))
		}
		last[e.Flow] = e.Seq
		mu.Unlock()
		runtime.Gosched()
		mu.Lock()
		active[e.Flow]--
		mu.Unlock()
		return nil
	})
	start(t, fakeSettleClaimer{q}, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 8, Poll: time.Hour})
	q.waitFor(t, "100 events acked", allAcked(q))
	mu.Lock()
	defer mu.Unlock()
	if worst != 1 || len(order) > 0 {
		t.Fatalf("most handlers of one flow at once = %d, out of order: %v", worst, order)
	}
	q.get(func() {
		if q.calls["settle_claim"] == 0 {
			t.Errorf("calls %v: SettleClaimBatch never used", q.calls)
		}
		if len(q.violations) > 0 {
			t.Errorf("claims beyond the free slots: %v", q.violations)
		}
		for _, n := range q.claimNs {
			if n > 8 {
				t.Errorf("claim of %d with 8 slots", n)
			}
		}
	})
}

// TestSettleClaimerShutdownSettlesOnly: after shutdown begins the relay
// claims nothing more, not even through SettleClaimBatch: the last results
// go to SettleBatch.
func TestSettleClaimerShutdownSettlesOnly(t *testing.T) {
	q := newFake(testPolicy(600, 3))
	for _, flow := range []string{"a", "b", "c"} {
		q.enqueue(flow, 1)
	}
	started := make(chan struct{}, 3)
	finish := make(chan struct{})
	h := relay.HandlerFunc(func(context.Context, relay.Event) error { started <- struct{}{}; <-finish; return nil })
	shutting := make(chan struct{})
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) {
		if bytes.Contains(b, []byte("relay: shutting down")) {
			close(shutting)
		}
	}), nil))
	run := start(t, fakeSettleClaimer{q}, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 2, Poll: time.Hour, ShutdownGrace: time.Minute, Logger: log})
	<-started
	<-started
	done := make(chan error, 1)
	go func() { done <- run.stop(t) }()
	<-shutting // the handlers finish only after the shutdown began
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	q.get(func() {
		if len(q.claimed) != 2 || q.byID["c/1"].state != "pending" {
			t.Errorf("claimed %v, c/1 %s; want 2 claims and c left pending", q.claimed, q.byID["c/1"].state)
		}
		if q.byID["a/1"].state != "acked" || q.byID["b/1"].state != "acked" {
			t.Errorf("a/1 %s, b/1 %s; want both settled", q.byID["a/1"].state, q.byID["b/1"].state)
		}
		if q.calls["settle_claim"] != 0 {
			t.Errorf("calls %v: SettleClaimBatch during shutdown", q.calls)
		}
	})
}

// TestSettleClaimerErrorsAreRetried: a refused SettleClaimBatch keeps its
// results and is retried after the backoff (not at every turn of the loop);
// once the queue answers, the results are settled and the rest claimed.
func TestSettleClaimerErrorsAreRetried(t *testing.T) {
	q := newFake(testPolicy(600, 3))
	q.enqueue("a", 2)
	q.enqueue("b", 2)
	q.fail["settle_claim"] = errors.New("database is locked")
	h := relay.HandlerFunc(func(context.Context, relay.Event) error { return nil })
	began := time.Now()
	start(t, fakeSettleClaimer{q}, h, relay.Options{Clock: relay.NewManualClock(0), Poll: 40 * time.Millisecond})
	q.waitFor(t, "4 refused calls", func() bool { return q.calls["settle_claim"] >= 4 })
	time.Sleep(100 * time.Millisecond)
	var calls int
	q.get(func() { calls = q.calls["settle_claim"]; delete(q.fail, "settle_claim") })
	if bound := 1 + int(time.Since(began)/(10*time.Millisecond)); calls > bound {
		t.Fatalf("settle_claim calls = %d in %v, want at most %d", calls, time.Since(began), bound)
	}
	q.waitFor(t, "all acked", allAcked(q))
}

// writerFunc is an io.Writer calling fn with each write.
type writerFunc func([]byte)

func (w writerFunc) Write(b []byte) (int, error) { w(b); return len(b), nil }
