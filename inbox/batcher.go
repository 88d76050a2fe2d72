package inbox

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/webhook"
)

// BatchReceiver is a Receiver that can also receive many messages in one
// transaction: ReceiveBatch gives each message the result that successive
// Receive calls, in slice order, would give, and its error is for the batch
// as a whole (nothing changed). *receiverstore.Store and
// *pgreceiverstore.Store have it.
type BatchReceiver interface {
	Receiver
	ReceiveBatch(ctx context.Context, ms []receiver.Message) ([]receiver.BatchResult, error)
}

// BatcherOptions tunes NewBatcher. The zero value is the default.
type BatcherOptions struct {
	// MaxBatch is the most messages one ReceiveBatch takes; <= 0 means
	// DefaultMaxBatch.
	MaxBatch int
	// Linger is how long a batch, once it has taken every request already
	// waiting (and the rest of any wave it holds part of, see WaveWait),
	// waits for more while it has fewer than MaxBatch. 0 (the default,
	// DefaultLinger) is no wait: a batch is then what arrived while the
	// previous one committed, with the yield and the wave wait below, which
	// under a relay's concurrent handlers is already most of them. A
	// negative value is 0.
	Linger time.Duration
	// WaveWait is how long a batch that holds part of a wave (the
	// handlers a relay started together: webhook.WaveOf (relay.WaveOf) of
	// the callers' contexts, or a fairrelay-wave header a Server read) waits for the
	// rest of the wave before it commits; 0 means DefaultWaveWait, a
	// negative value no wait. The wait ends as soon as every wave the batch
	// holds part of is complete. The bound is paid when some member never
	// arrives: its handler did not call Receive (its lease was lost, it
	// delivered nothing or elsewhere, its context ended first), or, over
	// HTTP, its request went to another server or was refused before
	// Receive.
	WaveWait time.Duration
}

// Defaults of BatcherOptions.
const (
	DefaultMaxBatch = 64
	// DefaultLinger is no linger: measured against 1 ms and 2 ms
	// (docs/decisions/inbox-group-commit.md), waiting gained
	// nothing measurable in throughput and costs a lone caller that much
	// latency on every Receive.
	DefaultLinger time.Duration = 0
	// DefaultWaveWait is long enough for a relay's handlers, started
	// together, to reach the Batcher (microseconds, unless a core is
	// busy), and short next to a handler's lease.
	DefaultWaveWait = time.Millisecond
)

// ErrClosed is the error of a Batcher's Receive after Close.
var ErrClosed = errors.New("inbox: batcher closed")

// Batcher is a Receiver with group commit: concurrent Receive calls are
// gathered into one ReceiveBatch of the underlying BatchReceiver, so one
// transaction and one commit (one fsync) serve them all. Each caller gets
// the outcome and error its own Receive would have given, had the calls run
// one after the other in the order they reached the Batcher.
//
// A batch starts with the first request and takes every request already
// waiting; while it has fewer than MaxBatch it then yields the processor
// once (runtime.Gosched), so that callers ready to run, such as a relay's
// handlers started together, hand theirs over too, and takes those. When
// the batch holds part of a wave (webhook.WaveOf, or a Server's
// fairrelay-wave header) that no earlier batch held, it waits for the rest
// of that wave, up to WaveWait; then it waits up to Linger for more. One
// batch runs at a time; requests arriving meanwhile wait for the next one.
//
// When ReceiveBatch fails as a whole (an SQL error, or a receiverstore
// effect's error wrapping receiver.ErrEffect), nothing has changed; the
// Batcher then receives each message of that batch alone, in order, with
// Receive, so that one failing message (one effect's error) fails only its
// own caller and the others are received as they would have been. A
// message is thus applied once or not at all, never twice.
//
// Use it with relay.NewLocal for a relay that delivers in process:
// relay.NewLocal(inbox.NewBatcher(store, inbox.BatcherOptions{})).
type Batcher struct {
	r        BatchReceiver
	max      int
	linger   time.Duration
	waveWait time.Duration

	// The loop's: the waves of recent batches (a wave that has had a
	// batch is not waited for again), a ring of them for eviction, and
	// scratch space for counting a batch's waves.
	seen   map[waveID]struct{}
	ring   []waveID
	next   int
	counts []waveCount

	mu     sync.RWMutex
	closed bool
	reqs   chan *batchReq
	done   chan struct{}
}

type batchReq struct {
	ctx   context.Context
	m     receiver.Message
	wave  waveID        // the caller's wave; zero when none
	reply chan batchRes // buffered: the loop never blocks on a caller
}

// waveID identifies the wave of a request: a relay's in this process
// (webhook.WaveOf of its context), or one a Server read from a request's
// fairrelay-wave header. The zero waveID is none.
type waveID struct {
	local  webhook.Wave
	remote string
	size   int
}

// remoteWaveKey is the context key of a waveID set by a Server.
type remoteWaveKey struct{}

// waveOf returns the wave of a request's context.
func waveOf(ctx context.Context) waveID {
	if w, ok := webhook.WaveOf(ctx); ok {
		return waveID{local: w, size: w.Size()}
	}
	w, _ := ctx.Value(remoteWaveKey{}).(waveID)
	return w
}

// waveCount is how many requests of a wave a batch holds.
type waveCount struct {
	w waveID
	n int
}

// seenWaves is how many recent waves a Batcher remembers.
const seenWaves = 256

type batchRes struct {
	out receiver.Outcome
	err error
}

// NewBatcher starts a Batcher over r; Close stops it (r stays open).
func NewBatcher(r BatchReceiver, o BatcherOptions) *Batcher {
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Linger < 0 {
		o.Linger = 0
	}
	if o.WaveWait == 0 {
		o.WaveWait = DefaultWaveWait
	}
	b := &Batcher{r: r, max: o.MaxBatch, linger: o.Linger, waveWait: o.WaveWait,
		seen: make(map[waveID]struct{}, seenWaves), ring: make([]waveID, seenWaves),
		reqs: make(chan *batchReq, o.MaxBatch), done: make(chan struct{})}
	go b.loop()
	return b
}

// Receive hands m to the next batch and waits for its result. A context
// that ends before the batch starts withdraws m (nothing changes) and
// returns the context's error; one that ends while its batch runs returns
// the context's error at once, and m may then have been received, as with
// a Receive canceled during its commit (receiving it again gives
// duplicate). After Close, Receive returns ErrClosed.
func (b *Batcher) Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error) {
	q := &batchReq{ctx: ctx, m: m, wave: waveOf(ctx), reply: make(chan batchRes, 1)}
	err := ctx.Err()
	if err == nil {
		err = b.handOver(ctx, q)
	}
	if err != nil {
		return "", err
	}
	select {
	case res := <-q.reply:
		return res.out, res.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// handOver puts q on the request channel, unless the Batcher is closed or
// ctx ends first.
func (b *Batcher) handOver(ctx context.Context, q *batchReq) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	select {
	case b.reqs <- q:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops taking requests, receives those already handed over and
// returns when they all have their results. It does not close the
// underlying receiver. Close may be called more than once.
func (b *Batcher) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.reqs)
	}
	b.mu.Unlock()
	<-b.done
	return nil
}

func (b *Batcher) loop() {
	defer close(b.done)
	batch := make([]*batchReq, 0, b.max)
	ms := make([]receiver.Message, 0, b.max)
	var timer *time.Timer
	// After Close the channel still yields what was handed over before it,
	// so the loop drains it batch by batch and stops when it is empty.
	for {
		q, ok := <-b.reqs
		if !ok {
			return
		}
		batch = append(batch[:0], q)
		open := b.take(&batch)
		if open && len(batch) < b.max {
			// Callers that are runnable now (a relay that has just
			// started a wave of handlers) get one turn of the scheduler
			// to hand their requests over: with a processor idle a yield
			// costs microseconds, a commit of its own an fsync. (With
			// every processor busy the batch may wait for a preemption.)
			runtime.Gosched()
			open = b.take(&batch)
		}
		if open && b.waveWait > 0 && len(batch) < b.max && b.partWave(batch) {
			timer = reset(timer, b.waveWait)
			for len(batch) < b.max && b.partWave(batch) && b.await(&batch, timer) {
			}
			timer.Stop()
		}
		if open && b.linger > 0 && len(batch) < b.max {
			timer = reset(timer, b.linger)
			for len(batch) < b.max && b.await(&batch, timer) {
			}
			timer.Stop()
		}
		if b.waveWait > 0 {
			b.remember(batch)
		}
		ms = b.run(batch, ms[:0])
	}
}

// reset returns t, or a new timer when t is nil, set to fire after d.
func reset(t *time.Timer, d time.Duration) *time.Timer {
	if t == nil {
		return time.NewTimer(d)
	}
	t.Reset(d)
	return t
}

// await appends the next request and reports true, or reports false when
// t fires first or the request channel is closed (and empty).
func (b *Batcher) await(batch *[]*batchReq, t *time.Timer) bool {
	select {
	case q, ok := <-b.reqs:
		if !ok {
			return false
		}
		*batch = append(*batch, q)
		return true
	case <-t.C:
		return false
	}
}

// partWave reports whether batch holds some, not all, of a wave that no
// earlier batch held. It recounts the batch (at most MaxBatch requests in
// a few waves) at every arrival during the wait.
func (b *Batcher) partWave(batch []*batchReq) bool {
	b.counts = b.counts[:0]
	for _, q := range batch {
		if q.wave == (waveID{}) {
			continue
		}
		if _, ok := b.seen[q.wave]; ok {
			continue
		}
		i := 0
		for i < len(b.counts) && b.counts[i].w != q.wave {
			i++
		}
		if i == len(b.counts) {
			b.counts = append(b.counts, waveCount{w: q.wave})
		}
		b.counts[i].n++
	}
	for _, c := range b.counts {
		if c.n < c.w.size {
			return true
		}
	}
	return false
}

// remember marks the waves of batch as seen, forgetting the oldest beyond
// seenWaves.
func (b *Batcher) remember(batch []*batchReq) {
	for _, q := range batch {
		if q.wave == (waveID{}) {
			continue
		}
		if _, ok := b.seen[q.wave]; ok {
			continue
		}
		delete(b.seen, b.ring[b.next])
		b.ring[b.next] = q.wave
		b.next = (b.next + 1) % len(b.ring)
		b.seen[q.wave] = struct{}{}
	}
}

// take appends the requests already waiting, up to b.max, and reports
// whether the request channel is still open.
func (b *Batcher) take(batch *[]*batchReq) bool {
	for len(*batch) < b.max {
		select {
		case q, ok := <-b.reqs:
			if !ok {
				return false
			}
			*batch = append(*batch, q)
		default:
			return true
		}
	}
	return true
}

// run receives batch and answers every caller; ms is scratch space for
// the messages, returned for reuse.
func (b *Batcher) run(batch []*batchReq, ms []receiver.Message) []receiver.Message {
	// A caller whose context ended before the batch starts is withdrawn:
	// it has already returned, and nothing of its message changes.
	live := batch[:0]
	for _, q := range batch {
		if err := q.ctx.Err(); err != nil {
			q.reply <- batchRes{err: err}
			continue
		}
		live = append(live, q)
		ms = append(ms, q.m)
	}
	switch len(live) {
	case 0:
		return ms
	case 1:
		q := live[0]
		out, err := b.r.Receive(q.ctx, q.m)
		q.reply <- batchRes{out: out, err: err}
		return ms
	}
	// The batch is shared: no one caller's cancellation may roll back the
	// others' messages.
	rs, err := b.r.ReceiveBatch(context.Background(), ms)
	if err == nil && len(rs) != len(live) {
		// A broken BatchReceiver: what it did is unknown, so every
		// caller gets an error (a retry is safe: receiving is idempotent).
		err = fmt.Errorf("inbox: ReceiveBatch returned %d results for %d messages", len(rs), len(live))
		for _, q := range live {
			q.reply <- batchRes{err: err}
		}
		return ms
	}
	if err == nil {
		for i, q := range live {
			q.reply <- batchRes{out: rs[i].Outcome, err: rs[i].Err}
		}
		return ms
	}
	// The batch failed as a whole and changed nothing: each message alone,
	// in order, so that a failure is its own caller's only.
	for _, q := range live {
		out, err := b.r.Receive(q.ctx, q.m)
		q.reply <- batchRes{out: out, err: err}
	}
	return ms
}
