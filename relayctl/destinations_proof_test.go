package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
)

// TestDestinations_TenOverHTTP is docs/contract.md §7.11's promise with
// real processes, on both backends: one 'relayctl relay' process delivers
// over loopback HTTP to ten destinations registered in its queue, each a
// receiver store behind its own server and secret: seven healthy, one
// blackholed (it accepts and never answers, so the relay's --timeout
// applies), one answering in 2 s, one answering 503. The healthy seven
// receive all their events, exactly once, while the blackhole and the 503
// are still down; nothing is quarantined while they are; once they answer
// again their flows drain by themselves, as do the slow one's, with no
// operator step: every total exact, every event acked once, no event
// quarantined, the audit only the destinations' registrations and the
// relay's policy. (The rate of the healthy seven beside the bad three is
// bench's destinations row in docs/performance.md.)
func TestDestinations_TenOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes, seconds of timeouts")
	}
	bin := buildRelayctl(t, t.TempDir())
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		tenDestinations(t, bin, dir, filepath.Join(dir, "queue.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pgtest.Require(t)
		base, schema := pgtest.Schema(t)
		tenDestinations(t, bin, t.TempDir(), pgURL(t, base, schema))
	})
}

func tenDestinations(t *testing.T, bin, dir, queuePath string) {
	const (
		flowsPer  = 3 // flows of each destination
		eventsPer = 4 // events of each flow
		slow      = 2 * time.Second
	)
	ctl := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--queue", queuePath, "--receiver", ""}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("relayctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}

	// The bad three: down (blackhole, 503) until up is set; slow always.
	var up atomic.Bool
	release := make(chan struct{})
	var refused atomic.Int64 // 503s answered
	behind := map[string]func(http.Handler) http.Handler{
		"blackhole": func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				bufferBody(r) // else the server notices no hang-up: r's context ends only then
				select {
				case <-release:
					h.ServeHTTP(w, r)
				case <-r.Context().Done(): // the relay gave up (its --timeout)
				}
			})
		},
		"slow": func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				bufferBody(r)
				select {
				case <-time.After(slow):
					h.ServeHTTP(w, r)
				case <-r.Context().Done():
				}
			})
		},
		"down503": func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !up.Load() {
					refused.Add(1)
					http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
					return
				}
				h.ServeHTTP(w, r)
			})
		},
	}
	// The first enqueue creates the queue: one event of the default
	// destination (the relay's --to), delivered beside the ten.
	ctl("", "enqueue", "--id", "d-0", "--flow", "d", "--body", `{"delta": 5}`, "--clock", "wall")
	healthy := []string{"h1", "h2", "h3", "h4", "h5", "h6", "h7"}
	names := append(append([]string(nil), healthy...), "blackhole", "slow", "down503")
	recv := map[string]*testReceiver{}
	want := map[string]map[string]int64{}
	var lines []string
	for i, name := range names {
		secret := fmt.Sprintf("secret-%s-0001", name)
		recv[name] = newReceiverBehind(t, dir, name, secret, behind[name])
		file := filepath.Join(dir, name+".secret")
		if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ctl("", "destinations", "add", name, "--url", recv[name].url, "--secret-file", file, "--reason", "receiver "+name)
		want[name] = map[string]int64{}
		for f := range flowsPer {
			flow := fmt.Sprintf("%s-f%d", name, f)
			for k := range eventsPer {
				d := int64(1 + (i*7+f*3+k)%10)
				lines = append(lines, fmt.Sprintf(`{"id":"%s-%d","flow":%q,"body":{"delta":%d},"to":%q}`, flow, k, flow, d, name))
				want[name][flow] += d
			}
		}
	}
	ctl(strings.Join(lines, "\n")+"\n", "enqueue", "--file", "-", "--clock", "wall")
	def := newTestReceiver(t, dir, "default", "default-secret-0001")
	names = append(names, "default")
	recv["default"], want["default"] = def, map[string]int64{"d": 5}

	// Retries within seconds (ten attempts), a breaker that opens after 3
	// failures and probes at least every 2 s, and a timeout longer than
	// the slow destination's answer.
	relayOut := &syncBuffer{}
	rcmd := exec.Command(bin, "--queue", queuePath, "relay", "--to", def.url, "--secret", "default-secret-0001",
		"--concurrency", "4", "--poll", "50ms", "--timeout", "3s",
		"--schedule", "200ms,500ms,1s,1s,1s,1s,1s,1s,1s",
		"--breaker-threshold", "3", "--probe-max", "2s")
	rcmd.Stdout = relayOut
	relay := start(t, "relayctl relay", rcmd)

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		end := time.Now().Add(2 * time.Minute) // a bound on a hang, not a timing
		for !cond() {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 2 minutes\nrelay log (tail):\n%s", what, tail(relay.stderr.String(), 3000))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	delivered := func(name string) bool { return equalTotals(recv[name].totals(t), want[name]) }
	quarantined := func() int64 {
		var st statusReport
		decodeStrict(t, ctl("", "status", "--json"), &st)
		return st.Stats.EventsByState.Quarantined
	}

	// The healthy seven drain while the blackhole and the 503 are down.
	waitFor("the healthy seven's events delivered", func() bool {
		for _, name := range healthy {
			if !delivered(name) {
				return false
			}
		}
		return true
	})
	if got := recv["blackhole"].totals(t); len(got) != 0 {
		t.Fatalf("blackhole applied %v while down", got)
	}
	if got := recv["down503"].totals(t); len(got) != 0 || refused.Load() == 0 {
		t.Fatalf("down503 applied %v and refused %d requests while down, want nothing applied and some refused", got, refused.Load())
	}
	// They stay down until their breakers have opened (the relay logs each
	// destination's) and the blackhole has been probed: their flows are
	// then charged only the failures before that and the probes
	// (docs/contract.md §7.8), and nothing of theirs is quarantined.
	logHas := func(parts ...string) bool {
		for _, l := range strings.Split(relay.stderr.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(l, p)
			}
			if ok {
				return true
			}
		}
		return false
	}
	waitFor("both breakers open and a probe of the blackhole", func() bool {
		if logHas("outcome=quarantined") {
			t.Fatalf("the relay quarantined an event while the bad destinations were down:\n%s", tail(relay.stderr.String(), 3000))
		}
		return logHas("breaker open", "destination=blackhole") && logHas("breaker open", "destination=down503") &&
			logHas("breaker probe", "destination=blackhole")
	})
	if n := quarantined(); n != 0 {
		t.Fatalf("%d events quarantined while the bad destinations were down, want none", n)
	}

	// Back up: everything drains by itself.
	up.Store(true)
	close(release)
	for _, name := range []string{"blackhole", "down503", "slow"} {
		waitFor(name+"'s events delivered after it answers", func() bool { return delivered(name) })
	}
	if err := relay.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	relay.wait(t, time.Minute)
	if out := relayOut.String(); !strings.Contains(out, " 0 quarantined, ") {
		t.Errorf("relay summary %q, want 0 quarantined", out)
	}
	var st statusReport
	decodeStrict(t, ctl("", "status", "--json"), &st)
	total := int64((len(names)-1)*flowsPer*eventsPer + 1)
	if c := st.Stats.EventsByState; c.Acked != total || c.Pending != 0 || c.Inflight != 0 || c.Quarantined != 0 {
		t.Errorf("queue events = %+v, want all %d acked", c, total)
	}
	for _, name := range names {
		if got := recv[name].totals(t); !equalTotals(got, want[name]) {
			t.Errorf("receiver %s totals = %v, want %v", name, got, want[name])
		}
	}
	var audit []auditRow
	decodeStrict(t, ctl("", "audit", "--json"), &audit)
	for _, a := range audit {
		if a.Kind != "policy" && a.Kind != "destination" {
			t.Errorf("audit row %+v: want only the destinations' registrations and the relay's policy", a)
		}
	}
}

// bufferBody reads r's body whole and puts it back for the handler behind:
// the server watches the connection for a hang-up (and ends r's context)
// only once the body has been read.
func bufferBody(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
}
