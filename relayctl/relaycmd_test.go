package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/inbox"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// lockedBuffer is an io.Writer safe for the command's goroutines and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An interrupted relay (its context ends, as on SIGINT or SIGTERM) stops
// claiming, lets the deliveries in flight finish, settles them and exits 0.
// Meanwhile it drew its live line (the test pretends stderr is a terminal)
// and served its metrics on --metrics.
func TestRelay_InterruptedSettlesWhatIsInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueBatch(ctx, []queuestore.Event{
		{ID: "a-1", Flow: "a", Body: []byte(`{"delta": 1}`)},
		{ID: "a-2", Flow: "a", Body: []byte(`{"delta": 2}`)},
		{ID: "b-1", Flow: "b", Body: []byte(`{"delta": 4}`)},
	}, 0); err != nil {
		t.Fatal(err)
	}
	q.Close()

	store, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// The receiver holds every request until the test lets it go.
	arrived := make(chan string, 10)
	release := make(chan struct{})
	srv := inbox.NewServer(store, []byte("k"), inbox.ServerOptions{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("webhook-id")
		<-release
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdout, stderr lockedBuffer
	e := newEnv(strings.NewReader(""), &stdout, &stderr)
	e.ctx, e.dir = rctx, dir
	e.isTerminal = func(io.Writer) bool { return true }
	done := make(chan int, 1)
	go func() {
		done <- e.main([]string{"relay", "--to", ts.URL, "--secret", "k", "--metrics", "127.0.0.1:0", "--concurrency", "4"})
	}()

	// a-1 and b-1 (the two heads) are in flight; a-2 waits behind a-1.
	got := map[string]bool{<-arrived: true, <-arrived: true}
	if !got["a-1"] || !got["b-1"] {
		t.Fatalf("requests in flight = %v, want a-1 and b-1", got)
	}
	// The live line and the metrics, while they are in flight.
	for !strings.Contains(stderr.String(), "in flight 2") {
		select {
		case code := <-done:
			t.Fatalf("relay exited %d early:\n%s", code, stderr.String())
		case <-time.After(10 * time.Millisecond): // poll the output
		}
	}
	if line := stderr.String(); !strings.Contains(line, "0 delivered") || !strings.Contains(line, "backlog 3") || !strings.Contains(line, "quarantined 0") {
		t.Errorf("live line = %q, want delivered, backlog 3, in flight 2, quarantined 0", line)
	}
	metricsURL := ""
	for _, l := range strings.Split(stderr.String(), "\n") {
		if i := strings.Index(l, "msg=metrics url="); i >= 0 {
			metricsURL = strings.Fields(l[i+len("msg=metrics url="):])[0]
		}
	}
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatalf("GET %q: %v", metricsURL, err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), "fairrelay_") || !strings.Contains(string(m), "go_goroutines") {
		t.Errorf("relay metrics lack fairrelay_ and go_ series:\n%.500s", m)
	}

	// /status on the same listener, and 'relayctl status --relay ADDR'
	// reading it: the breaker closed, two claims in flight.
	addr := strings.TrimSuffix(strings.TrimPrefix(metricsURL, "http://"), "/metrics")
	var sout, serr lockedBuffer
	se := newEnv(strings.NewReader(""), &sout, &serr)
	if code := se.main([]string{"status", "--relay", addr, "--json"}); code != exitOK {
		t.Fatalf("status --relay: exit %d\n%s", code, serr.String())
	}
	var rep relayStatusReport
	if err := json.Unmarshal([]byte(sout.String()), &rep); err != nil {
		t.Fatalf("status --relay --json: %v\n%s", err, sout.String())
	}
	if rep.Relay.Breaker.State != "closed" || rep.Relay.Totals.Claimed != 2 || rep.Relay.Totals.InFlight != 2 ||
		rep.Relay.To != ts.URL || rep.Relay.Queue != "queue.db" {
		t.Errorf("status --relay --json = %+v, want breaker closed, 2 claimed and in flight, to %s", rep.Relay, ts.URL)
	}
	sout = lockedBuffer{}
	if code := se.main([]string{"status", "--relay", metricsURL}); code != exitOK {
		t.Fatalf("status --relay URL: exit %d\n%s", code, serr.String())
	}
	for _, want := range []string{"RELAY ", "breaker ", "closed", "in flight ", "attempts "} {
		if !strings.Contains(sout.String(), want) {
			t.Errorf("status --relay lacks %q:\n%s", want, sout.String())
		}
	}
	if resp, err := http.Post(strings.TrimSuffix(metricsURL, "/metrics")+"/status", "application/json", nil); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /status = %d, want 405 (GET only)", resp.StatusCode)
	}

	cancel() // SIGINT
	close(release)
	if code := <-done; code != exitOK {
		t.Fatalf("exit status = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if out := stdout.String(); !strings.HasPrefix(out, "relay stopped (interrupted): 2 delivered, 0 retried, 0 quarantined, 0 leases lost, 0 settle errors (2 attempts) in ") {
		t.Errorf("stdout = %q", out)
	}

	q, err = queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for id, want := range map[string]string{"a-1": "acked", "b-1": "acked", "a-2": "pending"} {
		ev, err := q.Event(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.State != want {
			b, _ := json.Marshal(ev)
			t.Errorf("%s after the shutdown: %s, want %s", id, b, want)
		}
	}
	if tot, err := store.Total(ctx, "b"); err != nil || tot != 4 {
		t.Errorf("Total(b) = %d, %v; want 4", tot, err)
	}
}

// The default schedule rides out several hours of transient failures of
// one event, and --schedule's default shows it the way it is given.
func TestDefaultSchedule(t *testing.T) {
	t.Parallel()
	var sum time.Duration
	for _, w := range defaultSchedule {
		sum += w
	}
	if sum < 4*time.Hour {
		t.Errorf("default schedule waits %s in all, want at least 4h", sum)
	}
	args := defaultScheduleArgs()
	if got := (scheduleValue{&args}).String(); got != "1s,5s,30s,2m,10m,30m,1h,2h,4h" {
		t.Errorf("--schedule default = %q", got)
	}
}

// The status URL of a relay is found from host:port or the logged metrics
// URL.
func TestRelayStatusURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"127.0.0.1:9100":                 "http://127.0.0.1:9100/status",
		"http://127.0.0.1:9100/metrics":  "http://127.0.0.1:9100/status",
		"http://127.0.0.1:9100/":         "http://127.0.0.1:9100/status",
		"https://relay.example/status":   "https://relay.example/status",
		"http://127.0.0.1:9100/metrics/": "http://127.0.0.1:9100/status",
	} {
		if got := relayStatusURL(in); got != want {
			t.Errorf("relayStatusURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// status --relay on an address with no relay is exit 1 and says what to
// check; an empty --relay is a usage error.
func TestStatusRelay_Unreachable(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.NotFoundHandler())
	defer ts.Close()
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"status", "--relay", ""}, exitUsage, "--relay is empty"},
		{[]string{"status", "--relay", ts.URL}, exitFail, "404 Not Found (a relay older than /status, or not a relay)"},
		{[]string{"status", "--relay", "http://u:secretpw@127.0.0.1:1"}, exitFail, "is 'relayctl relay --metrics http://REDACTED@127.0.0.1:1' running?"},
	} {
		var out, errb lockedBuffer
		e := newEnv(strings.NewReader(""), &out, &errb)
		if code := e.main(c.args); code != c.code || !strings.Contains(errb.String(), c.msg) || strings.Contains(errb.String(), "secretpw") {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.msg)
		}
	}
}

// A rotation: the relay signs with every --secret, so a receiver that knows
// only the old one accepts each delivery; --exit-when-idle then exits 0
// with a summary that adds up. (Signed with the new secret alone, every
// delivery would be refused 401 and retried: the run would end by the
// context's deadline, interrupted, and the summary check fails.)
func TestRelay_SignsWithEverySecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueBatch(ctx, []queuestore.Event{
		{ID: "a-1", Flow: "a", Body: []byte(`{"delta": 1}`)},
		{ID: "b-1", Flow: "b", Body: []byte(`{"delta": 2}`)},
	}, 0); err != nil {
		t.Fatal(err)
	}
	q.Close()
	store, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ts := httptest.NewServer(inbox.NewServer(store, []byte("old-secret"), inbox.ServerOptions{}))
	defer ts.Close()

	var stdout, stderr lockedBuffer
	e := newEnv(strings.NewReader(""), &stdout, &stderr)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a bound, not a timing: see above
	defer cancel()
	e.dir, e.ctx = dir, rctx
	if code := e.main([]string{"relay", "--to", ts.URL, "--secret", "new-secret", "--secret", "old-secret", "--exit-when-idle"}); code != exitOK {
		t.Fatalf("exit %d, want 0\n%s", code, stderr.String())
	}
	if out := stdout.String(); !strings.HasPrefix(out, "relay stopped (idle): 2 delivered, 0 retried, 0 quarantined, 0 leases lost, 0 settle errors (2 attempts) in ") {
		t.Errorf("stdout = %q", out)
	}
	for flow, want := range map[string]int64{"a": 1, "b": 2} {
		if got, err := store.Total(ctx, flow); err != nil || got != want {
			t.Errorf("Total(%s) = %d, %v; want %d", flow, got, err, want)
		}
	}
}
