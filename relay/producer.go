package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Enqueuer is what a Producer needs of a queue store: its enqueues, as
// queue.Store declares them. queuestore.Store and pgqueuestore.Store have
// them.
type Enqueuer interface {
	Enqueue(ctx context.Context, e queue.Event, now clock.Tick) (queue.Enqueued, error)
	EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error)
}

// ProducerOptions tune a Producer. The zero value of every field means its
// default.
type ProducerOptions struct {
	// Clock tells the enqueues' ticks (default clock.Wall: Unix
	// milliseconds, for a store opened with the real-time option). Use the
	// relay's clock, so that the producer and the relay agree on time.
	Clock clock.Source
	// Notify is called after an enqueue that added an event, to wake a
	// relay of the same process at once (Relay.Notify); default: none (a
	// relay elsewhere finds the work within its Options.Poll).
	Notify func()
}

// Producer enqueues events with the time of its clock, so that a program
// in real time never hands ticks by hand: Enqueue(ctx, e) is the store's
// Enqueue(ctx, e, clock.Now()). The store's own tick-taking methods stay
// for tests and tools that keep logical time. A Producer is safe for
// concurrent use when its queue and clock are (both stores, clock.Wall and
// ManualClock are).
//
// At and In make an Event.NotBefore (a scheduled event, docs/contract.md
// §7.9) from a time.Time or a delay.
type Producer struct {
	q      Enqueuer
	clk    clock.Source
	notify func()
}

// NewProducer returns a Producer that enqueues into q (nil is ErrInvalid).
func NewProducer(q Enqueuer, o ProducerOptions) (*Producer, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: nil queue for NewProducer", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	return &Producer{q: q, clk: o.Clock, notify: o.Notify}, nil
}

// Enqueue enqueues e at the clock's tick, with the store's rules and
// errors (queue.Store.Enqueue): a retry of a stored event is a Duplicate
// and changes nothing.
func (p *Producer) Enqueue(ctx context.Context, e queue.Event) (queue.Enqueued, error) {
	res, err := p.q.Enqueue(ctx, e, p.clk.Now())
	if err == nil && !res.Duplicate {
		p.wake()
	}
	return res, err
}

// EnqueueBatch enqueues es at the clock's tick in one transaction, all or
// nothing (queue.Store.EnqueueBatch).
func (p *Producer) EnqueueBatch(ctx context.Context, es []queue.Event) ([]queue.Enqueued, error) {
	res, err := p.q.EnqueueBatch(ctx, es, p.clk.Now())
	if err == nil {
		for _, r := range res {
			if !r.Duplicate {
				p.wake()
				break
			}
		}
	}
	return res, err
}

func (p *Producer) wake() {
	if p.notify != nil {
		p.notify()
	}
}

// Now returns the producer's clock's tick.
func (p *Producer) Now() clock.Tick { return p.clk.Now() }

// At returns the tick of t, for Event.NotBefore: t in Unix milliseconds
// (clock.Millis), the ticks of a queue in real time. It is for a producer
// on a wall clock; with a logical clock, use In.
func (p *Producer) At(t time.Time) clock.Tick { return clock.Millis(t) }

// In returns the tick d from the clock's now, for Event.NotBefore: the
// event is not dispatchable before it. d is counted in milliseconds (one
// tick), rounded up; d <= 0 is now (at once).
func (p *Producer) In(d time.Duration) clock.Tick { return p.clk.Now() + ticks(d) }
