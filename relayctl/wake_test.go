package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// fakeWaiter returns nil from Wait n times, then err.
type fakeWaiter struct {
	n      int
	err    error
	closed *int
}

func (f *fakeWaiter) Wait(ctx context.Context) error {
	if f.n == 0 {
		return f.err
	}
	f.n--
	return nil
}

func (f *fakeWaiter) Close() error { *f.closed++; return nil }

// wakeOnNotify never gives up: failed listens and lost listeners are
// retried with the backoff's n counting failures in a row (reset by a
// listen that works), every wake-up and every (re)listen notifies, each
// listener is closed, and it returns once ctx ends.
func TestWakeOnNotify_ReconnectsWithBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		closed, notified, listens int
		waits                     []int
	)
	lost := errors.New("connection lost")
	script := []func() (waiter, error){
		func() (waiter, error) { return nil, errors.New("refused") },
		func() (waiter, error) { return nil, errors.New("refused") },
		func() (waiter, error) { return &fakeWaiter{n: 3, err: lost, closed: &closed}, nil },
		func() (waiter, error) { return nil, errors.New("refused") },
		func() (waiter, error) { return &fakeWaiter{n: 1, err: lost, closed: &closed}, nil },
	}
	listen := func(context.Context) (waiter, error) {
		listens++
		if listens > len(script) {
			cancel()
			return nil, context.Canceled
		}
		return script[listens-1]()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	wakeOnNotify(ctx, listen, func() { notified++ }, log, func(n int) time.Duration { waits = append(waits, n); return 0 })
	// Listens 1, 2 fail (waits 1, 2); 3 works: notify + 3 wake-ups, lost
	// (wait 1); 4 fails (wait 2); 5 works: notify + 1, lost (wait 1); 6
	// ends it.
	if want := []int{1, 2, 1, 2, 1}; !equalInts(waits, want) {
		t.Errorf("backoff calls = %v, want %v", waits, want)
	}
	if notified != 4+2 || closed != 2 || listens != 6 {
		t.Errorf("notified %d, closed %d, listens %d; want 6, 2, 6", notified, closed, listens)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// wakeBackoff doubles from 100 ms and stays at 5 s.
func TestWakeBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond,
		6: 3200 * time.Millisecond, 7: 5 * time.Second, 50: 5 * time.Second} {
		if got := wakeBackoff(n); got != want {
			t.Errorf("wakeBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}
