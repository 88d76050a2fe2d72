package soak

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// PoisonDelta is the delta of an injected failure: above every receiver's
// largest delta (receiver.DefaultMaxDelta), so the receiver answers
// 400 invalid_body on every attempt and the event must end quarantined.
const PoisonDelta = 5000

// poisonPrefix starts the flow of every injected failure. Each poison event
// has a flow of its own, so that its quarantine blocks nothing else.
const poisonPrefix = "poison-"

// Producer describes one producer process: it enqueues batch 1, 2, ... of
// deterministic events into the queue, one transaction per batch, and
// appends the number of each committed batch to its log (fsync'd) once the
// commit has returned. A restarted producer reads its log and enqueues the
// batch after the last one logged: that batch may already be in the queue
// (killed between the commit and the log line); enqueueing it again is a
// harmless duplicate, because enqueue is idempotent by event ID.
type Producer struct {
	Queue       string        // the queue: queue.db, or a postgres:// URL with ?schema=NAME (Stores.Queue)
	Log         string        // the producer's log of committed batches
	ID          int           // producer number, 1..n
	Seed        int64         // the run's seed (events depend on it)
	Flows       int           // ordinary flows shared by all producers
	Batch       int           // events per batch
	PoisonEvery int           // every PoisonEvery-th batch carries one poison event (0: none)
	Pause       time.Duration // wait between batches
	// MaxBacklog holds the producer back while the ordinary flows have more
	// than this many events not yet acked (0: never), so that the
	// producers cannot outrun the relays and a long run's drain stays short.
	MaxBacklog int
}

// Args are the command-line arguments that ParseProducer reads back.
func (p Producer) Args() []string {
	return []string{
		"-queue", p.Queue, "-log", p.Log, "-id", strconv.Itoa(p.ID), "-seed", strconv.FormatInt(p.Seed, 10),
		"-flows", strconv.Itoa(p.Flows), "-batch", strconv.Itoa(p.Batch),
		"-poison-every", strconv.Itoa(p.PoisonEvery), "-pause", p.Pause.String(),
		"-max-backlog", strconv.Itoa(p.MaxBacklog),
	}
}

// ParseProducer reads the arguments written by Producer.Args.
func ParseProducer(args []string) (Producer, error) {
	var p Producer
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&p.Queue, "queue", "", "the queue: queue.db or postgres://…?schema=NAME")
	fs.StringVar(&p.Log, "log", "", "log of committed batches")
	fs.IntVar(&p.ID, "id", 0, "producer number")
	fs.Int64Var(&p.Seed, "seed", 0, "seed")
	fs.IntVar(&p.Flows, "flows", 0, "flows")
	fs.IntVar(&p.Batch, "batch", 0, "events per batch")
	fs.IntVar(&p.PoisonEvery, "poison-every", 0, "batches per poison event")
	fs.DurationVar(&p.Pause, "pause", 0, "pause between batches")
	fs.IntVar(&p.MaxBacklog, "max-backlog", 0, "wait while more events than this are not acked (0: never)")
	if err := fs.Parse(args); err != nil {
		return Producer{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if err := p.validate(); err != nil {
		return Producer{}, err
	}
	return p, nil
}

func (p Producer) validate() error {
	switch {
	case p.Queue == "" || p.Log == "":
		return fmt.Errorf("%w: producer needs -queue and -log", ErrConfig)
	case p.ID < 1 || p.Flows < 1 || p.Batch < 1 || p.Batch > 10000 || p.PoisonEvery < 0 || p.Pause < 0 || p.MaxBacklog < 0:
		return fmt.Errorf("%w: producer -id, -flows, -batch (1..10000) must be positive, -poison-every, -pause and -max-backlog not negative", ErrConfig)
	}
	return nil
}

// Events returns batch k (k >= 1) of the producer: the same events every
// time it is asked, so that a restarted producer re-sends exactly what it
// may already have committed.
func (p Producer) Events(k int) []queue.Event {
	out := make([]queue.Event, p.Batch)
	for i := range out {
		h := mix(p.Seed, p.ID, k, i)
		flow := fmt.Sprintf("f%04d", h%uint64(p.Flows))
		delta := int64(h>>20%1000) + 1
		if p.PoisonEvery > 0 && k%p.PoisonEvery == 0 && i == 0 {
			flow, delta = fmt.Sprintf("%sp%d-b%d", poisonPrefix, p.ID, k), PoisonDelta
		}
		out[i] = queue.Event{
			ID:   eventID(p.ID, k, i),
			Flow: flow,
			Body: fmt.Appendf(nil, `{"delta":%d}`, delta),
		}
	}
	return out
}

// eventID names event i of batch k of producer p.
func eventID(p, k, i int) string { return fmt.Sprintf("p%d-b%07d-%04d", p, k, i) }

// parseEventID reads back eventID; ok is false for any other ID.
func parseEventID(id string) (p, k, i int, ok bool) {
	n, err := fmt.Sscanf(id, "p%d-b%d-%d", &p, &k, &i)
	return p, k, i, err == nil && n == 3 && id == eventID(p, k, i)
}

func mix(seed int64, p, k, i int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d/%d", seed, p, k, i)
	return h.Sum64()
}

// Produce runs the producer until ctx ends (or it is killed): it resumes
// after the last batch its log records.
func Produce(ctx context.Context, p Producer) error {
	if err := p.validate(); err != nil {
		return err
	}
	last, err := LastCommitted(p.Log)
	if err != nil {
		return err
	}
	if err := cutTornLine(p.Log); err != nil {
		return err
	}
	q, err := openRetrying(ctx, p.Queue)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer q.Close()
	lf, err := os.OpenFile(p.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("producer log: %w", err)
	}
	defer lf.Close()
	for k := last + 1; ; k++ {
		if err := p.holdBack(ctx, q); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := enqueue(ctx, q, p.Events(k), isPostgres(p.Queue)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("enqueue batch %d: %w", k, err)
		}
		if _, err := fmt.Fprintf(lf, "%d\n", k); err != nil {
			return fmt.Errorf("producer log: %w", err)
		}
		if err := lf.Sync(); err != nil {
			return fmt.Errorf("producer log: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.Pause):
		}
	}
}

// LastCommitted reads a producer's log: the highest batch it records as
// committed (0 when the log is missing or empty). A last line without its
// newline was cut by a kill and is not counted.
func LastCommitted(path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("producer log: %w", err)
	}
	last := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	complete := bytes.Count(data, []byte("\n"))
	for n := 0; n < complete && sc.Scan(); n++ {
		k, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil || k != last+1 {
			return 0, fmt.Errorf("%w: producer log %s line %d: %q after batch %d", ErrCheck, path, n+1, sc.Text(), last)
		}
		last = k
	}
	return last, nil
}

// cutTornLine truncates a log to its last complete line, so that the next
// line appended does not continue a line that a crash cut short.
func cutTornLine(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("producer log: %w", err)
	}
	keep := bytes.LastIndexByte(data, '\n') + 1
	if keep == len(data) {
		return nil
	}
	if err := os.Truncate(path, int64(keep)); err != nil {
		return fmt.Errorf("producer log: %w", err)
	}
	return nil
}

// retryBackoff is the wait before the n-th retry in a row of a producer's
// call (n from 1): 10 ms doubling, capped at 1 s.
func retryBackoff(n int) time.Duration {
	return min(10*time.Millisecond<<min(n-1, 10), time.Second)
}

// sleepCtx waits d or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// openRetrying opens the queue, trying again (capped backoff) while the
// server cannot be reached: a producer rides out a database fault by
// itself. Each attempt is bounded by processReplyTimeout twice over.
func openRetrying(ctx context.Context, target string) (queue.Store, error) {
	for n := 1; ; n++ {
		octx, cancel := context.WithTimeout(ctx, 2*processReplyTimeout)
		q, err := openQueue(octx, target, queueOptions{realTime: true})
		cancel()
		if err == nil {
			return q, nil
		}
		if errors.Is(err, ErrConfig) {
			return nil, fmt.Errorf("open queue: %w", err)
		}
		d := retryBackoff(n)
		fmt.Fprintf(os.Stderr, "soak produce: open queue: %v; trying again in %s\n", err, d)
		if !sleepCtx(ctx, d) {
			return nil, ctx.Err()
		}
	}
}

// producerQueue is what a producer does with the queue.
type producerQueue interface {
	EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error)
	Flows(ctx context.Context) ([]queue.FlowState, error)
}

// holdBack waits while the ordinary flows' backlog is above MaxBacklog.
func (p Producer) holdBack(ctx context.Context, q producerQueue) error {
	if p.MaxBacklog == 0 {
		return nil
	}
	for failures := 0; ; {
		cctx, cancel := context.WithTimeout(ctx, processReplyTimeout)
		n, err := backlog(cctx, q)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failures++
			d := retryBackoff(failures)
			fmt.Fprintf(os.Stderr, "soak produce: %v; trying again in %s\n", err, d)
			if !sleepCtx(ctx, d) {
				return ctx.Err()
			}
			continue
		}
		failures = 0
		if n <= int64(p.MaxBacklog) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(p.Pause, 50*time.Millisecond)):
		}
	}
}

// backlog counts the events of ordinary flows that are not acked (poison
// flows left out: their events end quarantined and stay).
func backlog(ctx context.Context, q producerQueue) (int64, error) {
	flows, err := q.Flows(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the backlog: %w", err)
	}
	var n int64
	for _, f := range flows {
		if !strings.HasPrefix(f.Flow, poisonPrefix) {
			n += f.Backlog
		}
	}
	return n, nil
}

// enqueue commits one batch at the wall clock's tick, each attempt bounded
// by processReplyTimeout. A write that waited so long for its turn that
// its tick fell more than the skew behind the mark
// (queue.ErrTimeRegression), or that gave up waiting (SQLite's
// ErrWriteTimeout), changed nothing (transient): it is tried again with a
// fresh tick, as a real-time producer must. On PostgreSQL any other error
// (the connection cut, terminated, timed out, the server restarting) is
// tried again too, after a capped backoff: the batch may have committed
// before the error (a cut at COMMIT), and enqueueing it again is harmless,
// enqueue being idempotent by event ID. On SQLite such an error ends the
// producer (no network there: it would be a bug).
func enqueue(ctx context.Context, q producerQueue, batch []queue.Event, network bool) error {
	for failures := 0; ; {
		cctx, cancel := context.WithTimeout(ctx, processReplyTimeout)
		_, err := q.EnqueueBatch(cctx, batch, clock.Wall{}.Now())
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if !transient(err) && !(network && !errors.Is(err, queue.ErrInvalid)) {
			return err
		}
		failures++
		d := retryBackoff(failures)
		if transient(err) {
			d = 10 * time.Millisecond
		}
		fmt.Fprintf(os.Stderr, "soak produce: %v; trying again in %s\n", err, d)
		if !sleepCtx(ctx, d) {
			return ctx.Err()
		}
	}
}
