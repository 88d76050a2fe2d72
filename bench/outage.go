package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/inbox"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
	relayrt "github.com/fairrelay/fairrelay/relay"
)

// OutagePolicy is the queue policy of the outage case: the real-time policy
// 'relayctl relay' gives a new queue (lease 30 s, the schedule
// 1s,5s,30s,2m,10m,30m,1h,2h,4h, retry-after cap 1 h;
// docs/decisions/relay-real-time-schedule.md).
func OutagePolicy() queuestore.Policy {
	p := queuestore.Policy{Lease: 30_000, MaxAttempts: 3, BackoffBase: 1_000, BackoffCap: 60_000,
		Fairness: queuestore.FairMinServed, RetryAfterCap: 3_600_000}
	return p.WithSchedule(1_000, 5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000)
}

// OutageResult is one round of RuntimeOutage.
type OutageResult struct {
	Events int64 // the backlog
	// AfterReturn is the events delivered after the destination returned,
	// Drain the time from its return to the last of them (the breaker's
	// next probe included), FirstAfter the time to the first of them.
	AfterReturn       int64
	Drain, FirstAfter time.Duration
	// Charged is the failed attempts of the run (every one of them during
	// the outage): Retried plus Quarantined. Probes is the breaker's
	// probes, Opens the times it opened.
	Charged, Probes, Opens int64
	Quarantined            int64
}

// Rate is the events delivered per second after the destination returned.
func (r OutageResult) Rate() float64 { return float64(r.AfterReturn) / r.Drain.Seconds() }

// RuntimeOutage measures the relay runtime through an outage of its HTTP
// destination: a backlog of flows × perFlow events on a queue with
// OutagePolicy, delivered by relay.NewHTTP (concurrency 16, batch 64, the
// default breaker) to a loopback receiver server (inbox.Server over a
// receiverstore). Once a tenth of the backlog is delivered the server
// closes its listener and its connections (connection refused) for down,
// then listens again on the same address; the relay drains the rest by
// itself. Nothing in it is timed but the drain after the return.
func RuntimeOutage(ctx context.Context, dir string, flows, perFlow int, down time.Duration) (OutageResult, error) {
	var res OutageResult
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithPolicy(OutagePolicy()), queuestore.WithRealTime(clock.Wall{}, 1000))
	if err != nil {
		return res, err
	}
	defer q.Close()
	if err := LoadBacklog(ctx, q, "o", flows, perFlow); err != nil {
		return res, err
	}
	res.Events = int64(flows * perFlow)
	rs, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		return res, err
	}
	defer rs.Close()
	b := inbox.NewBatcher(rs, inbox.BatcherOptions{})
	defer b.Close()
	secret := []byte("bench-secret")
	handler := inbox.NewServer(b, secret, inbox.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	addr := ln.Addr().String()
	srv := &http.Server{Handler: handler}
	go srv.Serve(ln)
	defer func() { srv.Close() }()
	h, err := relayrt.NewHTTP("http://"+addr+"/events", secret, relayrt.HTTPOptions{MaxIdleConns: 16})
	if err != nil {
		return res, err
	}
	rl, err := relayrt.New(q, h, relayrt.Options{Concurrency: 16, Batch: 64, Poll: time.Second, ShutdownGrace: 30 * time.Second})
	if err != nil {
		return res, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- rl.Run(rctx) }()
	wait := func(limit time.Duration, cond func(relayrt.Totals) bool) error {
		end := time.Now().Add(limit)
		for !cond(rl.Totals()) {
			select {
			case err := <-ran:
				return fmt.Errorf("relay ended early: %v", err)
			case <-time.After(2 * time.Millisecond):
			}
			if time.Now().After(end) {
				return fmt.Errorf("not after %s: totals %+v, breaker %+v", limit, rl.Totals(), rl.Breaker())
			}
		}
		return nil
	}
	if err := wait(time.Minute, func(t relayrt.Totals) bool { return t.Delivered >= res.Events/10 }); err != nil {
		return res, fmt.Errorf("before the outage: %w", err)
	}
	srv.Close() // the outage: connection refused
	time.Sleep(down)
	var ln2 net.Listener
	for ln2 == nil { // the address is ours again at once, but allow a moment
		if ln2, err = net.Listen("tcp", addr); err != nil {
			time.Sleep(10 * time.Millisecond)
			ln2 = nil
		}
	}
	srv = &http.Server{Handler: handler}
	back := time.Now()
	at := rl.Totals().Delivered
	go srv.Serve(ln2)
	if err := wait(2*time.Minute, func(t relayrt.Totals) bool { return t.Delivered > at }); err != nil {
		return res, fmt.Errorf("after the return: %w", err)
	}
	res.FirstAfter = time.Since(back)
	if err := wait(5*time.Minute, func(t relayrt.Totals) bool { return t.Delivered+t.Quarantined >= res.Events }); err != nil {
		return res, fmt.Errorf("draining after the return: %w", err)
	}
	res.Drain = time.Since(back)
	cancel()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	t, br := rl.Totals(), rl.Breaker()
	res.AfterReturn = t.Delivered - at
	res.Charged = t.Retried + t.Quarantined
	res.Quarantined = t.Quarantined
	res.Probes, res.Opens = br.Probes, br.Opens
	return res, nil
}
