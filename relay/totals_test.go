package relay_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestTotalsAddUp: with a tiny lease (30 ms) whose first extension of
// every flow's first event is refused, transient and permanent failures,
// every claim ends as exactly one total and they add up to the claims.
func TestTotalsAddUp(t *testing.T) {
	p := testPolicy(30, 5)
	p.BackoffBase, p.BackoffCap = 1, 1
	q := newFake(p)
	const flows = 8
	for i := range flows {
		q.enqueue(fmt.Sprintf("f%d", i), 3)
	}
	q.get(func() {
		q.extend = func(it queuestore.ExtendItem) (queuestore.Outcome, bool) {
			if strings.HasSuffix(it.EventID, "/1") && it.Generation == 1 {
				return queuestore.Stale, true
			}
			return "", false
		}
	})
	h := relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		switch {
		case e.Seq == 1 && e.Attempt == 1:
			<-ctx.Done() // until the lease is lost
			return ctx.Err()
		case e.Seq == 2 && e.Attempt == 1:
			return relay.Fail(relay.ReasonConflict, errors.New("409 Conflict"))
		case e.Seq == 3:
			return relay.FailPermanent(relay.ReasonInvalidBody, errors.New("rule unknown_field"))
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	run := start(t, q, h, relay.Options{Concurrency: 4, Metrics: reg})
	q.waitFor(t, "every flow's third event quarantined", func() bool {
		for i := range flows {
			if q.byID[fmt.Sprintf("f%d/3", i)].state != "quarantined" {
				return false
			}
		}
		return true
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	got := run.r.Totals()
	want := relay.Totals{Claimed: 5 * flows, Delivered: 2 * flows, Retried: flows, Quarantined: flows, Permanent: flows, LeasesLost: flows}
	if got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}
	if sum := got.Delivered + got.Retried + got.Quarantined + got.LeasesLost + got.SettleErrors + got.InFlight; sum != got.Claimed {
		t.Errorf("the totals add up to %d, claimed %d", sum, got.Claimed)
	}
	if v := series(t, reg, "fairrelay_settles_total", "outcome", "quarantined", "reason", relay.ReasonInvalidBody); v != flows {
		t.Errorf("settles{quarantined,invalid_body} = %v, want %d", v, flows)
	}
	if v := series(t, reg, "fairrelay_leases_lost_total"); v != flows {
		t.Errorf("leases lost = %v, want %d", v, flows)
	}
}

// series returns the value of the one member of a family whose labels
// include the given name/value pairs; -1 when there is none.
func series(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return value(m)
		}
	}
	return -1
}

func value(m *dto.Metric) float64 {
	return m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
}

// waitingQueue is a fake that is a queue.Waiter: its oldest event waits
// since at.
type waitingQueue struct {
	*fakeQueue
	at clock.Tick
}

func (w waitingQueue) OldestWaiting(context.Context) (clock.Tick, bool, error) {
	return w.at, true, nil
}

// TestMetricsFromTheFirstScrape: before anything happened every series a
// dashboard needs is there (at 0); the oldest-waiting age comes from the
// queue's OldestWaiting; a reason outside the known set is "other".
func TestMetricsFromTheFirstScrape(t *testing.T) {
	q := newFake(testPolicy(10, 1))
	clk := relay.NewManualClock(5000)
	reg := prometheus.NewRegistry()
	h := relay.HandlerFunc(func(context.Context, relay.Event) error { return relay.Fail("my_own_reason", nil) })
	r, err := relay.New(waitingQueue{q, 2000}, h, relay.Options{Clock: clk, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"fairrelay_settles_total", []string{"outcome", "acked", "reason", "none"}, 0},
		{"fairrelay_settles_total", []string{"outcome", "retry_scheduled", "reason", relay.ReasonUnavailable}, 0},
		{"fairrelay_settles_total", []string{"outcome", "quarantined", "reason", relay.ReasonInvalidBody}, 0},
		{"fairrelay_settles_total", []string{"outcome", "quarantined", "reason", "other"}, 0},
		{"fairrelay_breaker_state", nil, 0},
		{"fairrelay_breaker_opens_total", nil, 0},
		{"fairrelay_breaker_probes_total", nil, 0},
		{"fairrelay_leases_lost_total", nil, 0},
		{"fairrelay_claims_total", nil, 0},
		{"fairrelay_store_errors_total", []string{"op", "claim"}, 0},
		{"fairrelay_lease_extensions_total", []string{"outcome", "extended"}, 0},
		{"fairrelay_oldest_waiting_age_seconds", nil, 3},
	} {
		if got := series(t, reg, s.name, s.labels...); got != s.want {
			t.Errorf("first scrape: %s%v = %v, want %v", s.name, s.labels, got, s.want)
		}
	}
	q.enqueue("a", 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	q.waitFor(t, "quarantined", func() bool { return q.byID["a/1"].state == "quarantined" })
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "fairrelay_settles_total", "outcome", "quarantined", "reason", "other"); got != 1 {
		t.Errorf("settles{quarantined,other} = %v, want 1", got)
	}
}

// TestFailureLogIsRateLimited: 200 failures of one reason make a handful
// of WARN lines; the others are counted in "suppressed" lines, so that
// lines plus suppressed counts are every failure.
func TestFailureLogIsRateLimited(t *testing.T) {
	q := newFake(testPolicy(60_000, 1))
	for i := range 200 {
		q.enqueue(fmt.Sprintf("f%03d", i), 1)
	}
	h := relay.HandlerFunc(func(context.Context, relay.Event) error {
		return relay.Fail(relay.ReasonConflict, errors.New("409 Conflict"))
	})
	var logs logBuffer
	run := start(t, q, h, relay.Options{Logger: logs.logger()})
	q.waitFor(t, "all quarantined", func() bool {
		for _, e := range q.byID {
			if e.state != "quarantined" {
				return false
			}
		}
		return true
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	logged := logs.lines("level=WARN", "delivery failed", "reason=conflict", "attempt=1", "error=\"409 Conflict\"", "outcome=quarantined")
	suppressed := 0
	count := regexp.MustCompile(`count=(\d+)`)
	for _, line := range logs.lines("level=WARN", "failure lines suppressed", "reason=conflict") {
		n, _ := strconv.Atoi(count.FindStringSubmatch(line)[1])
		suppressed += n
	}
	if len(logged)+suppressed != 200 || len(logged) >= 100 {
		t.Errorf("%d failure lines and %d suppressed, want a handful and 200 in all", len(logged), suppressed)
	}
}
