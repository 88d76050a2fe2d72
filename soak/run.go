package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
)

// The relays' policy: short enough that a killed relay's claims come back
// within the run, with enough attempts that a receiver's downtime never
// exhausts them (only an injected failure may end quarantined).
var relayPolicy = queue.Policy{
	Lease:       2000,
	MaxAttempts: 40,
	BackoffBase: 20,
	BackoffCap:  250,
	Fairness:    queue.FairMinServed,
	// RetryAfterCap is what relayctl relay's --retry-after-cap gives by
	// default, so the relays' flags match the recorded policy and write no
	// audit row (the soak's audit must stay empty).
	RetryAfterCap: 3_600_000,
}

const secret = "soak-secret"

// Run performs one soak: chaos for c.For, then the drain, then the checks.
// It returns the summary; the error is ErrCheck (wrapped) when a check
// failed, or the reason the run could not be performed. On PostgreSQL the
// run's two schemas are dropped when it returns, unless c.Keep is set or
// the run failed (Summary.Stores names them; DropStores drops them).
func Run(ctx context.Context, c Config) (sum Summary, err error) {
	c = c.Defaults()
	if err := c.validate(); err != nil {
		return Summary{}, err
	}
	logf := c.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	began := time.Now()
	sum = Summary{Backend: c.Backend, Seed: c.Seed, Faults: FaultCounts{}}
	if c.Backend == BackendPostgres && c.PrivateCluster {
		if c.Cluster == nil {
			cl, cerr := pgtest.NewCluster(ctx)
			if cerr != nil {
				return sum, fmt.Errorf("soak: private cluster: %w", cerr)
			}
			// Registered before the schemas' drop, so it runs after it. A
			// run that failed its checks leaves the cluster stopped, its
			// directory in place, for a person to start and look at.
			defer func() {
				if err != nil && errors.Is(err, ErrCheck) {
					sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_ = cl.Stop(sctx, pgtest.ShutdownFast)
					logf("soak: the private cluster is kept, stopped, in %s (start it with pg_ctl -D %s/data -o '-p %d' start)", cl.Dir, cl.Dir, cl.Port)
					return
				}
				_ = cl.Close()
			}()
			c.Cluster = cl
			logf("soak: private PostgreSQL cluster on port %d in %s", cl.Port, cl.Dir)
		}
		c.Postgres = c.Cluster.URL
	}
	stores, err := newStores(c)
	if err != nil {
		return sum, err
	}
	sum.Stores = stores
	if err := os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o755); err != nil {
		return sum, fmt.Errorf("soak: %w", err)
	}
	if err := writeStores(c.Dir, stores); err != nil {
		return sum, err
	}
	// The schemas go when the run ends, unless they are to be looked at.
	defer func() {
		if c.Keep || err != nil && errors.Is(err, ErrCheck) {
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if derr := dropStores(dctx, stores); derr != nil && err == nil {
			err = derr
		}
	}()

	// The queue exists before any relay starts, with the soak's policy;
	// the receiver too.
	policy := relayPolicy
	policy.Retention = clock.Tick(c.Retention.Milliseconds())
	q, r, err := createStores(ctx, stores, policy)
	if err != nil {
		return sum, err
	}
	if err := errors.Join(q.Close(), r.Close()); err != nil {
		return sum, fmt.Errorf("soak: create the stores: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return sum, err
	}

	// Every process reaches the receiver's HTTP port, and on PostgreSQL
	// the server, through a fault proxy (faults.go); the soak's own
	// set-up and checks go to the server directly.
	httpProxy, err := NewFaultProxy(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return sum, err
	}
	defer httpProxy.Close()
	url := fmt.Sprintf("http://%s/", httpProxy.Addr())
	procQueue, procReceiver, prodQueue := stores.Queue, stores.Receiver, stores.Queue
	var dbProxy *FaultProxy
	var tag string
	if c.Backend == BackendPostgres {
		conn, _, err := pgTarget(stores.Queue)
		if err != nil {
			return sum, err
		}
		u, err := neturl.Parse(conn)
		if err != nil {
			return sum, fmt.Errorf("soak: %w", err)
		}
		if dbProxy, err = NewFaultProxy(u.Host); err != nil {
			return sum, err
		}
		defer dbProxy.Close()
		_, qs, err := pgTarget(stores.Queue)
		if err != nil {
			return sum, err
		}
		tag = strings.TrimSuffix(qs, "_queue")
		if procQueue, err = processURL(stores.Queue, dbProxy.Addr(), "relay", tag); err != nil {
			return sum, err
		}
		if procReceiver, err = processURL(stores.Receiver, dbProxy.Addr(), "receive", tag); err != nil {
			return sum, err
		}
		if prodQueue, err = processURL(stores.Queue, dbProxy.Addr(), "produce", tag); err != nil {
			return sum, err
		}
	}

	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x50a4))
	var rngMu sync.Mutex
	in := &injector{cluster: c.Cluster, db: dbProxy, http: httpProxy, server: c.Postgres, tag: tag,
		rng: rand.New(rand.NewPCG(uint64(c.Seed), 0xfa17)), rngMu: &rngMu, counts: FaultCounts{}, log: logf}
	kills := false
	for _, k := range c.Faults {
		if k == FaultKill {
			kills = true
		} else {
			in.kinds = append(in.kinds, k)
		}
	}
	var procs []*proc
	recvArgs := []string{"--receiver", procReceiver, "receive",
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--secret", secret, "--json", "--grace", "1s"}
	var pruneArgs []string
	if c.Retention > 0 {
		recvArgs = append(recvArgs, "--retention", c.Retention.String(), "--prune-every", "1s")
		pruneArgs = []string{"--prune-every", "1s"}
	}
	receiver := newProc(c.Dir, "receiver", c.Relayctl, recvArgs...)
	receiver.ready, receiver.trouble = `"msg":"receiving"`, in.troubleSince
	procs = append(procs, receiver)
	relayArgs := func(extra ...string) []string {
		return append([]string{"--queue", procQueue, "relay", "--to", url, "--secret", secret, "--json",
			"--concurrency", "8", "--batch", "16", "--poll", "50ms", "--timeout", "2s", "--grace", "500ms",
			"--lease", "2s", "--max-attempts", strconv.Itoa(relayPolicy.MaxAttempts),
			"--backoff-base", "20ms", "--backoff-cap", "250ms", "--retry-after-cap", "1h"}, append(pruneArgs, extra...)...)
	}
	for i := range c.Relays {
		r := newProc(c.Dir, fmt.Sprintf("relay%d", i+1), c.Relayctl, relayArgs()...)
		// relayctl logs "relaying" just before relay.Run, whose first
		// queue call (the policy) ends Run when it fails: still the start.
		r.ready, r.startErr, r.trouble = `"msg":"relaying"`, "relay: read policy:", in.troubleSince
		procs = append(procs, r)
	}
	var producers []Producer
	for i := range c.Producers {
		p := Producer{Queue: prodQueue, Log: filepath.Join(c.Dir, fmt.Sprintf("producer%d.log", i+1)), ID: i + 1,
			Seed: c.Seed, Flows: c.Flows, Batch: c.Batch, PoisonEvery: c.PoisonEvery, Pause: c.ProducerPause,
			MaxBacklog: max(c.MaxBacklog, 0)}
		producers = append(producers, p)
		procs = append(procs, newProc(c.Dir, fmt.Sprintf("producer%d", i+1), c.Producer, append([]string{"produce"}, p.Args()...)...))
	}

	if err := writeProducers(c.Dir, producers); err != nil {
		return sum, err
	}

	// Chaos: every process is supervised (restarted after a short pause
	// whenever it exits) while a loop SIGKILLs a random one.
	logf("soak: backend=%s shards=%d seed=%d for=%s relays=%d producers=%d faults=%s dir=%s (%s)", c.Backend, c.Shards, c.Seed, c.For, c.Relays, c.Producers,
		strings.Join(c.Faults, ","), c.Dir, stores)
	recvCtx, stopReceiver := context.WithCancel(ctx)
	defer stopReceiver()
	chaosCtx, stopChaos := context.WithCancel(ctx)
	defer stopChaos()
	// Producers stop first when the chaos ends, relays later (after the
	// recovery check below).
	prodCtx, stopProducers := context.WithCancel(chaosCtx)
	defer stopProducers()
	var chaosWG, recvWG, prodWG sync.WaitGroup
	pauseMu := &rngMu
	pause := func() time.Duration {
		pauseMu.Lock()
		defer pauseMu.Unlock()
		return time.Duration(rng.Int64N(int64(c.RestartMax) + 1))
	}
	for _, p := range procs {
		sctx, wg := chaosCtx, &chaosWG
		switch {
		case p == receiver:
			sctx, wg = recvCtx, &recvWG
		case strings.HasPrefix(p.name, "producer"):
			sctx, wg = prodCtx, &prodWG
		}
		wg.Add(1)
		go func() { defer wg.Done(); p.supervise(sctx, pause) }()
	}
	// Whatever way Run returns, no child outlives it.
	var drainers []*proc
	defer func() {
		stopChaos()
		chaosWG.Wait()
		prodWG.Wait()
		stopReceiver()
		recvWG.Wait()
		for _, p := range append(procs, drainers...) {
			p.stop()
		}
	}()
	// The chaos starts once every relay and the receiver are up (a slow
	// machine may take seconds), and lasts c.For.
	waitReady(ctx, procs, time.Minute)
	deadline := time.After(c.For)
	// The other faults, one at a time, until the chaos ends.
	faultCtx, stopFaults := context.WithCancel(chaosCtx)
	defer stopFaults()
	faultErr := make(chan error, 1)
	go func() { faultErr <- in.run(faultCtx, c.FaultMin, c.FaultMax) }()
	lastReport := time.Now()
chaos:
	for {
		if !kills {
			select {
			case <-ctx.Done():
			case <-deadline:
			}
			break chaos
		}
		pauseMu.Lock()
		wait := c.KillMin + time.Duration(rng.Int64N(int64(c.KillMax-c.KillMin)+1))
		victim := procs[rng.IntN(len(procs))]
		pauseMu.Unlock()
		select {
		case <-ctx.Done():
			break chaos
		case <-deadline:
			break chaos
		case <-time.After(wait):
		}
		if victim.kill() {
			sum.Kills++
			switch {
			case victim == receiver:
				sum.ReceiverKills++
			case strings.HasPrefix(victim.name, "relay"):
				sum.RelayKills++
			default:
				sum.ProducerKills++
			}
		}
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			logf("soak: %s: %d kills, faults %s", time.Since(began).Round(time.Second), sum.Kills, in.snapshot())
		}
	}
	// The end of the chaos: the faults stop (a restart in progress is
	// finished) and the producers (killed once more, which is not
	// counted). The relays of the chaos, which lived through it, must then
	// deliver everything by themselves (recovery): a relay hung on a dead
	// connection would leave events in flight. Then they stop too; the
	// receiver stays up for the drain.
	stopFaults()
	if err := <-faultErr; err != nil {
		sum.Problems = append(sum.Problems, err.Error())
	}
	sum.Faults = in.snapshot()
	if sum.Kills > 0 {
		sum.Faults[FaultKill] = sum.Kills
	}
	stopProducers()
	prodWG.Wait()
	for _, p := range procs {
		if strings.HasPrefix(p.name, "producer") {
			p.stop()
		}
	}
	sum.Chaos = time.Since(began)
	if ctx.Err() == nil {
		logf("soak: chaos over after %s: faults %s; the relays recover", sum.Chaos.Round(time.Millisecond), sum.Faults)
		left, took, err := waitSettled(ctx, stores.Queue, c.RecoverTimeout)
		sum.Recovery = took
		switch {
		case err != nil:
			sum.Problems = append(sum.Problems, fmt.Sprintf("recovery: %v", err))
		case left > 0:
			sum.Problems = append(sum.Problems, fmt.Sprintf("recovery: %d events still pending or in flight %s after the faults stopped, the relays of the chaos running", left, c.RecoverTimeout))
		}
	}
	stopChaos()
	chaosWG.Wait()
	for _, p := range procs {
		if p != receiver {
			p.stop()
		}
	}
	if ctx.Err() != nil {
		stopReceiver()
		recvWG.Wait()
		receiver.stop()
		return sum, ctx.Err()
	}
	logf("soak: recovered in %s; draining", sum.Recovery.Round(time.Millisecond))

	// Drain: relays with --exit-when-idle, under a watchdog.
	drainStart := time.Now()
	for i := range c.Relays {
		d := newProc(c.Dir, fmt.Sprintf("drain%d", i+1), c.Relayctl, relayArgs("--exit-when-idle")...)
		if err := d.start(); err != nil {
			return sum, err
		}
		drainers = append(drainers, d)
	}
	watchdog, cancelWatchdog := context.WithTimeout(ctx, c.DrainTimeout)
	defer cancelWatchdog()
	for _, d := range drainers {
		select {
		case <-d.exited():
		case <-watchdog.Done():
		}
	}
	if watchdog.Err() != nil {
		sum.Problems = append(sum.Problems, fmt.Sprintf("drain: relays still running after %s; killed", c.DrainTimeout))
	}
	for _, d := range drainers {
		d.stop()
		// A drain relay exits 3 when the run quarantined something: the
		// injected poison events do that, and the check below counts the
		// quarantined events against them, so 3 is no problem by itself.
		if err := d.lastExit(); err != nil && !d.wasKilled() && !undelivered(err) {
			sum.Problems = append(sum.Problems, fmt.Sprintf("%s exited with %v (logs/%s.log)", d.name, err, d.name))
		}
	}
	sum.Drain = time.Since(drainStart)
	stopReceiver()
	recvWG.Wait()
	receiver.terminate(10 * time.Second)
	for _, p := range procs {
		sum.Restarts += p.starts - 1
		sum.Crashes += p.crashes
		sum.StartRefused += p.refused
		if p.crashes > 0 {
			sum.Problems = append(sum.Problems, fmt.Sprintf("%s exited on its own %d times, last: %v (logs/%s.log)", p.name, p.crashes, p.crashErr, p.name))
		}
	}
	sum.StoreErrors, sum.Recovered, sum.BreakerOpens, sum.ProducerRetries = countLogLines(c.Dir)
	logf("soak: drained in %s; checking", sum.Drain.Round(time.Millisecond))

	res, err := Check(ctx, stores, producers)
	if err != nil {
		return sum, err
	}
	runProblems := sum.Problems // the run's own, before Result (which holds Problems too) is set
	sum.Result = res
	sum.Duration = time.Since(began)
	sum.Problems = append(runProblems, res.Problems...)
	if len(sum.Problems) > 0 {
		return sum, fmt.Errorf("%w: %d problems", ErrCheck, len(sum.Problems))
	}
	return sum, nil
}

// ProducersFile, in a run's directory, lists its producers (JSON), so that
// CheckDir can check a kept run again.
const ProducersFile = "producers.json"

func writeProducers(dir string, ps []Producer) error {
	b, err := json.MarshalIndent(ps, "", "  ")
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ProducersFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// CheckDir runs Check on a run's directory (its StoresFile, or queue.db
// and receiver.db, and the producers' logs, as Run leaves them), for
// example one kept after a failure, or a copy taken after a machine crash.
// A PostgreSQL run's schemas must still be there (Config.Keep, or a
// failed run).
func CheckDir(ctx context.Context, dir string) (Result, error) {
	stores, err := readStores(dir)
	if err != nil {
		return Result{}, err
	}
	b, err := os.ReadFile(filepath.Join(dir, ProducersFile))
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var ps []Producer
	if err := json.Unmarshal(b, &ps); err != nil {
		return Result{}, fmt.Errorf("%w: %s: %v", ErrConfig, ProducersFile, err)
	}
	for _, p := range ps {
		if err := p.validate(); err != nil {
			return Result{}, err
		}
	}
	return Check(ctx, stores, ps)
}

// freePort picks a free loopback port; the receiver listens on it for the
// whole run, so a restarted receiver comes back at the same URL.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("soak: pick a port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// proc is one supervised child process: started again whenever it exits,
// until its supervisor's context ends.
type proc struct {
	name, dir, bin string
	args           []string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current process has exited
	err      error         // the current (or last) process's exit
	killed   bool          // the current process was sent SIGKILL by us
	starts   int
	crashes  int // exits we did not cause
	crashErr error

	// ready is the log line's mark that the process is up (relayctl's
	// "relaying", "receiving"; empty: none). An exit we did not cause,
	// before that line, while trouble says the server may have been
	// unreachable since the start, is a start refused (relayctl exits
	// when it cannot open its store; its supervisor starts it again), not
	// a crash: only a process that was up must ride out the faults.
	ready     string
	startErr  string // an exit message that also says the start failed (relay.Run's first policy read)
	trouble   func(since time.Time) bool
	startedAt time.Time
	logStart  int64 // the log's size when the current process started
	refused   int
}

func newProc(dir, name, bin string, args ...string) *proc {
	return &proc{name: name, dir: dir, bin: bin, args: args}
}

// start starts the process once; its output goes to logs/<name>.log.
func (p *proc) start() error {
	logf, err := os.OpenFile(filepath.Join(p.dir, "logs", p.name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	var size int64
	if st, err := logf.Stat(); err == nil {
		size = st.Size()
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("soak: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.killed, p.err = cmd, done, false, nil
	p.startedAt, p.logStart = time.Now(), size
	p.starts++
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited is closed once the current process has exited.
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *proc) lastExit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *proc) wasKilled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

// kill sends SIGKILL to the running process; false when none is running.
func (p *proc) kill() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.killed {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
	}
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	return true
}

// stop kills the running process, if any, and waits for its exit.
func (p *proc) stop() {
	p.kill()
	if d := p.exited(); d != nil {
		<-d
	}
}

// terminate asks the process to stop (SIGTERM) and kills it after grace.
func (p *proc) terminate(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		p.stop()
	}
}

// supervise runs the process until ctx ends, restarting it after pause()
// whenever it exits. An exit not caused by kill is counted as a crash.
func (p *proc) supervise(ctx context.Context, pause func() time.Duration) {
	for ctx.Err() == nil {
		if err := p.start(); err != nil {
			p.mu.Lock()
			p.crashes++
			p.crashErr = err
			p.mu.Unlock()
			return
		}
		select {
		case <-p.exited():
		case <-ctx.Done():
			return // the caller stops the process
		}
		refused := p.startRefused()
		p.mu.Lock()
		if !p.killed && ctx.Err() == nil && refused {
			p.refused++
		} else if !p.killed && ctx.Err() == nil {
			p.crashes++
			p.crashErr = p.err
			if p.crashErr == nil {
				p.crashErr = errors.New("exit status 0")
			}
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause()):
		}
	}
}

// undelivered reports the exit status with which relayctl relay
// --exit-when-idle says that it ended with events it could not deliver (3).
func undelivered(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 3
}

// sawReady reports whether the current (or last) process wrote its ready
// line.
func (p *proc) sawReady() bool {
	p.mu.Lock()
	mark := p.ready
	p.mu.Unlock()
	return mark == "" || bytes.Contains(p.logSinceStart(), []byte(mark))
}

// logSinceStart is what the current (or last) process wrote to its log.
func (p *proc) logSinceStart() []byte {
	p.mu.Lock()
	start := p.logStart
	p.mu.Unlock()
	f, err := os.Open(filepath.Join(p.dir, "logs", p.name+".log"))
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, start, 1<<40))
	return b
}

// startRefused reports an exit of the last process during its start
// (before its ready line, or with its start's error), while the server may
// have been unreachable.
func (p *proc) startRefused() bool {
	p.mu.Lock()
	trouble, since, mark, startErr := p.trouble, p.startedAt, p.ready, p.startErr
	p.mu.Unlock()
	if mark == "" || trouble == nil || !trouble(since) {
		return false
	}
	return !p.sawReady() || startErr != "" && bytes.Contains(p.logSinceStart(), []byte(startErr))
}

// waitReady waits until every process with a ready line has written it,
// at most for limit.
func waitReady(ctx context.Context, procs []*proc, limit time.Duration) {
	end := time.Now().Add(limit)
	for time.Now().Before(end) && ctx.Err() == nil {
		all := true
		for _, p := range procs {
			all = all && p.sawReady()
		}
		if all {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countLogLines counts, in a run's logs, the relays' failed queue calls
// (relay: "queue call failed", each retried after a capped backoff), the
// times their queue calls worked again after failures ("queue calls work
// again"), the times their breaker opened ("breaker open") and the
// producers' retried calls ("trying again").
func countLogLines(dir string) (storeErrors, recovered, breakerOpens, producerRetries int) {
	entries, _ := os.ReadDir(filepath.Join(dir, "logs"))
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, "logs", e.Name()))
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(e.Name(), "relay"), strings.HasPrefix(e.Name(), "drain"):
			storeErrors += bytes.Count(b, []byte("queue call failed"))
			recovered += bytes.Count(b, []byte("queue calls work again"))
			breakerOpens += bytes.Count(b, []byte("breaker open"))
		case strings.HasPrefix(e.Name(), "producer"):
			producerRetries += bytes.Count(b, []byte("trying again"))
		}
	}
	return storeErrors, recovered, breakerOpens, producerRetries
}

// snapshot returns the faults counted so far.
func (in *injector) snapshot() FaultCounts {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := FaultCounts{}
	for k, v := range in.counts {
		out[k] = v
	}
	return out
}

// waitSettled waits, at most limit, until the queue has nothing pending
// or in flight, and returns how many events still are and how long it
// waited.
func waitSettled(ctx context.Context, target string, limit time.Duration) (left int64, took time.Duration, err error) {
	start := time.Now()
	q, err := openQueue(ctx, target, queueOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("open the queue: %w", err)
	}
	defer q.Close()
	for {
		st, err := q.Stats(ctx)
		if err != nil {
			return 0, time.Since(start), fmt.Errorf("queue stats: %w", err)
		}
		left = st.Events.Pending + st.Events.Inflight
		if left == 0 || time.Since(start) >= limit {
			return left, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return left, time.Since(start), ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
