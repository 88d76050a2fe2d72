package pgqueuestore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

const (
	// qFindEventFlow reads, in one statement, the stored event with ID $1
	// (NULL columns when there is none) and the last sequence number of
	// flow $2 (NULL for a new flow).
	qFindEventFlow = `SELECT e.flow, e.seq, e.body, f.last_seq
FROM (SELECT $1::text AS id, $2::text AS flow) AS k
LEFT JOIN {s}.events AS e ON e.id = k.id
LEFT JOIN {s}.flows AS f ON f.flow = k.flow`

	qNewFlow = `INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready)
VALUES ($1, 1, 0, 1, $2, true)`

	qNextSeq = `UPDATE {s}.flows SET
    last_seq = $2,
    head_seq = coalesce(head_seq, $2),
    ready_at = CASE WHEN head_seq IS NULL THEN $3 ELSE ready_at END,
    ready    = CASE WHEN head_seq IS NULL THEN true ELSE ready END
WHERE flow = $1`

	qInsertEvent = `INSERT INTO {s}.events
    (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
     available_at, lease_until, ticket, reason, enqueued_at)
VALUES ($1, $2, $3, $4, 'pending', 0, 0, 0, $5, 0, 0, '', $5)`
)

// Enqueue stores e as the next event of its flow, pending and available at
// now, in one transaction. The same ID again with the same flow and
// byte-identical body returns the stored sequence number with Duplicate set
// and changes nothing but the clock mark; with another flow or body it is
// queue.ErrConflict and changes nothing. Bad input is queue.ErrInvalid; a
// tick below the clock mark is queue.ErrTimeRegression. A non-zero
// e.Weight gives a new flow its weight, or changes an existing flow's with
// a 'weight' audit row of reason ReasonEnqueueWeight (docs/contract.md
// §7.6); under FairRotation an enqueue that gives its flow a head joins the
// flow at the rotation's tail.
func (s *Store) Enqueue(ctx context.Context, e queue.Event, now clock.Tick) (queue.Enqueued, error) {
	if err := e.Validate(); err != nil {
		return queue.Enqueued{}, fmt.Errorf("enqueue: %w", err)
	}
	var out queue.Enqueued
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, m, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		if out, err = s.enqueueOne(ctx, tx, m.policy, e, now); err != nil || out.Duplicate {
			return err
		}
		return s.wake(ctx, tx)
	})
	if err != nil {
		return queue.Enqueued{}, fmt.Errorf("enqueue %q: %w", e.ID, err)
	}
	return out, nil
}

// EnqueueBatch enqueues all events in one transaction: all or nothing, each
// checked as Enqueue would, in order (an ID repeated inside the batch is a
// duplicate or a conflict of its first occurrence). An empty batch only
// checks and records now.
func (s *Store) EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error) {
	for i, e := range es {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("enqueue batch: event %d: %w", i, err)
		}
	}
	out := make([]queue.Enqueued, len(es))
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, m, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		added := false
		for i, e := range es {
			r, err := s.enqueueOne(ctx, tx, m.policy, e, now)
			if err != nil {
				return fmt.Errorf("event %d (%q): %w", i, e.ID, err)
			}
			out[i] = r
			added = added || !r.Duplicate
		}
		if added {
			return s.wake(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue batch: %w", err)
	}
	return out, nil
}

// enqueueOne takes the sequence number (the first write), calls the hook,
// then inserts the event (the second write). An event with a weight, or
// any event under FairRotation, also sets the flow's weight and joins the
// rotation (enqueueWeighted's steps, in queuestore's order).
func (s *Store) enqueueOne(ctx context.Context, tx pgx.Tx, p queue.Policy, e queue.Event, now clock.Tick) (queue.Enqueued, error) {
	var (
		flow    *string
		seq     *int64
		body    []byte
		lastSeq *int64
	)
	if err := tx.QueryRow(ctx, s.q(qFindEventFlow), e.ID, e.Flow).Scan(&flow, &seq, &body, &lastSeq); err != nil {
		return queue.Enqueued{}, fmt.Errorf("find event: %w", err)
	}
	if flow != nil {
		if *flow == e.Flow && bytes.Equal(body, e.Body) {
			return queue.Enqueued{Seq: *seq, Duplicate: true}, nil
		}
		return queue.Enqueued{}, fmt.Errorf("%w: stored in flow %q as seq %d", queue.ErrConflict, *flow, *seq)
	}
	weighted := e.Weight != 0 || rotation(p)
	next := int64(1)
	arrives := true
	if lastSeq != nil {
		old := queue.MinWeight
		if weighted {
			var hasHead bool
			if err := tx.QueryRow(ctx, s.q(qFlowHeadWeight), e.Flow).Scan(&hasHead, &old); err != nil {
				return queue.Enqueued{}, fmt.Errorf("read flow: %w", err)
			}
			arrives = !hasHead
		}
		next = *lastSeq + 1
		if _, err := tx.Exec(ctx, s.q(qNextSeq), e.Flow, next, int64(now)); err != nil {
			return queue.Enqueued{}, fmt.Errorf("take sequence number: %w", err)
		}
		if e.Weight != 0 && e.Weight != old {
			if err := s.writeWeight(ctx, tx, e.Flow, old, e.Weight, ReasonEnqueueWeight, now); err != nil {
				return queue.Enqueued{}, err
			}
		}
	} else {
		if _, err := tx.Exec(ctx, s.q(qNewFlow), e.Flow, int64(now)); err != nil {
			return queue.Enqueued{}, fmt.Errorf("take sequence number: %w", err)
		}
		if e.Weight != 0 && e.Weight != queue.MinWeight {
			if _, err := tx.Exec(ctx, s.q(qSetWeight), e.Flow, e.Weight); err != nil {
				return queue.Enqueued{}, fmt.Errorf("set weight: %w", err)
			}
		}
	}
	if rotation(p) && arrives {
		if _, err := tx.Exec(ctx, s.q(qRotArrive), e.Flow); err != nil {
			return queue.Enqueued{}, fmt.Errorf("join rotation: %w", err)
		}
		if _, err := tx.Exec(ctx, s.q(qRotJoin)); err != nil {
			return queue.Enqueued{}, fmt.Errorf("join rotation: %w", err)
		}
	}
	s.call(queue.HookEnqueueSeqTaken)
	if _, err := tx.Exec(ctx, s.q(qInsertEvent), e.ID, e.Flow, next, e.Body, int64(now)); err != nil {
		return queue.Enqueued{}, fmt.Errorf("insert event: %w", err)
	}
	return queue.Enqueued{Seq: next}, nil
}
