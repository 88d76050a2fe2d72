package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// River's side of the comparison (docs/decisions/river-comparison.md): the
// settings of River's own `river bench` (cmd/river/riverbench), except the
// worker count, which is 16 here.
const (
	RiverVersion       = "v0.51.2"
	RiverFetchCooldown = 2 * time.Millisecond  // riverbench: FetchCooldown
	RiverFetchPoll     = 20 * time.Millisecond // riverbench: FetchPollInterval
	RiverWorkers       = 16                    // no-op workers (riverbench runs 2,000)
	// RiverWindow is the most jobs inserted and not yet completed: the
	// inserter waits below it, as riverbench keeps a backlog topped up. It
	// is well above the 100 completions River's batch completer waits for
	// before it writes (else every write would wait for its 250 ms tick).
	RiverWindow = 1024
	// RiverMinStep is the shortest step of a River case: River needs a
	// moment from its first insert to its first completed event (a fetch,
	// the work, a batch completer write), which a quick run's 250 ms slice
	// would mostly spend.
	RiverMinStep = time.Second

	// River's own best settings, as riverbench runs them: 2,000 workers
	// fed by inserts of 5,000 (the window is then two inserts' worth, so
	// that the workers never wait for an insert: riverWindow).
	RiverBestWorkers = 2000
	RiverBestBatch   = 5000
	// RiverBestMinStep is the shortest step at River's best settings: a
	// step starts with nothing in flight (the one before waited for its
	// jobs, untimed), and filling 2,000 workers from inserts of 5,000 and
	// the completer's first writes take a good part of a second, which a
	// step of RiverMinStep would count against River.
	RiverBestMinStep = 5 * time.Second
)

// riverStep is the step of a River case of workers workers.
func riverStep(step time.Duration, workers int) time.Duration {
	if workers >= RiverBestWorkers {
		return max(step, RiverBestMinStep)
	}
	return max(step, RiverMinStep)
}

// riverName is a River case's name: the backend and the insert size, and
// the worker count when it is not RiverWorkers.
func riverName(backend string, batch, workers int) string {
	if workers == RiverWorkers {
		return fmt.Sprintf("river-%s/batch-%d", backend, batch)
	}
	return fmt.Sprintf("river-%s/w%d-batch-%d", backend, workers, batch)
}

// riverWindow is the window of a River case: RiverWindow, or for inserts
// larger than half of it, two inserts (one being worked while the next waits).
func riverWindow(batch int) int64 {
	return max(RiverWindow, 2*int64(batch))
}

// riverArgs is riverbench's BenchmarkArgs: one number per job.
type riverArgs struct {
	Num int `json:"num"`
}

// Kind is the job kind riverbench uses.
func (riverArgs) Kind() string { return "benchmark" }

// riverWorker is riverbench's BenchmarkWorker: it does nothing.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
}

// Work returns at once.
func (w *riverWorker) Work(ctx context.Context, j *river.Job[riverArgs]) error { return nil }

// riverLogger passes River's warnings and errors on to stderr.
func riverLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// riverRun is a River client with a no-op worker, fed by InsertMany in
// batches. The client runs only inside a step: each TimedStep starts it
// (untimed), inserts for step, counts the jobs completed in that window
// (River's completed events, which come after its completer has written
// them, as riverbench counts), then waits, untimed, for every job it
// inserted to complete and stops the client, so that neither its jobs nor
// its fetch loop's polling run into the next case's slice.
type riverRun[TTx any] struct {
	client  *river.Client[TTx]
	step    time.Duration
	window  int64
	params  []river.InsertManyParams
	num     int
	insert  int64 // jobs inserted so far
	done    atomic.Int64
	failed  atomic.Int64
	wake    chan struct{}
	events  chan struct{} // closed when the running client's subscription ends
	closers []func() error
}

// newRiver migrates River's schema and makes a client, not started: each
// step starts and stops it.
func newRiver[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], schema string, batch, workers int, step time.Duration) (*riverRun[TTx], error) {
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: riverLogger()})
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	workersB := river.NewWorkers()
	river.AddWorker(workersB, &riverWorker{})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     RiverFetchCooldown,
		FetchPollInterval: RiverFetchPoll,
		Logger:            riverLogger(),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Schema:            schema,
		Workers:           workersB,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return &riverRun[TTx]{client: client, step: riverStep(step, workers), window: riverWindow(batch), params: make([]river.InsertManyParams, batch), wake: make(chan struct{}, 1)}, nil
}

// start subscribes to the client's job events and starts it. River closes
// a subscription when its client stops, so each start subscribes again; the
// goroutine counting the events ends with the subscription, and closes
// r.events.
func (r *riverRun[TTx]) start(ctx context.Context) error {
	events, unsub := r.client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 4 * int(r.window),
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	r.events = make(chan struct{})
	go func(ended chan struct{}) {
		defer close(ended)
		for ev := range events {
			if ev.Kind == river.EventKindJobCompleted {
				r.done.Add(1)
			} else {
				r.failed.Add(1)
			}
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}(r.events)
	if err := r.client.Start(ctx); err != nil {
		unsub()
		<-r.events
		r.events = nil
		return fmt.Errorf("river start: %w", err)
	}
	return nil
}

// stop stops the client, if it runs, and waits for its subscription's
// events to be counted.
func (r *riverRun[TTx]) stop(ctx context.Context) error {
	if r.events == nil {
		return nil
	}
	if err := r.client.Stop(ctx); err != nil {
		return fmt.Errorf("river stop: %w", err)
	}
	select {
	case <-r.events:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.events = nil
	return nil
}

// TimedStep starts the client (untimed), inserts in batches while fewer
// than the window are outstanding, for r.step, and returns the jobs
// completed meanwhile and the time; then, untimed, it waits for the jobs
// still in flight and stops the client.
func (r *riverRun[TTx]) TimedStep(ctx context.Context) (int, time.Duration, error) {
	if err := r.start(ctx); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	deadline := start.Add(r.step)
	before := r.done.Load()
	batch := int64(len(r.params))
	for time.Now().Before(deadline) {
		if r.insert-r.done.Load()-r.failed.Load() <= r.window-batch {
			if err := r.insertMany(ctx, len(r.params)); err != nil {
				return 0, 0, err
			}
			continue
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-r.wake:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	n := r.done.Load() - before
	took := time.Since(start)
	if f := r.failed.Load(); f > 0 {
		return 0, 0, fmt.Errorf("river: %d jobs failed or were cancelled", f)
	}
	// Untimed: the jobs still in flight finish before the next case runs.
	if err := r.waitAll(ctx, time.Minute); err != nil {
		return 0, 0, err
	}
	// Untimed: the client stops, so that its fetch loop does not poll
	// through the other cases' slices.
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r.stop(stopCtx); err != nil {
		return 0, 0, err
	}
	return int(n), took, nil
}

// insertMany inserts n jobs (at most len(r.params)) in one InsertMany.
func (r *riverRun[TTx]) insertMany(ctx context.Context, n int) error {
	params := r.params[:n]
	for i := range params {
		r.num++
		params[i] = river.InsertManyParams{Args: riverArgs{Num: r.num}}
	}
	if _, err := r.client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("river insert many: %w", err)
	}
	r.insert += int64(n)
	return nil
}

// waitAll waits, at most limit, until every job inserted has completed,
// failed or been cancelled by River's events; each event wakes it.
func (r *riverRun[TTx]) waitAll(ctx context.Context, limit time.Duration) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	for r.done.Load()+r.failed.Load() < r.insert {
		select {
		case <-r.wake:
		case <-time.After(time.Millisecond):
		case <-t.C:
			return fmt.Errorf("river: %d of %d jobs completed within %s", r.done.Load(), r.insert, limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// counts returns the jobs completed and inserted so far.
func (r *riverRun[TTx]) counts() (done, inserted int64) { return r.done.Load(), r.insert }

// clientStopped reports whether River's client has stopped, by River's own
// account (false before its first start).
func (r *riverRun[TTx]) clientStopped() bool {
	select {
	case <-r.client.Stopped():
		return true
	default:
		return false
	}
}

// Step is TimedStep without the time.
func (r *riverRun[TTx]) Step(ctx context.Context) (int, error) {
	n, _, err := r.TimedStep(ctx)
	return n, err
}

// Close stops the client, if a failed step left it running, and closes
// what the case opened, in reverse order.
func (r *riverRun[TTx]) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := []error{r.stop(ctx)}
	for i := len(r.closers) - 1; i >= 0; i-- {
		errs = append(errs, r.closers[i]())
	}
	return errors.Join(errs...)
}

// RiverPG is River on PostgreSQL (riverpgxv5): jobs inserted with InsertMany
// in batches of batch, worked by workers no-op workers, with riverbench's
// fetch settings, in a schema of its own (migrated with rivermigrate,
// dropped on Close). Each Step runs for step, at least RiverMinStep (at
// RiverBestWorkers, RiverBestMinStep).
func RiverPG(url string, batch, workers int, step time.Duration) Case {
	return Case{
		Name: riverName("pg", batch, workers),
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			r, _, _, err := riverPG(ctx, url, batch, workers, step)
			if err != nil {
				return nil, err // not a nil *riverRun in a Workload
			}
			return r, nil
		},
	}
}

// riverPG is River's run on PostgreSQL in a fresh schema of the server at
// url, with its pool; Close drops the schema.
func riverPG(ctx context.Context, url string, batch, workers int, step time.Duration) (*riverRun[pgx.Tx], *pgxpool.Pool, string, error) {
	schema := NewPGSchema()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, "", err
	}
	cleanup := func() error {
		pool.Close()
		return DropPGSchema(context.Background(), url, schema)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		cleanup()
		return nil, nil, "", fmt.Errorf("create schema: %w", err)
	}
	r, err := newRiver(ctx, riverpgxv5.New(pool), schema, batch, workers, step)
	if err != nil {
		cleanup()
		return nil, nil, "", err
	}
	r.closers = append(r.closers, cleanup)
	return r, pool, schema, nil
}

// RiverSQLite is River on SQLite (riversqlite, modernc.org/sqlite) with the
// same settings as [RiverPG], on a file opened with the stores' pragmas
// ([DSN]) and one connection, as River's CLI opens SQLite
// (SetMaxOpenConns(1)).
func RiverSQLite(batch, workers int, step time.Duration) Case {
	return Case{
		Name: riverName("sqlite", batch, workers),
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			db, err := OpenDB(filepath.Join(dir, "river.db"))
			if err != nil {
				return nil, err
			}
			db.SetMaxOpenConns(1)
			r, err := newRiver[*sql.Tx](ctx, riversqlite.New(db), "", batch, workers, step)
			if err != nil {
				db.Close()
				return nil, err
			}
			r.closers = append(r.closers, db.Close)
			return r, nil
		},
	}
}

// RiverBurnDownJobs is the backlog of [RiverPGBurnDown]: twenty inserts of
// RiverBestBatch, a few seconds of River's work at its best on this
// project's machine.
const RiverBurnDownJobs = 20 * RiverBestBatch

// RiverPGBurnDown is River at its own best settings in riverbench's
// burn-down mode (`river bench -n`), the like of a relay drain: in a fresh
// schema (migrated, dropped afterwards) jobs jobs are inserted with
// InsertMany of RiverBestBatch and the table analyzed, untimed, as a drain's
// backlog is loaded; then a client of RiverBestWorkers no-op workers with
// riverbench's fetch settings is started and timed from its start until
// River's completed events have counted every job (riverbench: from the
// start to the last job worked). It returns jobs ÷ that time.
func RiverPGBurnDown(ctx context.Context, url string, jobs int) (float64, error) {
	r, pool, schema, err := riverPG(ctx, url, RiverBestBatch, RiverBestWorkers, 0)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for r.insert < int64(jobs) {
		if err := r.insertMany(ctx, min(len(r.params), jobs-int(r.insert))); err != nil {
			return 0, err
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, "river_job"}.Sanitize()); err != nil {
		return 0, fmt.Errorf("analyze river_job: %w", err)
	}
	// The subscription holds every job's event (r.start sizes it from
	// the window): none is dropped, as riverbench sizes it to its backlog.
	r.window = int64(jobs)
	if err := r.start(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := r.waitAll(ctx, 2*time.Minute); err != nil {
		return 0, err
	}
	took := time.Since(start)
	if f := r.failed.Load(); f > 0 {
		return 0, fmt.Errorf("river burn-down: %d jobs failed or were cancelled", f)
	}
	return float64(r.done.Load()) / took.Seconds(), nil
}
