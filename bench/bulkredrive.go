package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// quarantinePolicy quarantines an event at its first failure, so that a
// backlog of quarantined heads is one claim and one failed settle per event.
// Only the seeding depends on it: a redrive does not read the policy.
var quarantinePolicy = queuestore.Policy{Lease: 5, MaxAttempts: 1, BackoffBase: 2, BackoffCap: 8}

// redriveReason is the operator reason of every redrive the benchmark makes.
const redriveReason = "bench: bulk redrive"

// MakeQuarantinedTemplate writes a queue store at path holding n quarantined
// events, one per flow ("f000000" …; a quarantined head blocks its flow, so a
// flow holds at most one), closed (and so checkpointed), for
// [MeasureBulkRedrive] to copy. The queue's recorded policy has MaxAttempts 1:
// every event is enqueued with EnqueueBatch, claimed with ClaimBatch and failed
// once with SettleBatch, 500 at a time.
func MakeQuarantinedTemplate(ctx context.Context, path string, n int) (err error) {
	q, err := queuestore.Open(path, queuestore.WithPolicy(quarantinePolicy))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := q.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := LoadBacklog(ctx, q, "q", n, 1); err != nil {
		return err
	}
	const chunk = 500
	done := 0
	for {
		cs, err := q.ClaimBatch(ctx, now, chunk)
		if err != nil {
			return fmt.Errorf("quarantine: claim: %w", err)
		}
		if len(cs) == 0 {
			break
		}
		items := make([]queuestore.SettleItem, len(cs))
		for i, c := range cs {
			items[i] = queuestore.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queuestore.Result{Reason: "bench_failure"}}
		}
		rs, err := q.SettleBatch(ctx, items, now)
		if err != nil {
			return fmt.Errorf("quarantine: settle: %w", err)
		}
		for i, r := range rs {
			if r.Err != nil || r.Outcome != queuestore.Quarantined {
				return fmt.Errorf("quarantine %s: %s, %v; want quarantined", items[i].EventID, r.Outcome, r.Err)
			}
		}
		done += len(cs)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	if done != n || st.Events.Quarantined != int64(n) {
		return fmt.Errorf("quarantine: %d settled, %d quarantined; want %d", done, st.Events.Quarantined, n)
	}
	return nil
}

// BulkRedriveRound is one round of [MeasureBulkRedrive]: the rates of both
// ways of redriving the same quarantined events, in events per second.
type BulkRedriveRound struct {
	Bulk     float64 // RedriveAll with an empty filter
	OneByOne float64 // Quarantined, then one Redrive call per event
}

// MeasureBulkRedrive runs rounds rounds; in each, one fresh copy of template
// (a queue of n quarantined events, [MakeQuarantinedTemplate]) is redriven
// with one RedriveAll call, and another copy with one Redrive call per event
// (after one Quarantined call to list them, as an operator's loop must). The
// timed part is the redrive only: opening and closing a copy is not. The two
// sides alternate which goes first, round by round. Each side checks that all
// n events were redriven; a shortfall is an error, never a faster rate.
func MeasureBulkRedrive(ctx context.Context, dir, template string, n, rounds int, progress func(round int, r BulkRedriveRound)) ([]BulkRedriveRound, error) {
	var out []BulkRedriveRound
	for r := range rounds {
		sub := filepath.Join(dir, fmt.Sprintf("round%02d", r+1))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return nil, err
		}
		var res BulkRedriveRound
		sides := []func() error{
			func() (err error) {
				res.Bulk, err = timedRedrive(ctx, filepath.Join(sub, "bulk.db"), template, n, redriveAll)
				return err
			},
			func() (err error) {
				res.OneByOne, err = timedRedrive(ctx, filepath.Join(sub, "one.db"), template, n, redriveEach)
				return err
			},
		}
		if r%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return nil, fmt.Errorf("bulk redrive round %d: %w", r+1, err)
			}
		}
		if progress != nil {
			progress(r+1, res)
		}
		out = append(out, res)
		if err := os.RemoveAll(sub); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// redriver is what the bulk redrive's two ways need of a queue.
type redriver interface {
	RedriveAll(ctx context.Context, f queue.RedriveFilter, reason string, now clock.Tick) ([]queue.Redriven, error)
	Quarantined(ctx context.Context) ([]queue.QuarantinedEvent, error)
	Redrive(ctx context.Context, eventID string, generation int64, reason string, now clock.Tick) error
}

// timedRedrive copies template to path, opens it, and times redrive on it; it
// returns events redriven per second.
func timedRedrive(ctx context.Context, path, template string, n int, redrive func(context.Context, redriver) (int, error)) (rate float64, err error) {
	if err := copyFile(template, path); err != nil {
		return 0, err
	}
	q, err := queuestore.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := q.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	start := time.Now()
	got, err := redrive(ctx, q)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if got != n {
		return 0, fmt.Errorf("redrove %d events, want %d", got, n)
	}
	return float64(n) / d.Seconds(), nil
}

// redriveAll redrives every quarantined event with one RedriveAll call.
func redriveAll(ctx context.Context, q redriver) (int, error) {
	rs, err := q.RedriveAll(ctx, queue.RedriveFilter{}, redriveReason, now)
	return len(rs), err
}

// redriveEach lists the quarantined events and redrives them one call each.
func redriveEach(ctx context.Context, q redriver) (int, error) {
	qs, err := q.Quarantined(ctx)
	if err != nil {
		return 0, err
	}
	for _, e := range qs {
		if err := q.Redrive(ctx, e.EventID, e.Generation, redriveReason, now); err != nil {
			return 0, err
		}
	}
	return len(qs), nil
}
