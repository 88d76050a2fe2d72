package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// now is the one tick every store case uses: leases (now + 5) never run out
// and the clock mark never refuses it, so no wait is ever simulated.
const now clock.Tick = 1

var body = []byte(`{"delta": 1}`)

// BatchEnqueuer is what LoadBacklog needs of a queue: *queuestore.Store and
// *pgqueuestore.Store both have it.
type BatchEnqueuer interface {
	EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error)
}

// ClaimSettler is what a one-at-a-time drain needs of a queue (the
// claim+settle cases, [QueueClaimant]): Claim and Settle, as
// queue.Store declares them; both backends have them.
type ClaimSettler interface {
	Claim(ctx context.Context, now clock.Tick) (queue.Claim, bool, error)
	Settle(ctx context.Context, eventID string, generation int64, r queue.Result, now clock.Tick) (queue.Outcome, error)
}

// relayQueue is what the relay cycles need of a queue.
type relayQueue interface {
	ClaimSettler
	cycleQueue
	Enqueue(ctx context.Context, e queue.Event, now clock.Tick) (queue.Enqueued, error)
	Close() error
}

// relayReceiver is what the relay cycles need of a receiver.
type relayReceiver interface {
	Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error)
	ReceiveBatch(ctx context.Context, ms []receiver.Message) ([]receiver.BatchResult, error)
	Close() error
}

// LoadBacklog enqueues perFlow events in each of flows flows ("f000000" …),
// round by round (one event of every flow, then the next), with EnqueueBatch
// in transactions of up to 250 events. IDs are prefix + a counter.
//
// 250, not 1,000: pgqueuestore's EnqueueBatch takes a transaction lock per
// flow and per event ID, and a 1,000-event batch (2,000 locks) ran the
// server's shared lock table (max_locks_per_transaction 64 × 100
// connections) out of memory while other sessions held thousands.
func LoadBacklog(ctx context.Context, q BatchEnqueuer, prefix string, flows, perFlow int) error {
	return loadBacklogTo(ctx, q, prefix, flows, perFlow, nil)
}

// loadBacklogTo is LoadBacklog whose flow f delivers to destination dest(f)
// (nil: the default destination).
func loadBacklogTo(ctx context.Context, q BatchEnqueuer, prefix string, flows, perFlow int, dest func(f int) string) error {
	const chunk = 250
	batch := make([]queue.Event, 0, chunk)
	n := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := q.EnqueueBatch(ctx, batch, now)
		if err != nil {
			return fmt.Errorf("load backlog: %w", err)
		}
		for i, r := range res {
			if r.Duplicate {
				return fmt.Errorf("load backlog: %s is a duplicate", batch[i].ID)
			}
		}
		batch = batch[:0]
		return nil
	}
	for range perFlow {
		for f := range flows {
			n++
			e := queue.Event{ID: fmt.Sprintf("%s%d", prefix, n), Flow: flowName(f), Body: body}
			if dest != nil {
				e.Destination = dest(f)
			}
			batch = append(batch, e)
			if len(batch) == chunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

func flowName(i int) string { return fmt.Sprintf("f%06d", i) }

// ClaimSettle is one Claim and one successful Settle per Step, on a backlog of
// flows flows loaded with [LoadBacklog], perFlow events each.
func ClaimSettle(flows, perFlow int) Case {
	return sqliteClaimSettle(fmt.Sprintf("claim+settle/%d", flows), func(ctx context.Context, q *queuestore.Store) error {
		return LoadBacklog(ctx, q, "e", flows, perFlow)
	})
}

// sqliteClaimSettle is a claim+settle case named name on a new SQLite
// queue that load fills.
func sqliteClaimSettle(name string, load func(ctx context.Context, q *queuestore.Store) error) Case {
	return Case{
		Name: name,
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
			if err != nil {
				return nil, err
			}
			if err := load(ctx, q); err != nil {
				q.Close()
				return nil, err
			}
			return &claimSettle{q: q}, nil
		},
	}
}

// claimSettle is a claim+settle case on either backend; Close closes (or,
// on PostgreSQL, drops) the queue.
type claimSettle struct {
	q interface {
		ClaimSettler
		Close() error
	}
}

// ErrBacklogEmpty reports a backlog drained before the measurement ended: the
// case was set up too small for the machine.
var ErrBacklogEmpty = errors.New("bench: backlog drained during the measurement; load a larger one")

// Step claims one head and acks it.
func (c *claimSettle) Step(ctx context.Context) (int, error) {
	cl, ok, err := c.q.Claim(ctx, now)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, ErrBacklogEmpty
	}
	out, err := c.q.Settle(ctx, cl.EventID, cl.Generation, queue.Result{OK: true}, now)
	if err != nil {
		return 0, err
	}
	if out != queue.Acked {
		return 0, fmt.Errorf("settle %s: outcome %s, want acked", cl.EventID, out)
	}
	return 1, nil
}

// Close closes the queue.
func (c *claimSettle) Close() error { return c.q.Close() }

// relay is a queue and a receiver in one directory.
type relay struct {
	q     relayQueue
	r     relayReceiver
	n     int // events enqueued so far
	flows int
}

func openRelay(dir string, flows int) (*relay, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	q, err := queuestore.Open(filepath.Join(dir, queueFile))
	if err != nil {
		return nil, err
	}
	r, err := receiverstore.Open(filepath.Join(dir, receiverFile))
	if err != nil {
		q.Close()
		return nil, err
	}
	return &relay{q: q, r: r, flows: flows}, nil
}

// Close closes both stores.
func (rl *relay) Close() error { return errors.Join(rl.q.Close(), rl.r.Close()) }

// RelayCycle is the single-event relay cycle: Enqueue → Claim → Receive →
// Settle, four durable commits per event, one event per Step, spread over 16
// flows.
func RelayCycle() Case {
	return Case{
		Name: "relay/1-by-1",
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			rl, err := openRelay(dir, 16)
			if err != nil {
				return nil, err
			}
			return &single{relay: rl}, nil
		},
	}
}

type single struct {
	*relay
	e queue.Event // the event of the current Step
	c queue.Claim // its claim
}

// Step relays one event, one operation at a time.
func (s *single) Step(ctx context.Context) (int, error) {
	if err := runPhases(ctx, s.phases()); err != nil {
		return 0, err
	}
	return 1, nil
}

// phases are Step's four operations.
func (s *single) phases() []phase {
	return []phase{
		{"Enqueue", queueFile, func(ctx context.Context) error {
			s.n++
			s.e = queue.Event{ID: fmt.Sprintf("e%d", s.n), Flow: flowName(s.n % s.flows), Body: body}
			_, err := s.q.Enqueue(ctx, s.e, now)
			return err
		}},
		{"Claim", queueFile, func(ctx context.Context) error {
			c, ok, err := s.q.Claim(ctx, now)
			if err != nil {
				return err
			}
			if !ok || c.EventID != s.e.ID {
				return fmt.Errorf("claim after enqueueing %s: got %q, %v", s.e.ID, c.EventID, ok)
			}
			s.c = c
			return nil
		}},
		{"Receive", receiverFile, func(ctx context.Context) error {
			out, err := s.r.Receive(ctx, receiver.Message{ID: s.c.EventID, Flow: s.c.Flow, Seq: s.c.Seq, Body: s.c.Body})
			if err != nil {
				return err
			}
			if out != receiver.Accepted {
				return fmt.Errorf("receive %s: %s, want accepted", s.c.EventID, out)
			}
			return nil
		}},
		{"Settle", queueFile, func(ctx context.Context) error {
			so, err := s.q.Settle(ctx, s.c.EventID, s.c.Generation, queue.Result{OK: true}, now)
			if err != nil {
				return err
			}
			if so != queue.Acked {
				return fmt.Errorf("settle %s: %s, want acked", s.c.EventID, so)
			}
			return nil
		}},
	}
}

// BatchedRelayCycle is the batched relay cycle: EnqueueBatch → ClaimBatch →
// ReceiveBatch → SettleBatch, four durable commits per batch of size events,
// one event in each of size flows, size events per Step.
func BatchedRelayCycle(size int) Case {
	return Case{
		Name: fmt.Sprintf("relay/batch-%d", size),
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			rl, err := openRelay(dir, size)
			if err != nil {
				return nil, err
			}
			return &batched{relay: rl, size: size,
				es: make([]queue.Event, size), ms: make([]receiver.Message, size),
				items: make([]queue.SettleItem, size)}, nil
		},
	}
}

type batched struct {
	*relay
	size  int
	es    []queue.Event
	ms    []receiver.Message
	items []queue.SettleItem
}

// Step relays one batch of size events.
func (b *batched) Step(ctx context.Context) (int, error) {
	if err := runPhases(ctx, b.phases()); err != nil {
		return 0, err
	}
	return b.size, nil
}

// phases are Step's four operations.
func (b *batched) phases() []phase {
	return []phase{
		{"EnqueueBatch", queueFile, func(ctx context.Context) error {
			for i := range b.es {
				b.n++
				b.es[i] = queue.Event{ID: fmt.Sprintf("e%d", b.n), Flow: flowName(i), Body: body}
			}
			_, err := b.q.EnqueueBatch(ctx, b.es, now)
			return err
		}},
		{"ClaimBatch", queueFile, func(ctx context.Context) error {
			cs, err := b.q.ClaimBatch(ctx, now, b.size)
			if err != nil {
				return err
			}
			if len(cs) != b.size {
				return fmt.Errorf("claim batch: %d claims, want %d", len(cs), b.size)
			}
			for i, c := range cs {
				b.ms[i] = receiver.Message{ID: c.EventID, Flow: c.Flow, Seq: c.Seq, Body: c.Body}
				b.items[i] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}}
			}
			return nil
		}},
		{"ReceiveBatch", receiverFile, func(ctx context.Context) error {
			rs, err := b.r.ReceiveBatch(ctx, b.ms)
			if err != nil {
				return err
			}
			return allAccepted(rs)
		}},
		{"SettleBatch", queueFile, func(ctx context.Context) error {
			ss, err := b.q.SettleBatch(ctx, b.items, now)
			if err != nil {
				return err
			}
			return allAcked(ss)
		}},
	}
}

// allAccepted is nil when every item of a ReceiveBatch was accepted, else
// an error naming the first that was not.
func allAccepted(rs []receiver.BatchResult) error {
	for i, r := range rs {
		if r.Err != nil || r.Outcome != receiver.Accepted {
			return fmt.Errorf("receive batch item %d: %s, %v, want accepted", i, r.Outcome, r.Err)
		}
	}
	return nil
}

// allAcked is nil when every item of a SettleBatch was acked, else an
// error naming the first that was not.
func allAcked(ss []queue.SettleResult) error {
	for i, s := range ss {
		if s.Err != nil || s.Outcome != queue.Acked {
			return fmt.Errorf("settle batch item %d: %s, %v, want acked", i, s.Outcome, s.Err)
		}
	}
	return nil
}
