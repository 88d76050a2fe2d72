package queuestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
)

// Event is what a producer enqueues: an ID unique in the store, the flow it
// belongs to, and an opaque body.
type Event struct {
	ID, Flow string // 1..MaxNameLen bytes of printable UTF-8 each
	Body     []byte // 1..MaxBodyLen bytes
}

// Enqueued is the result of an enqueue: the event's sequence number in its
// flow, and whether the event was already stored (a byte-identical retry).
type Enqueued struct {
	Seq       int64 // the event's sequence number in its flow
	Duplicate bool  // the event was already stored: nothing was added
}

const (
	qFindEvent = `SELECT flow, seq, body FROM events WHERE id = ?`

	// qTakeSeq allocates the flow's next sequence number (1 for a new flow).
	// A flow without a head (new, or every event acked) gets the new event
	// as its head, dispatchable at once. In DO UPDATE, column names are the
	// old row's values.
	qTakeSeq = `INSERT INTO flows (flow, last_seq, served, head_seq, ready_at, ready)
VALUES (?1, 1, 0, 1, ?2, 1)
ON CONFLICT (flow) DO UPDATE SET
    last_seq = last_seq + 1,
    head_seq = coalesce(head_seq, last_seq + 1),
    ready_at = CASE WHEN head_seq IS NULL THEN excluded.ready_at ELSE ready_at END,
    ready    = CASE WHEN head_seq IS NULL THEN 1 ELSE ready END
RETURNING last_seq`

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
	if err := e.validate(); err != nil {
		return Enqueued{}, fmt.Errorf("enqueue: %w", err)
	}
	var out Enqueued
	err := s.withTx(ctx, func(tx *txn) error {
		if _, err := admit(ctx, tx, now); err != nil {
			return err
		}
		var err error
		out, err = s.enqueueOne(ctx, tx, e, now)
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
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("enqueue batch: event %d: %w", i, err)
		}
	}
	out := make([]Enqueued, len(es))
	err := s.withTx(ctx, func(tx *txn) error {
		if _, err := admit(ctx, tx, now); err != nil {
			return err
		}
		for i, e := range es {
			r, err := s.enqueueOne(ctx, tx, e, now)
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
func (s *Store) enqueueOne(ctx context.Context, tx *txn, e Event, now clock.Tick) (Enqueued, error) {
	var (
		flow string
		seq  int64
		body []byte
	)
	err := tx.QueryRowContext(ctx, qFindEvent, e.ID).Scan(&flow, &seq, &body)
	switch {
	case err == nil:
		if flow == e.Flow && bytes.Equal(body, e.Body) {
			return Enqueued{Seq: seq, Duplicate: true}, nil
		}
		return Enqueued{}, fmt.Errorf("%w: stored in flow %q as seq %d", ErrConflict, flow, seq)
	case !errors.Is(err, sql.ErrNoRows):
		return Enqueued{}, fmt.Errorf("find event: %w", err)
	}
	if err := tx.QueryRowContext(ctx, qTakeSeq, e.Flow, int64(now)).Scan(&seq); err != nil {
		return Enqueued{}, fmt.Errorf("take sequence number: %w", err)
	}
	s.call(HookEnqueueSeqTaken)
	if _, err := tx.ExecContext(ctx, qInsertEvent, e.ID, e.Flow, seq, e.Body, int64(now)); err != nil {
		return Enqueued{}, fmt.Errorf("insert event: %w", err)
	}
	return Enqueued{Seq: seq}, nil
}
