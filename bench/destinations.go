package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	relayrt "github.com/fairrelay/fairrelay/relay"
)

// The destinations case (docs/contract.md §7.11, docs/runtime.md
// "Destinations"): seven healthy destinations (HTTP receivers on loopback
// that answer at once), and three bad ones: a blackhole (accepts, never
// answers: the relay's timeout, destTimeout, applies), one that answers in
// 2 s, one that answers 503. The relay (Concurrency destConcurrency:
// every destination has that many handler slots of its own) drains the healthy seven's backlog once alone and once with the bad
// three's backlog beside it, each in a queue of its own where all ten are
// registered, in the same round; the row is the healthy seven's events/s
// with the bad three ÷ without them.
const (
	destConcurrency = 128
	destTimeout     = 3 * time.Second
	destSlow        = 2 * time.Second
)

// destHealthy and destBad name the destinations of the case.
var (
	destHealthy = []string{"h1", "h2", "h3", "h4", "h5", "h6", "h7"}
	destBad     = []string{"blackhole", "slow", "down503"}
)

// DestinationsRound is one round of the destinations case on one backend.
type DestinationsRound struct {
	Alone   float64 // the healthy seven's events/s, alone in their queue
	WithBad float64 // the same, with the bad three's flows in the queue
}

// Ratio is WithBad ÷ Alone (goal ≥ 0.9).
func (r DestinationsRound) Ratio() float64 { return r.WithBad / r.Alone }

// destQueue is what the case needs of a store: the relay's view of
// destinations, registration and enqueueing.
type destQueue interface {
	relayrt.DestinationQueue
	PutDestination(ctx context.Context, d queue.Destination, reason string, now clock.Tick) error
	EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error)
}

// openDestQueue opens a new queue on backend ("sqlite": a file under dir;
// "postgres": a schema of its own at pgURL, dropped by the returned close).
func openDestQueue(ctx context.Context, backend, dir, pgURL string) (destQueue, func() error, error) {
	pol := RuntimePolicy()
	pol.MaxAttempts = 20 // the bad three's flows are retried, not quarantined, within a round
	var s any
	var closeFn func() error
	switch backend {
	case "sqlite":
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
		q, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithPolicy(pol), queuestore.WithRealTime(clock.Wall{}, 1000))
		if err != nil {
			return nil, nil, err
		}
		s, closeFn = q, q.Close
	case "postgres":
		schema := NewPGSchema()
		q, err := pgqueuestore.Open(ctx, pgURL, pgqueuestore.WithSchema(schema), pgqueuestore.WithPolicy(pol),
			pgqueuestore.WithRealTime(clock.Wall{}, 1000))
		if err != nil {
			DropPGSchema(ctx, pgURL, schema)
			return nil, nil, err
		}
		s, closeFn = q, func() error { return errors.Join(q.Close(), DropPGSchema(context.Background(), pgURL, schema)) }
	default:
		return nil, nil, fmt.Errorf("destinations: unknown backend %q", backend)
	}
	dq, ok := s.(destQueue)
	if !ok {
		closeFn()
		return nil, nil, fmt.Errorf("destinations: the %s store has no destinations (queue.DestinationStore)", backend)
	}
	return dq, closeFn, nil
}

// destReceivers are the case's ten receivers on loopback.
type destReceivers struct {
	srv     *http.Server
	base    string
	mu      sync.Mutex
	seen    map[string]bool // event IDs the healthy seven applied
	healthy atomic.Int64    // len(seen)
}

func startDestReceivers() (*destReceivers, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &destReceivers{base: "http://" + ln.Addr().String(), seen: map[string]bool{}}
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter) { w.Write([]byte(`{"outcome":"accepted"}`)) }
	for _, name := range destHealthy {
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("webhook-id")
			d.mu.Lock()
			if !d.seen[id] {
				d.seen[id] = true
				d.healthy.Add(1)
			}
			d.mu.Unlock()
			ok(w)
		})
	}
	mux.HandleFunc("/blackhole", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(destSlow):
			ok(w)
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/down503", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	d.srv = &http.Server{Handler: mux}
	go d.srv.Serve(ln)
	return d, nil
}

// reset forgets what the healthy seven applied.
func (d *destReceivers) reset() {
	d.mu.Lock()
	clear(d.seen)
	d.healthy.Store(0)
	d.mu.Unlock()
}

// destDrain drains the healthy seven's backlog (flows flows × perFlow
// events each) in a new queue, with the bad three's backlog of the same
// size beside it when withBad, and returns the healthy seven's events/s:
// their events ÷ the time from the relay's start until the last of them
// was applied.
func destDrain(ctx context.Context, backend, dir, pgURL string, rc *destReceivers, withBad bool, flows, perFlow int) (float64, error) {
	q, closeQ, err := openDestQueue(ctx, backend, dir, pgURL)
	if err != nil {
		return 0, err
	}
	defer closeQ()
	now := clock.Wall{}.Now()
	// All ten are registered in both drains (the claim reads one index
	// range per destination with room, so the count is kept equal); only
	// the bad three's backlog makes them present.
	all := append(append([]string(nil), destHealthy...), destBad...)
	names := destHealthy
	if withBad {
		names = all
	}
	for i, name := range all {
		d := queue.Destination{Name: name, URL: rc.base + "/" + name, Secrets: []string{fmt.Sprintf("bench-secret-%d", i)}}
		if err := q.PutDestination(ctx, d, "bench", now); err != nil {
			return 0, err
		}
	}
	// Round by round, one event of every flow of every destination, so
	// that the bad three's heads are among the first claimed.
	var batch []queue.Event
	flush := func() error {
		if _, err := q.EnqueueBatch(ctx, batch, now); err != nil {
			return fmt.Errorf("destinations: enqueue: %w", err)
		}
		batch = batch[:0]
		return nil
	}
	n := 0
	for range perFlow {
		for _, name := range names {
			for f := range flows {
				n++
				batch = append(batch, queue.Event{ID: fmt.Sprintf("e%d", n), Flow: fmt.Sprintf("%s-%04d", name, f), Body: body, Destination: name})
				if len(batch) == 1000 {
					if err := flush(); err != nil {
						return 0, err
					}
				}
			}
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	def, err := relayrt.NewHTTP(rc.base+"/h1", []byte("default"), relayrt.HTTPOptions{})
	if err != nil {
		return 0, err
	}
	router, err := relayrt.NewDestinations(q, def, relayrt.DestinationsOptions{HTTP: relayrt.HTTPOptions{Timeout: destTimeout, MaxIdleConns: destConcurrency}})
	if err != nil {
		return 0, err
	}
	r, err := relayrt.New(q, router, relayrt.Options{Concurrency: destConcurrency, Clock: clock.Wall{}, ShutdownGrace: 100 * time.Millisecond})
	if err != nil {
		return 0, err
	}
	rc.reset()
	want := int64(len(destHealthy) * flows * perFlow)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- r.Run(rctx) }()
	var took time.Duration
	for {
		if rc.healthy.Load() >= want {
			took = time.Since(start)
			break
		}
		select {
		case err := <-done:
			cancel()
			return 0, fmt.Errorf("destinations: relay ended before the healthy seven drained: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, relayrt.ErrAbandoned) {
		return 0, err
	}
	return float64(want) / took.Seconds(), nil
}

// MeasureDestinations runs rounds of the destinations case on backend
// ("sqlite" under dir, or "postgres" at pgURL), flows flows of perFlow
// events per destination; in each round both drains, the order alternating
// round by round. progress, when not nil, is told each round.
func MeasureDestinations(ctx context.Context, backend, dir, pgURL string, rounds, flows, perFlow int, progress func(round int, r DestinationsRound)) ([]DestinationsRound, error) {
	rc, err := startDestReceivers()
	if err != nil {
		return nil, err
	}
	defer rc.srv.Close()
	var out []DestinationsRound
	for i := range rounds {
		var r DestinationsRound
		for j := range 2 {
			withBad := (i+j)%2 == 1
			rate, err := destDrain(ctx, backend, filepath.Join(dir, fmt.Sprintf("r%d-%d", i, j)), pgURL, rc, withBad, flows, perFlow)
			if err != nil {
				return nil, fmt.Errorf("round %d (bad three present: %v): %w", i+1, withBad, err)
			}
			if withBad {
				r.WithBad = rate
			} else {
				r.Alone = rate
			}
		}
		if progress != nil {
			progress(i+1, r)
		}
		out = append(out, r)
	}
	return out, nil
}

// DestinationsRows measures the destinations case on SQLite (under dir)
// and, unless pgSkipped says why not, on PostgreSQL at pgURL, and returns
// the report's rows (progress, when not nil, is told each round):
// per backend the ratio (goal ≥ 0.9) and, as context, both rates. quick
// runs one round of a smaller backlog instead of five. A drain lasts about
// a second on SQLite and a few on PostgreSQL: long enough that what the
// bad three cost once (their first requests, the 503 destination's
// failures until its breaker opens) does not stand for a rate, short
// enough that a round's two drains share the machine's load. A backend
// whose run fails gives one row saying why.
func DestinationsRows(ctx context.Context, dir, pgURL, pgSkipped string, quick bool, progress func(backend string, round int, r DestinationsRound)) []Row {
	rounds, flows, perFlow := 5, 40, 60
	if quick {
		rounds, flows, perFlow = 1, 20, 10
	}
	var rows []Row
	for _, backend := range []string{"sqlite", "postgres"} {
		if backend == "postgres" && pgSkipped != "" {
			continue
		}
		label := map[string]string{"sqlite": "SQLite", "postgres": "PostgreSQL"}[backend]
		var each func(int, DestinationsRound)
		if progress != nil {
			each = func(round int, r DestinationsRound) { progress(backend, round, r) }
		}
		rs, err := MeasureDestinations(ctx, backend, filepath.Join(dir, "destinations-"+backend), pgURL, rounds, flows, perFlow, each)
		if err != nil {
			rows = append(rows, Row{What: "destinations, " + label + ": healthy seven with the bad three ÷ alone", Unit: "ratio",
				Target: "≥ 0.9", Met: "NO (failed)", Why: err.Error()})
			continue
		}
		var ratio, alone, with []float64
		for _, r := range rs {
			ratio, alone, with = append(ratio, r.Ratio()), append(alone, r.Alone), append(with, r.WithBad)
		}
		s := Summarize(ratio)
		rows = append(rows,
			Row{What: fmt.Sprintf("destinations, %s: healthy seven's events/s with a blackholed, a 2 s and a 503 destination ÷ without them (%d flows × %d events each, Concurrency %d)", label, flows, perFlow, destConcurrency),
				Value: s, Verb: "%.2f", Unit: "ratio", Target: "≥ 0.9", Met: AtLeast(s.Median, 0.9),
				Why: "Compare the two rates' medians in the next rows: a round's two drains last seconds each, and their spread on this machine is of the order of the gap"},
			Row{What: "destinations, " + label + ": healthy seven alone", Value: Summarize(alone), Unit: "events/s"},
			Row{What: "destinations, " + label + ": healthy seven beside the bad three", Value: Summarize(with), Unit: "events/s"},
		)
	}
	return rows
}
