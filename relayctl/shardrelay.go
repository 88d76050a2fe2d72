package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
)

// relayShards opens a sharded --queue for 'relayctl relay': every member in
// real time with skew, the writer's hold taken for the relay's life, and on
// PostgreSQL a listener over every shard's wake-ups. ok is false when
// --queue is not a sharded queue (the relay opens a plain one).
func (e *env) relayShards(skew clock.Tick) (q relayQueue, listen func(context.Context) (waiter, error), ok bool, err error) {
	s, err := e.shardedStore(shardMode{src: clock.Wall{}, skew: skew, minConns: 5, hold: true})
	if errors.Is(err, errNotSharded) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, true, fmt.Errorf("open sharded queue %s: %w", shown(e.queuePath), err)
	}
	if s.set.pg {
		listen = func(ctx context.Context) (waiter, error) { return listenAll(ctx, s.set) }
	}
	return s, listen, true, nil
}

// webShards opens a sharded --queue for 'relayctl web', in real time when
// the queue runs in real time (its clock mark is Unix milliseconds, or
// --clock wall). ok is false when --queue is not a sharded queue.
func (e *env) webShards() (q shardedLib, realTime, ok bool, err error) {
	s, err := e.shardedStore(shardMode{hold: true})
	if errors.Is(err, errNotSharded) {
		return shardedLib{}, false, false, nil
	}
	if err != nil {
		return shardedLib{}, false, true, fmt.Errorf("open sharded queue %s: %w", shown(e.queuePath), err)
	}
	mark, err := s.ClockMark(e.ctx)
	if err != nil {
		return shardedLib{}, false, true, errors.Join(fmt.Errorf("read the clock mark: %w", err), s.Close())
	}
	if !e.realTime(mark) {
		return s, false, true, nil
	}
	if err := s.Close(); err != nil {
		return shardedLib{}, false, true, err
	}
	s, err = e.shardedStore(shardMode{src: e.clock.wall, skew: e.clock.skew, hold: true})
	if err != nil {
		return shardedLib{}, false, true, fmt.Errorf("open sharded queue %s in real time: %w", shown(e.queuePath), err)
	}
	return s, true, true, nil
}

// fanIn is one waiter over several: Wait returns when any of them hears a
// wake-up, or with the first error (then wakeOnNotify closes it and
// listens again on every shard).
type fanIn struct {
	cancel context.CancelFunc
	wake   chan struct{}
	errs   chan error
	ws     []*pgqueuestore.Listener
	wg     sync.WaitGroup
}

// listenAll listens for the wake-ups of every shard of a PostgreSQL set.
func listenAll(ctx context.Context, set *shardSet) (waiter, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &fanIn{cancel: cancel, wake: make(chan struct{}, 1), errs: make(chan error, len(set.members))}
	for i, m := range set.members {
		l, err := m.(*pgqueuestore.Store).Listen(ctx)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("shard %s: %w", set.names[i], err), f.Close())
		}
		f.ws = append(f.ws, l)
	}
	for _, l := range f.ws {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				if err := l.Wait(ctx); err != nil {
					f.errs <- err
					return
				}
				select {
				case f.wake <- struct{}{}:
				default: // a wake-up is already pending
				}
			}
		}()
	}
	return f, nil
}

// Wait returns at the next wake-up of any shard.
func (f *fanIn) Wait(ctx context.Context) error {
	select {
	case <-f.wake:
		return nil
	case err := <-f.errs:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops every shard's listener, once its goroutine has stopped
// using it.
func (f *fanIn) Close() error {
	f.cancel()
	f.wg.Wait()
	var errs []error
	for _, l := range f.ws {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// registerShards adds the fairrelay_shards gauge, the number of shards of
// the relay's queue (1 for a plain queue), to reg.
func registerShards(reg *prometheus.Registry, q relayQueue) {
	n := 1
	if s, ok := q.(shardedLib); ok {
		n = s.Count()
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fairrelay_shards",
		Help: "Number of shards of the relay's queue (docs/scale.md); 1 for a queue that is not sharded.",
	}, func() float64 { return float64(n) }))
}
