package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
)

// The outage tests: real processes over HTTP on loopback. A producer
// ('relayctl enqueue --file -', a process per round) keeps enqueuing one
// event to each of 200 flows every outageEvery; 'relayctl relay --to URL'
// delivers them to 'relayctl receive'. Then, for outageFor:
//
//   - receiver-down: the receiver is stopped;
//   - wrong-secret: the receiver runs with another secret (every delivery
//     is refused 401);
//
// and afterwards it runs again as before, on the same address. Nobody
// touches the queue: no quarantine, no redrive, and once the producer has
// stopped the receiver holds every flow's exact total. The relay's breaker
// opened (its /metrics said so while the outage lasted, and its log) and
// closed (its log, and /metrics after); the attempts charged to events
// while it was open are the probes (Retried is bounded by the claims in
// flight and the threshold each time it opened, plus the probes); the
// relay's summary adds up. Each runs on SQLite
// files and on PostgreSQL schemas (skipped without a server unless
// FAIRRELAY_REQUIRE_POSTGRES=1), all four at once.
func TestOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("outage tests: real processes, a minute's outage each")
	}
	bin := buildRelayctl(t, t.TempDir()) // once for the four
	// The four run at once whatever -parallel says: they mostly wait (a
	// minute's outage each). t.Run from several goroutines is allowed.
	var wg sync.WaitGroup
	for _, kind := range []string{"receiver-down", "wrong-secret"} {
		for _, backend := range []string{"sqlite", "postgres"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(kind+"/"+backend, func(t *testing.T) {
					o := &outage{t: t, bin: bin, kind: kind, dir: t.TempDir()}
					if backend == "postgres" {
						base, qs := pgtest.Schema(t)
						_, rs := pgtest.Schema(t)
						o.queue, o.receiver = pgURL(t, base, qs), pgURL(t, base, rs)
					} else {
						o.queue, o.receiver = filepath.Join(o.dir, "queue.db"), filepath.Join(o.dir, "receiver.db")
					}
					o.run()
				})
			}()
		}
	}
	wg.Wait()
}

const (
	outageFlows    = 200
	outageFor      = 60 * time.Second
	outageSecret   = "outage-secret"
	outageWrong    = "not-the-secret"
	outageProbeMax = 4 * time.Second
	outageConc     = 16
	outageEvery    = 3 * time.Second // a round of the producer
	outageThresh   = 5
)

// outage is one run of TestOutage.
type outage struct {
	t                   *testing.T
	bin, kind, dir      string
	queue, receiver     string
	addr                string // the receiver's host:port, the same across restarts
	metrics             string // the relay's /metrics URL
	rounds              int    // rounds enqueued
	want                map[string]int64
	recvs               []*child
	relay               *child
	relayOut            *syncBuffer
	maxState, maxOpens  float64 // the highest breaker state and opens seen in /metrics
	sawOpenDuringOutage bool
}

func (o *outage) command(args ...string) *exec.Cmd {
	return exec.Command(o.bin, append([]string{"--queue", o.queue, "--receiver", o.receiver}, args...)...)
}

// enqueueRound enqueues round r (seq r of every flow), in a process.
func (o *outage) enqueueRound(r int) error {
	var b bytes.Buffer
	for f := range outageFlows {
		flow := fmt.Sprintf("tenant-%03d", f)
		delta := int64((f*131+r*7919)%1000 + 1)
		fmt.Fprintf(&b, `{"id":"ev-%03d-%04d","flow":%q,"body":{"delta":%d}}`+"\n", f, r, flow, delta)
		o.want[flow] += delta
	}
	cmd := o.command("enqueue", "--file", "-", "--clock", "wall")
	cmd.Stdin = &b
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("enqueue round %d: %v\n%s", r, err, out)
	}
	o.rounds = r
	return nil
}

// startReceiver starts 'relayctl receive' with secret on o.addr (a free
// port the first time) and waits for its URL.
func (o *outage) startReceiver(secret string) {
	t := o.t
	t.Helper()
	listen := o.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := o.command("receive", "--listen", listen, "--secret", secret, "--json")
	cmd.Stdout = w
	c := start(t, fmt.Sprintf("relayctl receive #%d", len(o.recvs)+1), cmd)
	w.Close()
	line, err := bufio.NewReader(out).ReadString('\n')
	out.Close()
	if err != nil {
		t.Fatalf("%s printed no URL: %v\n%s", c.name, err, c.stderr)
	}
	u := strings.TrimSpace(line)
	host := strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/")
	if _, _, err := net.SplitHostPort(host); err != nil {
		t.Fatalf("%s printed %q, want its URL", c.name, line)
	}
	o.addr = host
	o.recvs = append(o.recvs, c)
}

func (o *outage) stopReceiver() {
	t := o.t
	t.Helper()
	c := o.recvs[len(o.recvs)-1]
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.wait(t, time.Minute)
}

// scrape reads the relay's /metrics: the value of each unlabelled series
// named in names.
func (o *outage) scrape(names ...string) (map[string]float64, error) {
	resp, err := http.Get(o.metrics)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	got := make(map[string]float64, len(names))
	for _, l := range strings.Split(string(b), "\n") {
		for _, n := range names {
			if v, ok := strings.CutPrefix(l, n+" "); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					got[n] = f
				}
			}
		}
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			return nil, fmt.Errorf("/metrics has no series %s", n)
		}
	}
	return got, nil
}

// status reads the relay's /status through 'relayctl status --relay'.
func (o *outage) status() relayStatus {
	o.t.Helper()
	out, err := exec.Command(o.bin, "status", "--relay", o.metrics, "--json").Output()
	if err != nil {
		o.t.Fatalf("status --relay: %v", err)
	}
	var rep relayStatusReport
	if err := json.Unmarshal(out, &rep); err != nil {
		o.t.Fatalf("status --relay --json: %v\n%s", err, out)
	}
	return rep.Relay
}

// watch scrapes the breaker every 250 ms until stop, keeping the highest
// state and opens seen.
func (o *outage) watch(stop <-chan struct{}, mu *sync.Mutex) {
	tk := time.NewTicker(250 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		m, err := o.scrape("fairrelay_breaker_state", "fairrelay_breaker_opens_total")
		if err != nil {
			continue // the relay is busy or restarting nothing: the next tick
		}
		mu.Lock()
		o.maxState = max(o.maxState, m["fairrelay_breaker_state"])
		o.maxOpens = max(o.maxOpens, m["fairrelay_breaker_opens_total"])
		mu.Unlock()
	}
}

// waitFor polls cond every 100 ms until it holds, at most d.
func (o *outage) waitFor(what string, d time.Duration, cond func() bool) {
	o.t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			st := "(no relay yet)"
			if o.metrics != "" {
				st = fmt.Sprintf("%+v", o.status())
			}
			o.t.Fatalf("%s: not after %s; the relay's status: %s\nrelay log (tail):\n%s", what, d, st, tail(o.relay.stderr.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (o *outage) run() {
	t := o.t
	o.want = make(map[string]int64, outageFlows)
	o.startReceiver(outageSecret)
	if err := o.enqueueRound(1); err != nil {
		t.Fatal(err)
	}
	o.relayOut = &syncBuffer{}
	rcmd := o.command("relay", "--to", "http://"+o.addr+"/", "--secret", outageSecret,
		"--metrics", "127.0.0.1:0", "--json", "--concurrency", strconv.Itoa(outageConc),
		"--breaker-threshold", strconv.Itoa(outageThresh), "--probe-max", outageProbeMax.String())
	rcmd.Stdout = o.relayOut
	o.relay = start(t, "relayctl relay", rcmd)
	re := regexp.MustCompile(`"msg":"metrics","url":"([^"]+)"`)
	o.waitFor("the relay's metrics URL in its log", time.Minute, func() bool {
		m := re.FindStringSubmatch(o.relay.stderr.String())
		if m != nil {
			o.metrics = m[1]
		}
		return m != nil
	})

	// The producer: a round every outageEvery until stopProducer.
	stopProducer, produced := make(chan struct{}), make(chan error, 1)
	go func() {
		tk := time.NewTicker(outageEvery)
		defer tk.Stop()
		for r := 2; ; r++ {
			select {
			case <-stopProducer:
				produced <- nil
				return
			case <-tk.C:
			}
			if err := o.enqueueRound(r); err != nil {
				produced <- err
				return
			}
		}
	}()
	o.waitFor("three rounds delivered before the outage", time.Minute, func() bool {
		return o.status().Totals.Delivered >= 3*outageFlows
	})
	if st := o.status(); st.Breaker.State != "closed" || st.Breaker.Opens != 0 {
		t.Fatalf("breaker before the outage: %+v", st.Breaker)
	}

	// The outage.
	var mu sync.Mutex
	stopWatch, watched := make(chan struct{}), make(chan struct{})
	go func() { o.watch(stopWatch, &mu); close(watched) }()
	o.stopReceiver()
	if o.kind == "wrong-secret" {
		o.startReceiver(outageWrong)
	}
	began := time.Now()
	o.waitFor("the breaker open in /status", time.Minute, func() bool {
		return o.status().Breaker.State != "closed"
	})
	time.Sleep(time.Until(began.Add(outageFor))) // the outage lasts its minute
	during := o.status()
	mu.Lock()
	o.sawOpenDuringOutage = o.maxState >= 1 && o.maxOpens >= 1
	mu.Unlock()
	if o.kind == "wrong-secret" {
		o.stopReceiver()
	}
	o.startReceiver(outageSecret) // back, on the same address
	o.waitFor("the breaker closed in /status", 2*time.Minute, func() bool {
		return o.status().Breaker.State == "closed"
	})
	close(stopProducer)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	total := int64(o.rounds * outageFlows)
	o.waitFor("every event delivered", 4*time.Minute, func() bool {
		return o.status().Totals.Delivered >= total
	})
	after, err := o.scrape("fairrelay_breaker_state", "fairrelay_breaker_opens_total")
	close(stopWatch)
	<-watched
	if err != nil {
		t.Fatal(err)
	}

	// The relay exits 0 on SIGTERM; its summary adds up.
	final := o.status()
	if err := o.relay.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o.relay.wait(t, time.Minute)
	o.stopReceiver()
	tot := final.Totals
	t.Logf("%s: %d rounds (%d events); during the outage: breaker %s, %d opens, %d probes, totals %+v; at the end: totals %+v",
		o.kind, o.rounds, total, during.Breaker.State, during.Breaker.Opens, during.Breaker.Probes, during.Totals, tot)
	if tot.Delivered != total || tot.Quarantined != 0 || tot.LeasesLost != 0 || tot.SettleErrors != 0 || tot.InFlight != 0 ||
		tot.Claimed != tot.Delivered+tot.Retried {
		t.Errorf("relay totals %+v: want %d delivered, none quarantined or lost, claimed = delivered + retried", tot, total)
	}
	// Charged while down: for each time the breaker opened, what was in
	// flight and the failures that opened it (an answer to a delivery that
	// began before the outage, finished by the stopping receiver, closes it,
	// and the next claims open it again); then the probes. No flow is
	// charged more than that.
	opens := final.Breaker.Opens
	if limit := opens*int64(outageConc+outageThresh) + final.Breaker.Probes; opens < 1 || tot.Retried > limit {
		t.Errorf("%d retries for a %s outage, %d opens: want at most %d (opens × (in flight + threshold) + %d probes)",
			tot.Retried, outageFor, opens, limit, final.Breaker.Probes)
	}
	summary := fmt.Sprintf("relay stopped (interrupted): %d delivered, %d retried, 0 quarantined, 0 leases lost, 0 settle errors (%d attempts) in ",
		tot.Delivered, tot.Retried, tot.Claimed)
	if out := o.relayOut.String(); !strings.HasPrefix(out, summary) {
		t.Errorf("relay's last line = %q, want %q…", out, summary)
	}

	// The breaker's open and close: in /metrics (seen while the outage
	// lasted, closed after) and in the log.
	if !o.sawOpenDuringOutage {
		t.Errorf("/metrics never showed the breaker open during the outage (highest state %v, opens %v)", o.maxState, o.maxOpens)
	}
	if after["fairrelay_breaker_state"] != 0 || after["fairrelay_breaker_opens_total"] < 1 {
		t.Errorf("/metrics after the outage: %v, want state 0 and opens >= 1", after)
	}
	log := o.relay.stderr.String()
	opened := regexp.MustCompile(`(?m)^\{[^\n]*"level":"WARN","msg":"relay: destination down, breaker open: claiming only probes"[^\n]*$`).FindStringIndex(log)
	closed := regexp.MustCompile(`(?m)^\{[^\n]*"level":"INFO","msg":"relay: destination answers, breaker closed"[^\n]*$`).FindAllStringIndex(log, -1)
	if opened == nil || len(closed) == 0 || closed[len(closed)-1][0] < opened[0] {
		t.Errorf("relay log lacks a WARN breaker open line followed by an INFO breaker closed line:\n%s", tail(log, 4000))
	}

	// No operator action: nothing quarantined, the audit holds only the
	// relay's policy row; every event acked.
	var st statusReport
	o.jsonOf(&st, "status", "--json")
	if c := st.Stats.EventsByState; c.Acked != total || c.Pending != 0 || c.Inflight != 0 || c.Quarantined != 0 {
		t.Errorf("queue events = %+v, want all %d acked", c, total)
	}
	var audit []auditRow
	o.jsonOf(&audit, "audit", "--json")
	for _, a := range audit {
		if a.Kind != "policy" {
			t.Errorf("audit row %+v: want only the relay's policy row", a)
		}
	}
	// Every total exact in the receiver.
	var totals []totalRow
	o.jsonOf(&totals, "receiver", "totals", "--json")
	if len(totals) != outageFlows {
		t.Fatalf("receiver has %d flows, want %d", len(totals), outageFlows)
	}
	for _, r := range totals {
		if r.Total != o.want[r.Flow] || r.NextSeq != int64(o.rounds)+1 {
			t.Errorf("receiver flow %s: total %d, next %d; want %d, %d", r.Flow, r.Total, r.NextSeq, o.want[r.Flow], o.rounds+1)
		}
	}
	var conflicts []json.RawMessage
	o.jsonOf(&conflicts, "receiver", "conflicts", "--json")
	if len(conflicts) != 0 {
		t.Errorf("receiver conflicts: %s", conflicts)
	}
}

// jsonOf runs relayctl with args and decodes its standard output into v.
func (o *outage) jsonOf(v any, args ...string) {
	o.t.Helper()
	out, err := o.command(args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		o.t.Fatalf("relayctl %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	if err := json.Unmarshal(out, v); err != nil {
		o.t.Fatalf("relayctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
