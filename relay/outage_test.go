package relay_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
	"github.com/fairrelay/fairrelay/webhook"
	"github.com/prometheus/client_golang/prometheus"
)

// receiverAt serves a receiver that answers 200 to every delivery on addr
// ("127.0.0.1:0" for any port) and records the event IDs; stop closes it,
// so that connections to addr are refused.
func receiverAt(t *testing.T, addr string, got *sync.Map) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("webhook-id"), true)
		w.Write([]byte(`{"outcome":"accepted"}`))
	})}
	go srv.Serve(ln)
	stop := func() { srv.Close() }
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// TestRealStoreOutageOverHTTP: a real queue file on the wall clock, the
// HTTP handler and a real receiver on loopback that goes away (connection
// refused) and comes back on the same port. The breaker opens, only its
// probes are charged while the receiver is gone, and once it is back the
// relay delivers everything by itself: nothing quarantined although the
// policy allows only 10 attempts, the totals exact.
func TestRealStoreOutageOverHTTP(t *testing.T) {
	p := testPolicy(5000, 10)
	p.BackoffBase, p.BackoffCap = 1, 1
	s := openStore(t, p, queuestore.WithRealTime(clock.Wall{}, 1000))
	var got sync.Map
	addr, stop := receiverAt(t, "127.0.0.1:0", &got)
	stop() // the receiver is down from the start
	h, err := relay.NewHTTP("http://"+addr+"/events", []byte("secret"), relay.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const flows = 30
	for i := range flows {
		enqueue(t, s, fmt.Sprintf("f%02d", i), 2, clock.Wall{}.Now())
	}
	reg := prometheus.NewRegistry()
	var logs logBuffer
	run := start(t, s, h, relay.Options{Concurrency: 4, Batch: 4, Metrics: reg, Logger: logs.logger(),
		Breaker: relay.BreakerOptions{Threshold: 3, MinProbe: 5 * time.Millisecond, MaxProbe: 20 * time.Millisecond}})
	waitStore(t, "the breaker open and 8 probes", func() bool { return run.r.Breaker().Probes >= 8 })
	if v := series(t, reg, "fairrelay_breaker_opens_total"); v != 1 {
		t.Errorf("fairrelay_breaker_opens_total = %v during the outage, want 1", v)
	}
	if v := series(t, reg, "fairrelay_breaker_state"); v == 0 {
		t.Errorf("fairrelay_breaker_state = 0 (closed) during the outage")
	}
	receiverAt(t, addr, &got) // back, on the same port
	waitStore(t, "all acked", func() bool { return stats(t, s).Events.Acked == 2*flows })
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	b, tot := run.r.Breaker(), run.r.Totals()
	if b.State != relay.BreakerClosed || b.Opens != 1 {
		t.Errorf("Breaker() = %+v, want closed after one opening", b)
	}
	if tot.Delivered != 2*flows || tot.Quarantined != 0 || tot.LeasesLost != 0 || tot.InFlight != 0 || tot.Delivered+tot.Retried != tot.Claimed {
		t.Errorf("Totals() = %+v", tot)
	}
	// Charged while the receiver was gone: the failures that opened the
	// breaker (Threshold, a few more when the first came from one flow
	// while others ran, and the handlers still running) and the probes'.
	if tot.Retried > 2*3+4-1+b.Probes {
		t.Errorf("%d failed attempts with %d probes", tot.Retried, b.Probes)
	}
	if st := stats(t, s); st.Quarantined != 0 {
		t.Errorf("%d quarantined", st.Quarantined)
	}
	n := 0
	got.Range(func(any, any) bool { n++; return true })
	if n != 2*flows {
		t.Errorf("the receiver got %d events, want %d", n, 2*flows)
	}
	if len(logs.lines("breaker open")) != 1 || len(logs.lines("breaker closed")) != 1 {
		t.Errorf("want one breaker-open and one breaker-closed line")
	}
}

// TestRealStoreWrongSecretOverHTTP: a receiver that knows another secret
// answers 401 to every delivery; the relay treats it as the destination's
// fault (the breaker opens, only probes are charged) and once the
// receiver is given the right secret everything is delivered by itself.
func TestRealStoreWrongSecretOverHTTP(t *testing.T) {
	p := testPolicy(5000, 10)
	p.BackoffBase, p.BackoffCap = 1, 1
	s := openStore(t, p, queuestore.WithRealTime(clock.Wall{}, 1000))
	var mu sync.Mutex
	secret := []byte("the old secret")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		key := secret
		mu.Unlock()
		if err := webhook.Verify(key, r.Header, body, time.Now(), 5*time.Minute); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"unauthorized"}`))
			return
		}
		w.Write([]byte(`{"outcome":"accepted"}`))
	}))
	defer srv.Close()
	h, err := relay.NewHTTP(srv.URL, []byte("the new secret"), relay.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const flows = 20
	for i := range flows {
		enqueue(t, s, fmt.Sprintf("f%02d", i), 1, clock.Wall{}.Now())
	}
	run := start(t, s, h, relay.Options{Concurrency: 4, Batch: 4,
		Breaker: relay.BreakerOptions{Threshold: 3, MinProbe: 5 * time.Millisecond, MaxProbe: 20 * time.Millisecond}})
	waitStore(t, "the breaker open and 5 probes", func() bool { return run.r.Breaker().Probes >= 5 })
	if b := run.r.Breaker(); b.LastReason != relay.ReasonUnauthorized || b.LastError != "401 Unauthorized: unauthorized" {
		t.Errorf("Breaker() = %+v, want the last failure unauthorized", b)
	}
	mu.Lock()
	secret = []byte("the new secret")
	mu.Unlock()
	waitStore(t, "all acked", func() bool { return stats(t, s).Events.Acked == flows })
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	b, tot := run.r.Breaker(), run.r.Totals()
	if b.State != relay.BreakerClosed || b.Opens != 1 || tot.Quarantined != 0 || tot.Delivered != flows ||
		tot.Retried > 2*3+4-1+b.Probes || tot.Delivered+tot.Retried != tot.Claimed {
		t.Errorf("Breaker() = %+v, Totals() = %+v", b, tot)
	}
}
