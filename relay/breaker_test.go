package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// logBuffer collects a relay's log lines, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the lines that contain every one of parts.
func (l *logBuffer) lines(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range strings.Split(l.b.String(), "\n") {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fastRetries is a wall-clock policy whose retries are due at once (1 ms)
// and whose leases never run out during a test.
func fastRetries(attempts int) queuestore.Policy {
	p := testPolicy(60_000, attempts)
	p.BackoffBase, p.BackoffCap = 1, 1
	return p
}

// claimRec is one ClaimBatch as the fake saw it, with the relay's breaker
// state at that moment.
type claimRec struct {
	state  string
	n, got int
}

// TestBreakerOpensProbesAndCloses: with the destination down, consecutive
// destination failures of several flows open the breaker; while it is
// open the relay claims nothing but probes of one event, so the attempts
// charged after the opening are exactly the probes; when the destination
// answers again a probe succeeds, the breaker closes and every event is
// delivered without anything quarantined.
func TestBreakerOpensProbesAndCloses(t *testing.T) {
	q := newFake(fastRetries(50))
	for i := range 20 {
		q.enqueue(fmt.Sprintf("f%02d", i), 2)
	}
	var down atomic.Bool
	down.Store(true)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		if down.Load() {
			return relay.FailDestination(relay.ReasonUnavailable, errors.New(`dial tcp 127.0.0.1:9: connect: connection refused`))
		}
		return nil
	})
	var logs logBuffer
	r, err := relay.New(q, h, relay.Options{Concurrency: 4, Batch: 4, Logger: logs.logger(),
		Breaker: relay.BreakerOptions{Threshold: 3, MinProbe: 2 * time.Millisecond, MaxProbe: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var recs []claimRec
	q.get(func() {
		q.onClaim = func(n, got int) {
			b := r.Breaker()
			recs = append(recs, claimRec{b.State, n, got})
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
	defer stop()

	q.waitFor(t, "five probes", func() bool { return r.Breaker().Probes >= 5 })
	down.Store(false)
	q.waitFor(t, "all acked", allAcked(q))
	q.waitFor(t, "the breaker closed", func() bool { return r.Breaker().State == relay.BreakerClosed })

	b := r.Breaker()
	if b.Opens != 1 || b.LastReason != relay.ReasonUnavailable || !strings.Contains(b.LastError, "connection refused") {
		t.Errorf("Breaker() = %+v, want one opening by unavailable: connection refused", b)
	}
	q.get(func() {
		var afterOpen, probeEvents int
		for i, c := range recs {
			if c.state == relay.BreakerClosed {
				continue
			}
			afterOpen++
			if c.state != relay.BreakerProbing || c.n != 1 {
				t.Errorf("claim %d while the breaker was %s asked for %d events, want probing and 1", i, c.state, c.n)
			}
			probeEvents += c.got
		}
		if int64(afterOpen) < b.Probes { // a probe time with nothing due claims nothing and is not counted
			t.Errorf("%d claims while open, %d probes", afterOpen, b.Probes)
		}
		// Attempts charged while open are exactly the probes' events.
		if int64(probeEvents) != b.Probes {
			t.Errorf("%d events claimed while open, want %d (one per probe)", probeEvents, b.Probes)
		}
		var attempts int
		for _, e := range q.byID {
			attempts += e.attempts
			if e.state != "acked" {
				t.Errorf("event %s is %s", e.id, e.state)
			}
		}
		if attempts != len(q.claimed) {
			t.Errorf("%d attempts charged, %d claims", attempts, len(q.claimed))
		}
		// Before the opening, Threshold failures (a few more when the
		// first ones came from one flow while others ran) and the
		// handlers still running were charged: everything else came from
		// probes.
		if failed := attempts - 40; int64(failed) > 2*3+4-1+b.Probes {
			t.Errorf("%d failed attempts with %d probes", failed, b.Probes)
		}
		for _, items := range q.settles {
			for _, it := range items {
				if !it.Result.OK && (it.Result.Reason != relay.ReasonUnavailable || !strings.Contains(it.Result.Error, "connection refused")) {
					t.Errorf("settle %+v, want reason unavailable and the error text", it)
				}
			}
		}
	})
	if n := len(logs.lines("level=WARN", "breaker open")); n != 1 {
		t.Errorf("%d breaker-open lines, want 1", n)
	}
	if n := len(logs.lines("level=INFO", "breaker closed")); n != 1 {
		t.Errorf("%d breaker-closed lines, want 1", n)
	}
	// The totals count a settle after the queue has taken it: read them
	// once Run has returned, not as soon as the queue shows every ack.
	stop()
	tot := r.Totals()
	if tot.Delivered != 40 || tot.Quarantined != 0 || tot.InFlight != 0 ||
		tot.Delivered+tot.Retried != tot.Claimed || tot.Claimed != int64(len(q.claimed)) {
		t.Errorf("Totals() = %+v with %d claims", tot, len(q.claimed))
	}
}

// TestBreakerEventFailuresNeverOpen: the receiver's refusals of events
// (409 conflicts, 400 invalid bodies) say the destination answers: with a
// threshold of 2 and 30 such failures the breaker never opens, the
// permanent ones quarantine at once and the transient ones are retried.
func TestBreakerEventFailuresNeverOpen(t *testing.T) {
	q := newFake(fastRetries(5))
	for i := range 10 {
		q.enqueue(fmt.Sprintf("f%02d", i), 3)
	}
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		switch {
		case e.Flow >= "f05" && e.Seq == 1:
			return relay.FailPermanent(relay.ReasonInvalidBody, errors.New("400 Bad Request: rule delta_out_of_range"))
		case e.Attempt == 1:
			return relay.Fail(relay.ReasonConflict, errors.New("409 Conflict"))
		}
		return nil
	})
	run := start(t, q, h, relay.Options{Concurrency: 4, Breaker: relay.BreakerOptions{Threshold: 2}})
	q.waitFor(t, "flows f00..f04 acked, f05..f09 quarantined", func() bool {
		for flow, es := range q.flows {
			for _, e := range es {
				if flow < "f05" && e.state != "acked" || flow >= "f05" && e.seq == 1 && e.state != "quarantined" {
					return false
				}
			}
		}
		return true
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if b := run.r.Breaker(); b.Opens != 0 || b.State != relay.BreakerClosed || b.ConsecutiveFailures != 0 {
		t.Errorf("Breaker() = %+v, want closed, never opened", b)
	}
	for i := 5; i < 10; i++ {
		if e := q.event(fmt.Sprintf("f%02d/1", i)); e.attempts != 1 || e.reason != relay.ReasonInvalidBody {
			t.Errorf("%s: %d attempts, reason %q; want quarantined at its first attempt", e.id, e.attempts, e.reason)
		}
	}
	tot := run.r.Totals()
	want := relay.Totals{Claimed: 5 + 30, Delivered: 15, Retried: 15, Quarantined: 5, Permanent: 5}
	if tot != want {
		t.Errorf("Totals() = %+v, want %+v", tot, want)
	}
}

// TestBreakerRetryAfter: a destination failure's Retry-After is the
// event's RetryAfter (in ticks, milliseconds) and sets the wait before the
// breaker's probe, capped by MaxProbe; the probe's success closes it.
func TestBreakerRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		retryAfter, maxProbe, wantProbe time.Duration
	}{
		{30 * time.Millisecond, time.Minute, 30 * time.Millisecond},
		{10 * time.Minute, 40 * time.Millisecond, 40 * time.Millisecond},
	} {
		t.Run(tt.retryAfter.String(), func(t *testing.T) {
			p := fastRetries(5)
			p.RetryAfterCap = 1 // the queue's cap, so that the event is due again at once
			q := newFake(p)
			q.enqueue("a", 2)
			h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
				if e.Seq == 1 && e.Attempt == 1 {
					return relay.FailDestination(relay.ReasonRateLimited, errors.New("429 Too Many Requests")).WithRetryAfter(tt.retryAfter)
				}
				return nil
			})
			var logs logBuffer
			run := start(t, q, h, relay.Options{Concurrency: 1, Logger: logs.logger(),
				Breaker: relay.BreakerOptions{Threshold: 1, MinProbe: tt.maxProbe, MaxProbe: tt.maxProbe}})
			q.waitFor(t, "all acked", allAcked(q))
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
			if b := run.r.Breaker(); b.Opens != 1 || b.Probes != 1 || b.State != relay.BreakerClosed {
				t.Errorf("Breaker() = %+v, want opened once, one probe, closed", b)
			}
			if got := logs.lines("breaker open", "next_probe="+tt.wantProbe.String()); len(got) != 1 {
				t.Errorf("breaker-open lines with next_probe=%v: %q", tt.wantProbe, logs.lines("breaker open"))
			}
			first := q.settles[0][0]
			if first.Result.RetryAfter != clock.Tick(tt.retryAfter.Milliseconds()) || first.Result.Reason != relay.ReasonRateLimited {
				t.Errorf("first settle %+v, want rate_limited with RetryAfter %d ticks", first, tt.retryAfter.Milliseconds())
			}
		})
	}
}

// TestBreakerOneFlowOpens: with one flow only, its consecutive destination
// failures open the breaker (two flows cannot be asked for).
func TestBreakerOneFlowOpens(t *testing.T) {
	q := newFake(fastRetries(20))
	q.enqueue("only", 1)
	var calls atomic.Int32
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		if calls.Add(1) <= 4 {
			return relay.FailDestination(relay.ReasonUnavailable, errors.New("503"))
		}
		return nil
	})
	run := start(t, q, h, relay.Options{Breaker: relay.BreakerOptions{Threshold: 3, MinProbe: time.Millisecond, MaxProbe: time.Millisecond}})
	q.waitFor(t, "acked", allAcked(q))
	if b := run.r.Breaker(); b.Opens != 1 || b.Probes != 2 {
		t.Errorf("Breaker() = %+v, want one opening and two probes (the 4th and 5th attempts)", b)
	}
}

// TestBreakerNeedsTwoFlows: destination failures of one flow while another
// flow's claim is still running do not open the breaker: the other flow
// may well be delivered.
func TestBreakerNeedsTwoFlows(t *testing.T) {
	q := newFake(fastRetries(6))
	q.enqueue("a", 1)
	q.enqueue("b", 1)
	release := make(chan struct{})
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		if e.Flow == "b" {
			<-release
			return nil
		}
		return relay.FailDestination(relay.ReasonUnavailable, errors.New("timeout"))
	})
	run := start(t, q, h, relay.Options{Concurrency: 2, Breaker: relay.BreakerOptions{Threshold: 2, MinProbe: time.Hour, MaxProbe: time.Hour}})
	q.waitFor(t, "a quarantined", func() bool { return q.byID["a/1"].state == "quarantined" })
	close(release)
	q.waitFor(t, "b acked", func() bool { return q.byID["b/1"].state == "acked" })
	if b := run.r.Breaker(); b.Opens != 0 {
		t.Errorf("Breaker() = %+v, want never opened", b)
	}
}

// TestBreakerDefaults: the zero options are Threshold 5, probes from 1 s
// to 1 min; a MaxProbe below the default MinProbe lowers MinProbe to it.
func TestBreakerDefaults(t *testing.T) {
	h := relay.HandlerFunc(func(context.Context, relay.Event) error {
		return relay.FailDestination(relay.ReasonUnavailable, errors.New("refused"))
	})
	for _, tt := range []struct {
		o         relay.BreakerOptions
		threshold int
		probe     time.Duration
	}{
		{relay.BreakerOptions{}, 5, time.Second},
		{relay.BreakerOptions{Threshold: 1, MaxProbe: 300 * time.Millisecond}, 1, 300 * time.Millisecond},
	} {
		q := newFake(fastRetries(20))
		q.enqueue("a", 1)
		var logs logBuffer
		run := start(t, q, h, relay.Options{Breaker: tt.o, Logger: logs.logger()})
		q.waitFor(t, "open", func() bool { return run.r.Breaker().State == relay.BreakerOpen })
		if err := run.stop(t); err != nil {
			t.Fatal(err)
		}
		if b := run.r.Breaker(); b.ConsecutiveFailures != tt.threshold {
			t.Errorf("%+v: opened after %d failures, want %d", tt.o, b.ConsecutiveFailures, tt.threshold)
		}
		if len(logs.lines("breaker open", "next_probe="+tt.probe.String())) != 1 {
			t.Errorf("%+v: want the first probe after %v: %q", tt.o, tt.probe, logs.lines("breaker open"))
		}
	}
}

// TestBreakerOpenShutsDown: a relay waiting for a probe an hour away
// still returns at once when its context ends.
func TestBreakerOpenShutsDown(t *testing.T) {
	q := newFake(fastRetries(20))
	q.enqueue("a", 1)
	h := relay.HandlerFunc(func(context.Context, relay.Event) error {
		return relay.FailDestination(relay.ReasonUnavailable, errors.New("refused"))
	})
	run := start(t, q, h, relay.Options{Breaker: relay.BreakerOptions{Threshold: 1, MinProbe: time.Hour}})
	q.waitFor(t, "open", func() bool { return run.r.Breaker().State == relay.BreakerOpen })
	if err := run.stop(t); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if tot := run.r.Totals(); tot.Claimed != 1 || tot.Retried != 1 || tot.InFlight != 0 {
		t.Errorf("Totals() = %+v, want one claim, retried", tot)
	}
}

// TestBreakerOnlyTheProbeCloses: a delivery that began before the breaker
// opened and succeeds after it says nothing of the destination now: the
// breaker stays open (closing on it would let a whole wave of claims meet a
// destination that is still down, and open the breaker again).
func TestBreakerOnlyTheProbeCloses(t *testing.T) {
	q := newFake(fastRetries(50))
	q.enqueue("a-slow", 1)
	for i := range 5 {
		q.enqueue(fmt.Sprintf("f%02d", i), 1)
	}
	release := make(chan struct{})
	h := relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		if e.Flow == "a-slow" {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return relay.FailDestination(relay.ReasonUnavailable, errors.New("connection refused"))
	})
	run := start(t, q, h, relay.Options{Concurrency: 4, Batch: 4,
		Breaker: relay.BreakerOptions{Threshold: 3, MinProbe: time.Hour, MaxProbe: time.Hour}})
	q.waitFor(t, "the breaker open", func() bool { return run.r.Breaker().State == relay.BreakerOpen })
	close(release)
	q.waitFor(t, "the slow delivery acked", func() bool { return q.head("a-slow") == nil })
	if b := run.r.Breaker(); b.State != relay.BreakerOpen || b.Opens != 1 {
		t.Errorf("Breaker() = %+v after a delivery begun before the opening succeeded; want still open", b)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestBreakerProbesCountClaims: Probes and fairrelay_breaker_probes_total
// count the probes that claimed an event, the attempts charged while the
// breaker is open: a probe time at which nothing is due (the only event
// waits for its backoff) claims nothing, charges nothing and is not
// counted; the probe that claims the event is, and its success closes the
// breaker.
func TestBreakerProbesCountClaims(t *testing.T) {
	p := testPolicy(600, 5)
	p.Jitter = false // the retry waits Backoff(1) ticks, never 0
	q := newFake(p)
	q.enqueue("a", 1)
	var down atomic.Bool
	down.Store(true)
	h := relay.HandlerFunc(func(context.Context, relay.Event) error {
		if down.Load() {
			return relay.FailDestination(relay.ReasonUnavailable, errors.New("connection refused"))
		}
		return nil
	})
	clk := relay.NewManualClock(0)
	reg := prometheus.NewRegistry()
	run := start(t, q, h, relay.Options{Clock: clk, Poll: time.Hour, Metrics: reg,
		Breaker: relay.BreakerOptions{Threshold: 1, MinProbe: time.Millisecond, MaxProbe: time.Millisecond}})
	q.waitFor(t, "a/1 retry scheduled and three probes that found nothing due", func() bool {
		return q.byID["a/1"].state == "pending" && len(q.claimNs) >= 1+3
	})
	if b := run.r.Breaker(); b.State == relay.BreakerClosed || b.Probes != 0 {
		t.Fatalf("Breaker() = %+v after probes that claimed nothing, want open with 0 probes", b)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_breaker_probes_total", "")); got != 0 {
		t.Fatalf("fairrelay_breaker_probes_total = %v after probes that claimed nothing, want 0", got)
	}
	down.Store(false)
	clk.Advance(p.Backoff(1))
	q.waitFor(t, "a/1 acked by a probe", func() bool { return q.byID["a/1"].state == "acked" })
	if b := run.r.Breaker(); b.State != relay.BreakerClosed || b.Probes != 1 || b.Opens != 1 {
		t.Errorf("Breaker() = %+v, want closed after 1 opening and 1 probe", b)
	}
	if got := testutil.ToFloat64(counter(t, reg, "fairrelay_breaker_probes_total", "")); got != 1 {
		t.Errorf("fairrelay_breaker_probes_total = %v, want 1", got)
	}
	q.get(func() {
		if len(q.claimed) != 2 {
			t.Errorf("claimed %v, want a/1 twice: its first attempt and the probe", q.claimed)
		}
	})
}
