package queuestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
)

const (
	// qNextDueReady finds one flow whose head is dispatchable already
	// (one seek into flows_due or flows_ready), with the clock mark.
	qNextDueReady = `SELECT m.clock_mark FROM meta AS m WHERE m.id = 1
    AND EXISTS (SELECT 1 FROM flows WHERE ready = 1)`

	// qNextDueWaiting is the earliest ready_at of the flows whose head waits
	// for a tick (flows_due: the first entry of its ready = 0 range past NULL).
	qNextDueWaiting = `SELECT ready_at FROM flows WHERE ready = 0 AND ready_at IS NOT NULL
ORDER BY ready_at LIMIT 1`

	// qOldestReady is the earliest ready_at of the flows marked
	// dispatchable (flows_due: the first entry of its ready = 1 range).
	qOldestReady = `SELECT ready_at FROM flows WHERE ready = 1 ORDER BY ready_at LIMIT 1`

	// qSomeDestPaused tells whether some destination is paused: a read of
	// the destinations table, which holds the operator's registrations only
	// (empty in a queue without destinations; a claim reads it whole too).
	qSomeDestPaused = `SELECT EXISTS (SELECT 1 FROM destinations WHERE paused IS NOT NULL)`

	// qNextDueReadyDests is qNextDueReady leaving out the flows of paused
	// destinations (docs/contract.md §7.11): one seek into the
	// destination-prefixed flows_ready (or flows_rotation) per destination
	// that is not paused, the default one included.
	qNextDueReadyDests = `SELECT m.clock_mark FROM meta AS m WHERE m.id = 1
    AND EXISTS (SELECT 1 FROM (SELECT '' AS name UNION ALL SELECT name FROM destinations WHERE paused IS NULL) AS d
        WHERE EXISTS (SELECT 1 FROM flows AS f WHERE f.ready = 1 AND f.dest = d.name))`

	// qNextDueWaitingDests is qNextDueWaiting leaving out the flows of
	// paused destinations: flows_due's ready = 0 range in ready_at order, each entry's
	// destination looked up by its key, up to the first one not paused.
	// The entries it passes over are flows of paused destinations whose
	// head waits for a tick: every claim promotes the waiting heads due by
	// then, whatever their destination (qPromote), so they are only those
	// that come due before the next claim; and when no flow of a destination
	// that is not paused waits, the paused destinations' waiting flows.
	qNextDueWaitingDests = `SELECT f.ready_at FROM flows AS f WHERE f.ready = 0 AND f.ready_at IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM destinations AS d WHERE d.name = f.dest AND d.paused IS NOT NULL)
ORDER BY f.ready_at LIMIT 1`

	// qOldestReadyDests is qOldestReady leaving out the flows of paused
	// destinations: flows_due's ready = 1 range in ready_at order up to the first flow
	// whose destination is not paused. It passes over the paused
	// destinations' dispatchable flows that became due before it (at most
	// their number); OldestDue is a gauge's read, never on a claim's path.
	qOldestReadyDests = `SELECT f.ready_at FROM flows AS f WHERE f.ready = 1
    AND NOT EXISTS (SELECT 1 FROM destinations AS d WHERE d.name = f.dest AND d.paused IS NOT NULL)
ORDER BY f.ready_at LIMIT 1`
)

func init() {
	readQueries = append(readQueries, qSomeDestPaused, qNextDueReadyDests, qNextDueWaitingDests, qOldestReadyDests)
}

// nextDueQueries is the statements NextDue (ready, waiting) and
// OldestDue (ready, waiting) read: today's, or, when some destination is
// paused, the ones that leave its flows out.
func nextDueQueries(ctx context.Context, tx *txn) (ready, waiting, oldest string, err error) {
	var paused bool
	if err := tx.QueryRowContext(ctx, qSomeDestPaused).Scan(&paused); err != nil {
		return "", "", "", err
	}
	if !paused {
		return qNextDueReady, qNextDueWaiting, qOldestReady, nil
	}
	return qNextDueReadyDests, qNextDueWaitingDests, qOldestReadyDests, nil
}

// OldestDue returns the tick at which the longest-waiting dispatchable head
// became due: the smallest ready_at, at or below now, of the flows whose
// head can be claimed at now (a pending head's available_at, an in-flight
// head's lease end). now - the tick is how long work has waited for a
// claim, the lag a relay's gauge reports. ok is false when no head is
// dispatchable at now. The flows of a paused destination are left out
// (docs/contract.md §7.11), as their heads are not claimed; a destination at
// its concurrency or rate limit is not, since that lasts a lease or a few
// ticks at most. It reads whether some destination is paused and, when none
// is, the first entry of two ranges of flows_due; when
// some is, those indexes up to the first flow of a destination that is not
// paused (qOldestReadyDests, qNextDueWaitingDests). It writes nothing; now
// is not checked against the clock mark.
func (s *Store) OldestDue(ctx context.Context, now clock.Tick) (clock.Tick, bool, error) {
	var (
		due clock.Tick
		ok  bool
	)
	err := s.withReadTx(ctx, func(tx *txn) error {
		_, waiting, oldest, err := nextDueQueries(ctx, tx)
		if err != nil {
			return err
		}
		for _, q := range []string{oldest, waiting} {
			var at sql.NullInt64
			err := tx.QueryRowContext(ctx, q).Scan(&at)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				continue
			case err != nil:
				return err
			case !at.Valid:
				return fmt.Errorf("%w: a ready flow without a due tick", ErrCorrupt)
			}
			if t := clock.Tick(at.Int64); t <= now && (!ok || t < due) {
				due, ok = t, true
			}
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("oldest due: %w", err)
	}
	return due, ok, nil
}

// NextDue returns the earliest tick at which some flow's head becomes
// dispatchable: a pending head's available_at (a new event, or a retry whose
// backoff ends) or an in-flight head's lease end (a take-over, or the
// quarantine of a head whose round is used up). A relay may sleep until
// then instead of polling; any write (an enqueue, a settle, a redrive) can
// make something due earlier, so a relay also wakes on its own writes.
//
// When some head is dispatchable already, the tick is at most the clock
// mark (the mark itself, or an earlier ready_at). ok is false when no head
// is dispatchable and none waits for a tick (every flow is empty, acked or
// blocked by a quarantined head).
//
// The flows of a paused destination are left out (docs/contract.md §7.11):
// their heads are not claimed until it is resumed, so a relay that runs
// until idle stops and one that waits does not ask again every tick. A
// destination at its concurrency or rate limit still counts as due: that
// is transient (a lease end, a few ticks of rate), and a relay waits a
// little before it claims again after a claim that came back short.
//
// It reads whether some destination is paused and, when none is (always
// without destinations), two index entries (flows_ready, flows_due);
// when some is, one seek into flows_ready per destination that is not
// paused and flows_due up to the first flow of such a destination
// (qNextDueWaitingDests says why that stays short). It writes nothing.
func (s *Store) NextDue(ctx context.Context) (clock.Tick, bool, error) {
	var (
		due clock.Tick
		ok  bool
	)
	err := s.withReadTx(ctx, func(tx *txn) error {
		ready, waiting, _, err := nextDueQueries(ctx, tx)
		if err != nil {
			return err
		}
		var mark int64
		err = tx.QueryRowContext(ctx, ready).Scan(&mark)
		switch {
		case err == nil:
			due, ok = clock.Tick(mark), true
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var at int64
		err = tx.QueryRowContext(ctx, waiting).Scan(&at)
		switch {
		case err == nil:
			due, ok = clock.Tick(at), true
			return nil
		case errors.Is(err, sql.ErrNoRows):
			return nil
		}
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("next due: %w", err)
	}
	return due, ok, nil
}

// qOldestWaiting is the smallest enqueue tick of the flows' heads: the
// first entry of flows_head_enqueued.
const qOldestWaiting = `SELECT head_enqueued_at FROM flows WHERE head_enqueued_at IS NOT NULL
ORDER BY head_enqueued_at LIMIT 1`

// OldestWaiting returns the enqueue tick of the oldest event that is not
// acked, whatever holds it (pending, in backoff, in flight, quarantined, or
// behind such a head); ok is false when every event is acked (queue.Waiter,
// docs/contract.md §7.8). Within a flow sequence order is enqueue order, so
// that event is some flow's head: the store keeps each head's enqueue tick
// on its flow (flows.head_enqueued_at, written by the statements that move
// the head), and this reads the first entry of its index
// (docs/decisions/oldest-waiting.md). It writes nothing.
func (s *Store) OldestWaiting(ctx context.Context) (clock.Tick, bool, error) {
	var at int64
	err := s.stmts[qOldestWaiting].QueryRowContext(ctx).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("oldest waiting: %w", err)
	}
	return clock.Tick(at), true, nil
}
