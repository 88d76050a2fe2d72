package queuestore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
)

const (
	// qFindEventFlow reads, in one statement, the stored event with ID ?1
	// (NULL columns when there is none) and the last sequence number of flow
	// ?2 (NULL for a new flow).
	qFindEventFlow = `SELECT e.flow, e.seq, e.body, f.last_seq
FROM (SELECT ?1 AS id, ?2 AS flow) AS k
LEFT JOIN events AS e ON e.id = k.id
LEFT JOIN flows AS f ON f.flow = k.flow`

	// qNewFlow creates a flow with the new event (seq 1) as its head,
	// dispatchable at once.
	qNewFlow = `INSERT INTO flows (flow, last_seq, served, head_seq, ready_at, ready, head_enqueued_at)
VALUES (?1, 1, 0, 1, ?2, 1, ?2)`

	// qNextSeq records ?2 (last_seq + 1, read in the same transaction) as the
	// flow's last sequence number. A flow without a head (every event acked)
	// gets the new event as its head, dispatchable at once (?3), enqueued
	// at ?3.
	qNextSeq = `UPDATE flows SET
    last_seq = ?2,
    head_seq = coalesce(head_seq, ?2),
    ready_at = CASE WHEN head_seq IS NULL THEN ?3 ELSE ready_at END,
    ready    = CASE WHEN head_seq IS NULL THEN 1 ELSE ready END,
    head_enqueued_at = CASE WHEN head_seq IS NULL THEN ?3 ELSE head_enqueued_at END
WHERE flow = ?1`

	qInsertEvent = `INSERT INTO events
    (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
     available_at, lease_until, ticket, reason, enqueued_at)
VALUES (?1, ?2, ?3, ?4, 'pending', 0, 0, 0, ?5, 0, 0, '', ?5)`
)

// Enqueue stores e as the next event of its flow, pending and available at
// now, in one transaction. The same ID again with the same flow and
// byte-identical body returns the stored sequence number with Duplicate set
// and changes nothing but the clock mark; with another flow or body it is
// ErrConflict and changes nothing. Bad input is ErrInvalid (see MaxNameLen,
// MaxBodyLen); a tick below the clock mark is ErrTimeRegression.
func (s *Store) Enqueue(ctx context.Context, e Event, now clock.Tick) (Enqueued, error) {
	if err := e.Validate(); err != nil {
		return Enqueued{}, fmt.Errorf("enqueue: %w", err)
	}
	var out Enqueued
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		out, err = s.enqueueOne(ctx, tx, a.pol, e, a.now)
		return err
	})
	if err != nil {
		return Enqueued{}, fmt.Errorf("enqueue %q: %w", e.ID, err)
	}
	return out, nil
}

// EnqueueBatch enqueues all events in one transaction: all or nothing. Each
// event is checked as Enqueue would, in order (an ID repeated inside the
// batch is a duplicate or a conflict of its first occurrence). Any invalid
// event, conflict or error refuses the whole batch and changes nothing. An
// empty batch only checks and records now.
func (s *Store) EnqueueBatch(ctx context.Context, es []Event, now clock.Tick) ([]Enqueued, error) {
	for i, e := range es {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("enqueue batch: event %d: %w", i, err)
		}
	}
	out := make([]Enqueued, len(es))
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		now = a.now
		for i, e := range es {
			r, err := s.enqueueOne(ctx, tx, a.pol, e, now)
			if err != nil {
				return fmt.Errorf("event %d (%q): %w", i, e.ID, err)
			}
			out[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue batch: %w", err)
	}
	return out, nil
}

// enqueueOne does the work of one enqueue inside tx. The sequence number is
// taken first (the first write), then the event is inserted (the second).
// An event with a weight, or any event under FairRotation, goes through
// enqueueWeighted.
func (s *Store) enqueueOne(ctx context.Context, tx *txn, pol Policy, e Event, now clock.Tick) (Enqueued, error) {
	if e.Weight != 0 || isRotation(pol) {
		return s.enqueueWeighted(ctx, tx, pol, e, now)
	}
	var (
		flow    sql.NullString
		seq     sql.NullInt64
		body    []byte
		lastSeq sql.NullInt64
	)
	// One read finds a stored event with this ID and the flow's last
	// sequence number; then one write takes the next number (no RETURNING:
	// it would build a temporary table per event).
	if err := tx.QueryRowContext(ctx, qFindEventFlow, e.ID, e.Flow).Scan(&flow, &seq, &body, &lastSeq); err != nil {
		return Enqueued{}, fmt.Errorf("find event: %w", err)
	}
	if flow.Valid {
		if flow.String == e.Flow && bytes.Equal(body, e.Body) {
			return Enqueued{Seq: seq.Int64, Duplicate: true}, nil
		}
		return Enqueued{}, fmt.Errorf("%w: stored in flow %q as seq %d", ErrConflict, flow.String, seq.Int64)
	}
	next := int64(1)
	if lastSeq.Valid {
		next = lastSeq.Int64 + 1
		if _, err := tx.ExecContext(ctx, qNextSeq, e.Flow, next, int64(now)); err != nil {
			return Enqueued{}, fmt.Errorf("take sequence number: %w", err)
		}
	} else if _, err := tx.ExecContext(ctx, qNewFlow, e.Flow, int64(now)); err != nil {
		return Enqueued{}, fmt.Errorf("take sequence number: %w", err)
	}
	s.call(HookEnqueueSeqTaken)
	if _, err := tx.ExecContext(ctx, qInsertEvent, e.ID, e.Flow, next, e.Body, int64(now)); err != nil {
		return Enqueued{}, fmt.Errorf("insert event: %w", err)
	}
	return Enqueued{Seq: next}, nil
}
