package main

import (
	"context"
	"log/slog"
	"time"
)

// waiter is a wake-up listener: *pgqueuestore.Listener. Wait returns when a
// wake-up arrives, or with an error (the connection broke, ctx ended).
type waiter interface {
	Wait(ctx context.Context) error
	Close() error
}

// backoff is the reconnect schedule of wakeOnNotify: the wait before the
// n-th attempt in a row (n from 1).
type backoff func(n int) time.Duration

// wakeBackoff waits 100 ms before the first reconnect, doubling up to 5 s.
// A relay without its listener still finds work within --poll, so nothing
// is lost while it waits; the cap only bounds how long wake-ups stay off.
func wakeBackoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}

// wakeOnNotify listens for the queue's wake-ups until ctx ends and calls
// notify for each: another process's enqueue, redrive or ack wakes this
// relay at once instead of at its next poll. It never gives up and never
// panics: when listening fails or the connection breaks, it logs, waits
// (wait(1), wait(2), ... until a listen succeeds) and listens again. After
// each successful (re)listen it calls notify once, since a wake-up sent
// while it was not listening is lost (a NOTIFY reaches only the sessions
// listening when it commits).
func wakeOnNotify(ctx context.Context, listen func(context.Context) (waiter, error), notify func(), log *slog.Logger, wait backoff) {
	failures := 0
	// retry logs why, waits wait(failures) and reports whether ctx still
	// runs.
	retry := func(msg string, err error) bool {
		failures++
		d := wait(failures)
		log.Warn(msg, "err", err, "retry_in", d)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		l, err := listen(ctx)
		if err != nil {
			if ctx.Err() != nil || !retry("wake-ups: listen failed; relying on --poll until it works again", err) {
				return
			}
			continue
		}
		if failures > 0 {
			log.Info("wake-ups: listening again", "after_failures", failures)
		}
		failures = 0
		notify()
		for {
			err = l.Wait(ctx)
			if err != nil {
				break
			}
			notify()
		}
		_ = l.Close()
		if ctx.Err() != nil || !retry("wake-ups: listener lost; relying on --poll until it is back", err) {
			return
		}
	}
}
