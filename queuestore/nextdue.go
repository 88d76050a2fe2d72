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
	// (flows_ready), with the clock mark.
	qNextDueReady = `SELECT m.clock_mark FROM meta AS m WHERE m.id = 1
    AND EXISTS (SELECT 1 FROM flows WHERE ready = 1)`

	// qNextDueWaiting is the earliest ready_at of the flows whose head waits
	// for a tick (flows_waiting: the first entry of the index).
	qNextDueWaiting = `SELECT ready_at FROM flows WHERE ready = 0 AND ready_at IS NOT NULL
ORDER BY ready_at LIMIT 1`

	// qOldestReady is the earliest ready_at of the flows marked
	// dispatchable (flows_ready_due: the first entry).
	qOldestReady = `SELECT ready_at FROM flows WHERE ready = 1 ORDER BY ready_at LIMIT 1`
)

// OldestDue returns the tick at which the longest-waiting dispatchable head
// became due: the smallest ready_at, at or below now, of the flows whose
// head can be claimed at now (a pending head's available_at, an in-flight
// head's lease end). now - the tick is how long work has waited for a
// claim, the lag a relay's gauge reports. ok is false when no head is
// dispatchable at now. It reads the first entry of two indexes
// (flows_ready_due, flows_waiting) and writes nothing; now is not checked
// against the clock mark.
func (s *Store) OldestDue(ctx context.Context, now clock.Tick) (clock.Tick, bool, error) {
	var (
		due clock.Tick
		ok  bool
	)
	err := s.withReadTx(ctx, func(tx *txn) error {
		for _, q := range []string{qOldestReady, qNextDueWaiting} {
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
// blocked by a quarantined head). It reads two index entries (flows_ready,
// flows_waiting) and writes nothing.
func (s *Store) NextDue(ctx context.Context) (clock.Tick, bool, error) {
	var (
		due clock.Tick
		ok  bool
	)
	err := s.withReadTx(ctx, func(tx *txn) error {
		var mark int64
		err := tx.QueryRowContext(ctx, qNextDueReady).Scan(&mark)
		switch {
		case err == nil:
			due, ok = clock.Tick(mark), true
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var at int64
		err = tx.QueryRowContext(ctx, qNextDueWaiting).Scan(&at)
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
