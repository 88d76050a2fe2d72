package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStatusRelay_DestinationBreakers runs a relay with --metrics over two
// destinations, one of which answers 503: its breaker opens while the
// other's stays closed, and the relay's /status shows it per destination
// ('status --relay --json' and the human table), and 'web --relay' shows
// it on the console's Destinations page beside a relay that cannot be
// read.
func TestStatusRelay_DestinationBreakers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	queuePath := filepath.Join(dir, "queue.db")
	up := newTestReceiver(t, dir, "up", "dest-secret-0001")
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	if err := os.WriteFile(filepath.Join(dir, "s"), []byte("dest-secret-0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := func(ctx context.Context, want int, args ...string) string {
		t.Helper()
		var out, errb lockedBuffer
		e := newEnv(strings.NewReader(""), &out, &errb)
		e.dir, e.ctx = dir, ctx
		if got := e.main(append([]string{"--queue", queuePath}, args...)); got != want {
			t.Fatalf("relayctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, want, out.String(), errb.String())
		}
		return out.String()
	}
	bg := context.Background()
	ctl(bg, 0, "enqueue", "--id", "p-1", "--flow", "p", "--body", `{"delta": 1}`) // makes the queue
	ctl(bg, 0, "destinations", "add", "up", "--url", up.url, "--secret-file", "s", "--reason", "test")
	ctl(bg, 0, "destinations", "add", "down", "--url", down.URL, "--secret-file", "s", "--reason", "test")
	for _, f := range []struct{ flow, to string }{{"u1", "up"}, {"u2", "up"}, {"d1", "down"}, {"d2", "down"}, {"d3", "down"}} {
		ctl(bg, 0, "enqueue", "--id", f.flow+"-1", "--flow", f.flow, "--body", `{"delta": 1}`, "--to", f.to)
	}

	// The relay runs until the test ends; it logs its metrics address.
	rctx, stop := context.WithCancel(bg)
	var rerr lockedBuffer
	re := newEnv(strings.NewReader(""), io.Discard, &rerr)
	re.dir, re.ctx = dir, rctx
	done := make(chan int, 1)
	go func() {
		done <- re.main([]string{"--queue", queuePath, "relay", "--to", up.url, "--secret", "dest-secret-0001", "--metrics", "127.0.0.1:0",
			"--concurrency", "8", "--poll", "20ms", "--breaker-threshold", "2", "--probe-min", "1h", "--probe-max", "1h", "--schedule", "10ms,10ms,10ms,10ms"})
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	addr := ""
	for addr == "" {
		for _, l := range strings.Split(rerr.String(), "\n") {
			if i := strings.Index(l, "msg=metrics url=http://"); i >= 0 {
				addr = strings.TrimSuffix(strings.Fields(l[i+len("msg=metrics url=http://"):])[0], "/metrics")
			}
		}
		select {
		case code := <-done:
			t.Fatalf("relay exited %d:\n%s", code, rerr.String())
		case <-time.After(10 * time.Millisecond): // poll the log
		}
	}

	// /status, through 'status --relay --json', until down's breaker is
	// open and up's events are delivered (a bound on a hang, not a timing).
	deadline := time.Now().Add(time.Minute)
	byName := map[string]destinationReport{}
	var rep relayStatusReport
	for {
		if err := json.Unmarshal([]byte(ctl(bg, 0, "status", "--relay", addr, "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		for _, d := range rep.Relay.Destinations {
			byName[d.Name] = d
		}
		if byName["down"].Breaker.State == "open" && byName["up"].Delivered == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("down's breaker not open, or up not delivered: %+v\nrelay log:\n%s", rep.Relay, tail(rerr.String(), 3000))
		}
		time.Sleep(20 * time.Millisecond) // poll the relay
	}
	names := []string{}
	for _, d := range rep.Relay.Destinations {
		names = append(names, d.Name+"/"+d.Label)
	}
	if strings.Join(names, ",") != "/_default,down/down,up/up" {
		t.Errorf("/status destinations = %v, want the default, down and up, by name", names)
	}
	d := byName["down"]
	if d.Breaker.ConsecutiveFailures < 2 || d.Failed < 2 || d.Delivered != 0 || d.Breaker.Since == nil || d.Breaker.NextProbe == nil || d.Breaker.LastReason == "" {
		t.Errorf("down in /status = %+v, want open after at least 2 failures, none delivered, with its times and reason", d)
	}
	if u := byName["up"]; u.Breaker.State != "closed" || u.Failed != 0 || u.Breaker.ConsecutiveFailures != 0 {
		t.Errorf("up in /status = %+v, want closed, no failure", u)
	}
	if rep.Relay.Breaker.State != "closed" {
		t.Errorf("the default destination's breaker = %s, want closed: down's failures are its own", rep.Relay.Breaker.State)
	}
	out := ctl(bg, 0, "status", "--relay", addr)
	for _, want := range []string{"DESTINATION", "BREAKER", "FAILED", "_default", "closed"} {
		if !strings.Contains(out, want) {
			t.Errorf("status --relay lacks %q:\n%s", want, out)
		}
	}
	var downLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "down ") {
			downLine = l
		}
	}
	if f := strings.Fields(downLine); len(f) < 5 || f[1] != "open" {
		t.Errorf("status --relay: down's line = %q, want it open:\n%s", downLine, out)
	}

	// The console with this relay and one that is not there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	web := startWebWith(t, dir, []string{"--queue", queuePath, "--receiver", ""}, "--listen", "127.0.0.1:0", "--relay", addr, "--relay", gone)
	resp, err := http.Get("http://" + web + "/destinations")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	i := strings.Index(page, `<a href="/destination?name=down">`)
	if i < 0 {
		t.Fatalf("the destinations page lacks down:\n%s", page)
	}
	row, _, _ := strings.Cut(page[i:], "</tr>")
	for _, want := range []string{`class="state breaker-open"`, addr, `class="state unreachable"`, gone} {
		if !strings.Contains(row, want) {
			t.Errorf("down's row on the console lacks %s:\n%s", want, row)
		}
	}
	if !strings.Contains(page, "relay "+gone+" could not be read") {
		t.Errorf("the console does not say relay %s could not be read", gone)
	}
}
