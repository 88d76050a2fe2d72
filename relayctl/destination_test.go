package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/inbox"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/webhook"
)

// testReceiver is a receiver served over loopback HTTP with its own secret.
type testReceiver struct {
	url   string
	store *receiverstore.Store
}

func newTestReceiver(t *testing.T, dir, name, secret string) *testReceiver {
	t.Helper()
	return newReceiverBehind(t, dir, name, secret, nil)
}

// newReceiverBehind is newTestReceiver with its inbox server behind wrap
// (when not nil): a receiver that answers late, not at all, or 503.
func newReceiverBehind(t *testing.T, dir, name, secret string, wrap func(http.Handler) http.Handler) *testReceiver {
	t.Helper()
	store, err := receiverstore.Open(filepath.Join(dir, name+".db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = inbox.NewServer(store, key, inbox.ServerOptions{})
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return &testReceiver{url: ts.URL + "/", store: store}
}

// totals is every flow the receiver applied, with its total.
func (r *testReceiver) totals(t *testing.T) map[string]int64 {
	t.Helper()
	fs, err := r.store.Flows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, f := range fs {
		out[f.Flow] = f.Total
	}
	cs, err := r.store.Conflicts(context.Background())
	if err != nil || len(cs) != 0 {
		t.Errorf("receiver conflicts = %+v, %v; want none", cs, err)
	}
	return out
}

func equalTotals(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRelay_EachFlowToItsDestination runs the operator's whole session
// with destinations, on both backends: two destinations registered with
// their secrets from files, flows enqueued to each (--to and a line's
// "to") beside default-destination flows, and one 'relayctl relay --to
// DEFAULT --exit-when-idle' that delivers every event to its own
// receiver, exactly once (each receiver holds only its flows, with exact
// totals, and nothing was retried). Then one destination is paused: the
// other's new events drain and the relay ends idle with the paused one's
// waiting (exit 3, counted on its line; its backlog in 'destinations
// list'); resumed, they drain too.
func TestRelay_EachFlowToItsDestination(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		eachFlowToItsDestination(t, dir, filepath.Join(dir, "queue.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pgtest.Require(t)
		base, schema := pgtest.Schema(t)
		eachFlowToItsDestination(t, t.TempDir(), pgURL(t, base, schema))
	})
}

func eachFlowToItsDestination(t *testing.T, dir, queuePath string) {
	const (
		defSecret   = "default-secret-0001"
		alphaSecret = "alpha-secret-0001"
		betaSecret  = "whsec_YmV0YS1rZXktYnl0ZXMtMDAwMQ==" // Standard Webhooks form
	)
	def := newTestReceiver(t, dir, "default", defSecret)
	alpha := newTestReceiver(t, dir, "alpha", alphaSecret)
	beta := newTestReceiver(t, dir, "beta", betaSecret)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// run runs relayctl in this process until it ends or ctx is done.
	run := func(ctx context.Context, args ...string) (int, string, string) {
		var out, errb lockedBuffer
		e := newEnv(strings.NewReader(""), &out, &errb)
		e.dir, e.ctx = dir, ctx
		code := e.main(append([]string{"--queue", queuePath}, args...))
		return code, out.String(), errb.String()
	}
	ctl := func(want int, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a bound on a hang, not a timing
		defer cancel()
		got, out, errs := run(ctx, args...)
		if got != want {
			t.Fatalf("relayctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, want, out, errs)
		}
		return out
	}
	relayArgs := []string{"relay", "--to", def.url, "--secret", defSecret, "--exit-when-idle", "--concurrency", "4", "--poll", "50ms"}

	ctl(0, "enqueue", "--id", "p1-1", "--flow", "p1", "--body", `{"delta": 1}`)
	ctl(0, "destinations", "add", "alpha", "--url", alpha.url, "--secret-file", write("alpha.secret", alphaSecret+"\n"), "--reason", "alpha receiver")
	ctl(0, "destinations", "add", "beta", "--url", beta.url, "--secret-file", write("beta.secret", betaSecret+"\n"), "--concurrency", "2", "--reason", "beta receiver")
	ctl(0, "enqueue", "--id", "a1-1", "--flow", "a1", "--body", `{"delta": 10}`, "--to", "alpha")
	var lines []string
	want := map[string]map[string]int64{"default": {"p1": 1}, "alpha": {"a1": 10}, "beta": {}}
	for i := range 3 {
		for _, f := range []struct{ flow, to, recv string }{{"a2", "alpha", "alpha"}, {"b1", "beta", "beta"}, {"b2", "beta", "beta"}, {"p2", "", "default"}} {
			to := ""
			if f.to != "" && i == 0 { // the first event chooses; the rest may leave it out
				to = fmt.Sprintf(`, "to": %q`, f.to)
			}
			d := int64(i + 1)
			lines = append(lines, fmt.Sprintf(`{"id": "%s-%d", "flow": %q, "body": {"delta": %d}%s}`, f.flow, i+1, f.flow, d, to))
			want[f.recv][f.flow] += d
		}
	}
	write("events.jsonl", strings.Join(lines, "\n")+"\n")
	ctl(0, "enqueue", "--file", "events.jsonl")

	out := ctl(0, relayArgs...)
	if !strings.HasPrefix(out, "relay stopped (idle): 14 delivered, 0 retried, 0 quarantined, 0 leases lost, 0 settle errors (14 attempts) in ") {
		t.Errorf("first relay run: %q", out)
	}
	for name, r := range map[string]*testReceiver{"default": def, "alpha": alpha, "beta": beta} {
		if got := r.totals(t); !equalTotals(got, want[name]) {
			t.Errorf("receiver %s totals = %v, want %v", name, got, want[name])
		}
	}

	// Pause beta: alpha's new events drain, beta's wait in their place.
	ctl(0, "destinations", "pause", "beta", "--reason", "beta maintenance")
	ctl(0, "enqueue", "--id", "a1-2", "--flow", "a1", "--body", `{"delta": 100}`)
	ctl(0, "enqueue", "--id", "b1-4", "--flow", "b1", "--body", `{"delta": 100}`, "--to", "beta")
	// A paused destination's head is not due: --exit-when-idle ends once
	// alpha has its event, with exit 3 and beta's waiting event counted.
	want["alpha"]["a1"] += 100
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a bound on a hang, not a timing
	code, out, errs := run(ctx, relayArgs...)
	cancel()
	if code != exitUndelivered || !strings.HasPrefix(out, "relay stopped (idle): 1 delivered, 0 retried") ||
		!strings.Contains(errs, "1 waiting behind quarantined heads, in paused flows or in paused destinations") ||
		!strings.Contains(errs, "1 events wait in 1 paused destinations") {
		t.Errorf("relay with beta paused: exit %d, want %d; stdout %q\nstderr:\n%s", code, exitUndelivered, out, errs)
	}
	if got := alpha.totals(t); !equalTotals(got, want["alpha"]) {
		t.Errorf("alpha with beta paused = %v, want %v", got, want["alpha"])
	}
	if got := beta.totals(t); !equalTotals(got, want["beta"]) {
		t.Errorf("beta while paused = %v, want %v (nothing new)", got, want["beta"])
	}
	var rows []destinationRow
	decodeStrict(t, ctl(0, "destinations", "list", "--json"), &rows)
	wantRows := []destinationRow{
		{Name: "alpha", URL: alpha.url, Secrets: 1, Flows: 2},
		{Name: "beta", URL: beta.url, Secrets: 1, Concurrency: 2, Paused: true, PauseReason: "beta maintenance", Flows: 2, Backlog: 1},
	}
	if !slices.Equal(rows, wantRows) {
		got, _ := json.Marshal(rows)
		t.Errorf("destinations list with beta paused = %s", got)
	}

	// Resumed, beta's event is delivered, once.
	ctl(0, "destinations", "resume", "beta", "--reason", "maintenance over")
	if out := ctl(0, relayArgs...); !strings.HasPrefix(out, "relay stopped (idle): 1 delivered, 0 retried") {
		t.Errorf("relay after the resume: %q", out)
	}
	want["beta"]["b1"] += 100
	for name, r := range map[string]*testReceiver{"default": def, "alpha": alpha, "beta": beta} {
		if got := r.totals(t); !equalTotals(got, want[name]) {
			t.Errorf("receiver %s totals at the end = %v, want %v", name, got, want[name])
		}
	}
}
