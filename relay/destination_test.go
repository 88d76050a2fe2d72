package relay_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/relay"
	"github.com/fairrelay/fairrelay/webhook"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// destServer is a receiver on loopback for one destination: it records
// the event IDs it applied (checking the signature against its secret) and
// the most requests it held open at once. sending and maxSending are the
// relay's side of the same count, kept by a sendCounter.
type destServer struct {
	srv        *httptest.Server
	secret     string
	answer     func(w http.ResponseWriter, r *http.Request) bool // true: applied
	mu         sync.Mutex
	got        map[string]int
	open       atomic.Int64
	maxOpen    atomic.Int64
	sending    atomic.Int64
	maxSending atomic.Int64
	badSigns   atomic.Int64
}

// raise sets peak to n if n is more.
func raise(peak *atomic.Int64, n int64) {
	for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
	}
}

// sendCounter is the relay's HTTP transport in a test: it counts, per
// destination server, the requests the relay has open, from sending until
// it closed the answer's body or gave up. That is what a destination's
// handler slots bound. The server's own count (destServer.open) lags behind
// a request the relay abandoned at its timeout: the server learns of it
// only when it reads the closed connection, and may meet the relay's next
// request first.
type sendCounter struct {
	base   http.RoundTripper
	byHost map[string]*destServer // r.URL.Host → its server
}

// newSendCounter is a client for HTTPOptions.Client that counts the
// requests to servers (none of which redirects) on a transport of its own.
func newSendCounter(servers map[string]*destServer) *http.Client {
	sc := &sendCounter{base: http.DefaultTransport.(*http.Transport).Clone(), byHost: map[string]*destServer{}}
	for _, s := range servers {
		sc.byHost[s.srv.Listener.Addr().String()] = s
	}
	return &http.Client{Transport: sc}
}

// RoundTrip counts r open until its answer's body is closed, or until it
// failed.
func (sc *sendCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	s := sc.byHost[r.URL.Host]
	if s == nil {
		return sc.base.RoundTrip(r)
	}
	raise(&s.maxSending, s.sending.Add(1))
	resp, err := sc.base.RoundTrip(r)
	if err != nil {
		s.sending.Add(-1)
		return nil, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, done: func() { s.sending.Add(-1) }}
	return resp, nil
}

// countedBody calls done once, at its first Close.
type countedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

// Close closes the body and ends its request's count.
func (b *countedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

func newDestServer(t *testing.T, secret string, answer func(w http.ResponseWriter, r *http.Request) bool) *destServer {
	t.Helper()
	d := &destServer{secret: secret, answer: answer, got: map[string]int{}}
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raise(&d.maxOpen, d.open.Add(1))
		defer d.open.Add(-1)
		body, _ := readAll(r)
		if err := webhook.Verify(key, r.Header, body, time.Now(), time.Minute); err != nil {
			d.badSigns.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if d.answer(w, r) {
			d.mu.Lock()
			d.got[r.Header.Get("webhook-id")]++
			d.mu.Unlock()
		}
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func readAll(r *http.Request) ([]byte, error) {
	var b strings.Builder
	_, err := bufio.NewReader(r.Body).WriteTo(&b)
	return []byte(b.String()), err
}

func ok200(w http.ResponseWriter, _ *http.Request) bool {
	w.Write([]byte(`{"outcome":"accepted"}`))
	return true
}

// scrape reads the relay's metrics over HTTP, as Prometheus would, and
// returns the value of every sample line by its name and labels as
// written (name{label="v"}).
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestDestinationsSlowOrDeadNeverHoldUpTheRest is the proof of
// docs/contract.md §7.11 over real HTTP on loopback: ten destinations, one
// blackholed (it accepts and never answers; the relay's timeout applies),
// one answering in 2 s, one answering 503, seven healthy. The healthy seven
// drain while the blackhole holds no more than its share of the handler
// slots; nothing is quarantined; once the blackhole answers again its
// flows drain by themselves; the bad destinations' flows are charged no
// more than §7.8 allows (the failures before the breaker opened, those in
// flight then, and the probes); the metrics say so per destination.
func TestDestinationsSlowOrDeadNeverHoldUpTheRest(t *testing.T) {
	p := testPolicy(10000, 50)
	p.BackoffBase, p.BackoffCap = 5, 20
	q := newFakeDest(p)

	release := make(chan struct{})
	servers := map[string]*destServer{}
	healthy := []string{"h1", "h2", "h3", "h4", "h5", "h6", "h7"}
	for i, name := range healthy {
		servers[name] = newDestServer(t, fmt.Sprintf("secret-%d", i), ok200)
	}
	servers["blackhole"] = newDestServer(t, "whsec_"+"YmxhY2tob2xlLWtleQ==", func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
			return ok200(w, r)
		case <-r.Context().Done(): // the relay gave up (its timeout)
			return false
		}
	})
	servers["slow"] = newDestServer(t, "slow-secret", func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-time.After(2 * time.Second):
			return ok200(w, r)
		case <-r.Context().Done():
			return false
		}
	})
	servers["down503"] = newDestServer(t, "down-secret", func(w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return false
	})
	for name, s := range servers {
		q.register(queue.Destination{Name: name, URL: s.srv.URL + "/events", Secrets: []string{s.secret}})
	}
	counts := map[string][2]int{"blackhole": {8, 2}, "slow": {4, 1}, "down503": {4, 2}}
	for _, name := range healthy {
		counts[name] = [2]int{5, 4}
	}
	for name, c := range counts {
		for i := range c[0] {
			q.enqueueTo(fmt.Sprintf("%s-f%d", name, i), name, c[1])
		}
	}

	def := newDestServer(t, "default-secret", ok200)
	defHTTP, err := relay.NewHTTP(def.srv.URL, []byte("default-secret"), relay.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	router, err := relay.NewDestinations(q, defHTTP, relay.DestinationsOptions{HTTP: relay.HTTPOptions{Timeout: 3 * time.Second, Client: newSendCounter(servers)}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	const conc, slots, threshold = 16, 4, 2
	r, err := relay.New(q, router, relay.Options{Concurrency: conc, DestinationSlots: slots, Clock: clock.Wall{}, Metrics: reg, Poll: 50 * time.Millisecond,
		Breaker: relay.BreakerOptions{Threshold: threshold, MinProbe: 50 * time.Millisecond, MaxProbe: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			cancel()
			if err := <-runErr; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	defer stop()

	acked := func(dest string) bool {
		for flow, d := range q.dest {
			if d != dest {
				continue
			}
			for _, e := range q.flows[flow] {
				if e.state != "acked" {
					return false
				}
			}
		}
		return true
	}
	noQuarantine := func() {
		t.Helper()
		q.get(func() {
			for id, e := range q.byID {
				if e.state == "quarantined" {
					t.Errorf("event %s quarantined (%s)", id, e.reason)
				}
			}
		})
	}
	q.waitFor(t, "the healthy seven and the slow one drained", func() bool {
		for _, name := range append([]string{"slow"}, healthy...) {
			if !acked(name) {
				return false
			}
		}
		return true
	})
	q.waitFor(t, "the blackhole's breaker open", func() bool { return r.DestinationBreakers()["blackhole"].Opens > 0 })
	noQuarantine()
	// The relay's count, not the server's: a request abandoned at the
	// timeout ends for the relay before the server sees it end.
	if n := servers["blackhole"].maxSending.Load(); n < 1 || n > slots {
		t.Errorf("the relay had %d requests to the blackhole open at once, want 1..%d (its slots)", n, slots)
	}
	if n := servers["slow"].maxSending.Load(); n > slots {
		t.Errorf("the relay had %d requests to the slow destination open at once, want at most %d", n, slots)
	}
	close(release) // the blackhole answers again
	q.waitFor(t, "the blackhole drained by itself", func() bool { return acked("blackhole") })
	noQuarantine()
	q.get(func() {
		if acked("down503") {
			t.Error("the 503 destination's events were acked")
		}
	})

	// The relay counts a delivery after the store settled it: stop it so
	// that every settle seen above is counted before the scrape.
	stop()
	m := scrape(t, reg)
	brs := r.DestinationBreakers()
	for _, name := range []string{"blackhole", "down503"} {
		// §7.8: while open, only probes are charged; before it opened, at
		// most threshold failures, plus what was in flight then (at most
		// the destination's share of the slots, less the one that opened it).
		fails := m[`fairrelay_destination_failures_total{destination="`+name+`"}`]
		limit := float64(threshold + slots - 1 + int(brs[name].Probes))
		if fails < threshold || fails > limit {
			t.Errorf("%s: %v failures charged, want %d..%v (probes %d)", name, fails, threshold, limit, brs[name].Probes)
		}
	}
	if st := brs["down503"].State; st == relay.BreakerClosed {
		t.Errorf("the 503 destination's breaker is %s", st)
	}
	// DestinationStatus: the same breakers, and the counts the metrics
	// count (h1 is drained, so its counts no longer move).
	sts := r.DestinationStatus()
	byName := map[string]relay.DestinationStatus{}
	for i, st := range sts {
		if i > 0 && sts[i-1].Name >= st.Name {
			t.Errorf("DestinationStatus not sorted by name: %q before %q", sts[i-1].Name, st.Name)
		}
		byName[st.Name] = st
	}
	if st, ok := byName[""]; !ok || st.Label != relay.DefaultDestinationLabel {
		t.Errorf("DestinationStatus default destination = %+v (present %v)", st, ok)
	}
	if st := byName["h1"]; st.Delivered == 0 || float64(st.Delivered) != m[`fairrelay_destination_delivered_total{destination="h1"}`] || st.Failed != 0 || st.Breaker.State != relay.BreakerClosed {
		t.Errorf("DestinationStatus h1 = %+v, want its delivered as the metric's %v, no failure, closed", st, m[`fairrelay_destination_delivered_total{destination="h1"}`])
	}
	if st := byName["down503"]; st.Breaker.State == relay.BreakerClosed || st.Failed < threshold || st.Delivered != 0 {
		t.Errorf("DestinationStatus down503 = %+v, want not closed, at least %d failed, none delivered", st, threshold)
	}
	if v := m[`fairrelay_breaker_open{destination="down503"}`]; v != 1 {
		t.Errorf("fairrelay_breaker_open{down503} = %v, want 1", v)
	}
	if v, ok := m[`fairrelay_breaker_open{destination="h1"}`]; !ok || v != 0 {
		t.Errorf("fairrelay_breaker_open{h1} = %v (present %v), want 0", v, ok)
	}
	if v, ok := m[`fairrelay_breaker_open{destination="`+relay.DefaultDestinationLabel+`"}`]; !ok || v != 0 {
		t.Errorf("fairrelay_breaker_open{default} = %v (present %v), want 0", v, ok)
	}
	if v := m[`fairrelay_breaker_state`]; v != 0 {
		t.Errorf("the default destination's fairrelay_breaker_state = %v, want 0", v)
	}
	for _, name := range healthy {
		if v := m[`fairrelay_destination_delivered_total{destination="`+name+`"}`]; v != 20 {
			t.Errorf("delivered to %s: %v, want 20", name, v)
		}
		if v := m[`fairrelay_destination_failures_total{destination="`+name+`"}`]; v != 0 {
			t.Errorf("failures of %s: %v, want 0", name, v)
		}
		s := servers[name]
		s.mu.Lock()
		if len(s.got) != 20 {
			t.Errorf("%s received %d events, want 20", name, len(s.got))
		}
		s.mu.Unlock()
	}
	for _, name := range []string{"h1", "blackhole", "slow", "down503", relay.DefaultDestinationLabel} {
		if _, ok := m[`fairrelay_destination_inflight{destination="`+name+`"}`]; !ok {
			t.Errorf("no fairrelay_destination_inflight series for %s", name)
		}
	}
	if v := m[`fairrelay_destination_inflight{destination="h1"}`]; v != 0 {
		t.Errorf("fairrelay_destination_inflight{h1} = %v after its drain, want 0", v)
	}
	if v := m[`fairrelay_destination_delivered_total{destination="blackhole"}`]; v != 16 {
		t.Errorf("delivered to the blackhole: %v, want 16", v)
	}
	for name, s := range servers {
		if n := s.badSigns.Load(); n > 0 {
			t.Errorf("%s: %d requests with a bad signature", name, n)
		}
	}
}

// TestDestinationsSlotsAreEachDestinationsOwn: a destination's handlers
// never take another's slots (docs/contract.md §7.11). Two blackholed
// destinations hold every slot they have (as many as Concurrency, the
// default) for the whole test (the relay's timeout is a minute); the
// healthy one still drains its backlog with up to all of its own. With one
// pool of Concurrency slots shared by all three, the blackholes would hold
// it whole and the healthy one would wait for their timeout.
func TestDestinationsSlotsAreEachDestinationsOwn(t *testing.T) {
	q := newFakeDest(testPolicy(100000, 50))
	release := make(chan struct{})
	defer close(release)
	hold := func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return false
	}
	servers := map[string]*destServer{
		"hole1":   newDestServer(t, "hole1-secret", hold),
		"hole2":   newDestServer(t, "hole2-secret", hold),
		"healthy": newDestServer(t, "healthy-secret", ok200),
	}
	for name, s := range servers {
		q.register(queue.Destination{Name: name, URL: s.srv.URL + "/events", Secrets: []string{s.secret}})
	}
	const conc = 4
	for _, name := range []string{"hole1", "hole2", "healthy"} {
		for i := range 2 * conc {
			q.enqueueTo(fmt.Sprintf("%s-f%d", name, i), name, 3)
		}
	}
	def := newDestServer(t, "default-secret", ok200)
	defHTTP, err := relay.NewHTTP(def.srv.URL, []byte("default-secret"), relay.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	router, err := relay.NewDestinations(q, defHTTP, relay.DestinationsOptions{HTTP: relay.HTTPOptions{Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(q, router, relay.Options{Concurrency: conc, Clock: clock.Wall{}, Poll: 50 * time.Millisecond, ShutdownGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	defer func() {
		cancel()
		<-runErr // abandoned handlers of the blackholes: not this test's point
	}()
	// The blackholes' requests reach their servers in their own time: wait
	// for them too, then check that none held more than its slots.
	q.waitFor(t, "the healthy destination drained beside two full blackholes", func() bool {
		if servers["hole1"].maxOpen.Load() < conc || servers["hole2"].maxOpen.Load() < conc {
			return false
		}
		for flow, d := range q.dest {
			if d != "healthy" {
				continue
			}
			for _, e := range q.flows[flow] {
				if e.state != "acked" {
					return false
				}
			}
		}
		return true
	})
	for _, name := range []string{"hole1", "hole2"} {
		if n := servers[name].maxOpen.Load(); n != conc {
			t.Errorf("%s held %d requests at once, want all of its %d slots", name, n, conc)
		}
	}
	if n := servers["healthy"].maxOpen.Load(); n < 1 || n > conc {
		t.Errorf("healthy held %d requests at once, want 1..%d", n, conc)
	}
}

// TestDestinationsAbandonedHandlersEnd: with destinations, more handlers
// run than Concurrency (each destination has DestinationSlots). When Run
// returns ErrAbandoned with all of them still running, each one that
// returns later ends its goroutine: none waits for a loop that is gone.
func TestDestinationsAbandonedHandlersEnd(t *testing.T) {
	q := newFakeDest(testPolicy(100000, 50))
	q.register(queue.Destination{Name: "a", URL: "http://127.0.0.1:1/events", Secrets: []string{"a-secret"}})
	for i := range 2 {
		q.enqueue(fmt.Sprintf("d%d", i), 1)
		q.enqueueTo(fmt.Sprintf("a%d", i), "a", 1)
	}
	release := make(chan struct{})
	var running atomic.Int32
	h := relay.HandlerFunc(func(context.Context, relay.Event) error {
		running.Add(1)
		<-release // ignores its context
		return nil
	})
	r, err := relay.New(q, h, relay.Options{Concurrency: 2, DestinationSlots: 2, Clock: clock.Wall{}, Poll: 50 * time.Millisecond,
		ShutdownGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	q.waitFor(t, "four handlers running", func() bool { return running.Load() == 4 })
	cancel()
	if err := <-runErr; !errors.Is(err, relay.ErrAbandoned) {
		t.Fatalf("Run() = %v, want ErrAbandoned", err)
	}
	close(release)
	for deadline := time.Now().Add(10 * time.Second); ; {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		n := strings.Count(stacks, "relay.(*loop).start.func")
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d handler goroutines still blocked after Run returned:\n%s", n, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDestinationsRouting: the router signs with every secret of a
// rotation (whsec_ and raw), reads a destination registered after it
// started when an event names it, and fails an event of a destination
// never registered with a transient destination failure, never a
// permanent one.
func TestDestinationsRouting(t *testing.T) {
	q := newFakeDest(testPolicy(1000, 5))
	oldKey, newKey := "old-raw-secret", "whsec_bmV3LWtleS1ieXRlcw=="
	var gotOld, gotNew atomic.Int64
	kOld, _ := webhook.ParseSecret(oldKey)
	kNew, _ := webhook.ParseSecret(newKey)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := readAll(r)
		if webhook.Verify(kOld, r.Header, body, time.Now(), time.Minute) == nil {
			gotOld.Add(1)
		}
		if webhook.Verify(kNew, r.Header, body, time.Now(), time.Minute) == nil {
			gotNew.Add(1)
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	def, err := relay.NewHTTP(srv.URL, []byte("default"), relay.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	router, err := relay.NewDestinations(q, def, relay.DestinationsOptions{Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := router.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Registered after the router's read: the event makes it read again.
	q.register(queue.Destination{Name: "late", URL: srv.URL, Secrets: []string{oldKey, newKey}})
	ev := relay.Event{ID: "e1", Flow: "f", Seq: 1, Body: []byte(`{}`), Attempt: 1, Destination: "late"}
	if err := router.Handle(context.Background(), ev); err != nil {
		t.Fatalf("late destination: %v", err)
	}
	if gotOld.Load() != 1 || gotNew.Load() != 1 {
		t.Errorf("signatures: old %d, new %d, want 1 and 1", gotOld.Load(), gotNew.Load())
	}
	if got := router.Known(); len(got) != 1 || got[0] != "late" {
		t.Errorf("Known = %v", got)
	}
	before := q.calls["destinations"]
	ev.Destination = "ghost"
	err = router.Handle(context.Background(), ev)
	var f *relay.Failure
	if !errors.As(err, &f) || f.Reason != relay.ReasonUnknownDestination || !f.Destination || f.Permanent || f.RetryAfter != time.Hour {
		t.Fatalf("unknown destination: %#v", err)
	}
	if q.calls["destinations"] != before+1 {
		t.Errorf("an unknown destination read the destinations %d times, want 1", q.calls["destinations"]-before)
	}
	// A read that fails keeps what was read: the known one still delivers.
	q.fail["destinations"] = errors.New("database away")
	ev.Destination = "late"
	if err := router.Handle(context.Background(), ev); err != nil {
		t.Errorf("known destination while the store is away: %v", err)
	}
	ev.Destination = "ghost2"
	if err := router.Handle(context.Background(), ev); !errors.As(err, &f) || f.Reason != relay.ReasonUnknownDestination || !strings.Contains(err.Error(), "database away") {
		t.Errorf("unknown destination while the store is away: %v", err)
	}
	if _, err := relay.NewDestinations(q, nil, relay.DestinationsOptions{}); !errors.Is(err, relay.ErrInvalid) {
		t.Errorf("nil default: %v", err)
	}
}

// TestDestinationsReadOffTheFlows: the relay's loop and the router read
// the registered destinations (RegisteredDestinations: the destinations
// table alone), never Destinations, whose counts read every flow of each
// destination (docs/contract.md §7.11), however often they refresh; only
// RunUntilIdle's end reads the counts, once, for the paused backlog.
func TestDestinationsReadOffTheFlows(t *testing.T) {
	q := newFakeDest(testPolicy(10000, 5))
	dest := newDestServer(t, "dest-secret", ok200)
	q.register(queue.Destination{Name: "x", URL: dest.srv.URL, Secrets: []string{"dest-secret"}})
	for i := range 4 {
		q.enqueueTo(fmt.Sprintf("f%d", i), "x", 5)
	}
	def := newDestServer(t, "default-secret", ok200)
	defHTTP, err := relay.NewHTTP(def.srv.URL, []byte("default-secret"), relay.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	router, err := relay.NewDestinations(q, defHTTP, relay.DestinationsOptions{Refresh: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(q, router, relay.Options{Concurrency: 2, Clock: clock.Wall{}, Poll: 10 * time.Millisecond, DestinationRefresh: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.RunUntilIdle(ctx); err != nil {
		t.Fatalf("RunUntilIdle: %v", err)
	}
	var lists, counts int
	q.get(func() { lists, counts = q.calls["destinations"], q.calls["destination counts"] })
	dest.mu.Lock()
	got := len(dest.got)
	dest.mu.Unlock()
	if got != 20 {
		t.Fatalf("x received %d events, want 20", got)
	}
	if lists < 2 || counts != 1 {
		t.Fatalf("RegisteredDestinations read %d times, Destinations %d; want at least 2 and exactly 1 (RunUntilIdle's end)", lists, counts)
	}
}

// TestDestinationsNoneRegistered: with a DestinationQueue that has no
// destination registered, every claim's filter is empty (the store's claim
// is then exactly the claim of before, docs/contract.md §7.11), and the
// default destination's breaker behaves as the relay's one breaker always
// did: a destination down opens it, only probes are claimed, its answer
// closes it.
func TestDestinationsNoneRegistered(t *testing.T) {
	q := newFakeDest(testPolicy(10000, 50))
	for i := range 6 {
		q.enqueueTo(fmt.Sprintf("f%d", i), "", 5)
	}
	var down atomic.Bool
	down.Store(true)
	h := relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		if e.Destination != "" {
			t.Errorf("event %s for destination %q", e.ID, e.Destination)
		}
		if down.Load() {
			return relay.FailDestination(relay.ReasonUnavailable, errors.New("down"))
		}
		return nil
	})
	r, err := relay.New(q, h, relay.Options{Concurrency: 4, Clock: clock.Wall{},
		Breaker: relay.BreakerOptions{Threshold: 2, MinProbe: 20 * time.Millisecond, MaxProbe: 40 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	q.waitFor(t, "two probes while down", func() bool { return r.Breaker().Probes >= 2 })
	q.get(func() {
		for _, f := range *q.filters {
			if f.Room != nil && (len(f.Room) != 1 || f.Room[""] != 1) { // {"": 1}: the probe
				t.Errorf("a filter with Room %v and no destination registered", f.Room)
			}
			if len(f.Exclude) > 0 && (len(f.Exclude) != 1 || f.Exclude[0] != "") {
				t.Errorf("a filter excluding %v", f.Exclude)
			}
		}
	})
	down.Store(false)
	q.waitFor(t, "everything acked", func() bool {
		for _, e := range q.byID {
			if e.state != "acked" {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	if st := r.Breaker(); st.State != relay.BreakerClosed || st.Opens < 1 {
		t.Errorf("breaker %+v, want closed after at least one opening", st)
	}
	q.get(func() {
		empty := 0
		for _, f := range *q.filters {
			if f.Room == nil && f.Exclude == nil {
				empty++
			}
		}
		if empty == 0 {
			t.Error("no claim with an empty filter")
		}
		failed := 0
		for _, e := range q.byID {
			failed += e.attempts - 1
		}
		// §7.8: before the opening at most Threshold + Concurrency - 1
		// failures, then one per probe (the last probe succeeded).
		if limit := 2 + 4 - 1 + int(r.Breaker().Probes); failed > limit {
			t.Errorf("%d failed attempts charged, want at most %d", failed, limit)
		}
	})
}
