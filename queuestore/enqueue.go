package queuestore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

const (
	// qFindEventFlow reads, in one statement, the stored event with ID ?1
	// (NULL columns when there is none), the last sequence number of flow
	// ?2 (NULL for a new flow) and whether the flow has a head.
	qFindEventFlow = `SELECT e.flow, e.seq, e.body, f.last_seq, f.head_seq IS NOT NULL
FROM (SELECT ?1 AS id, ?2 AS flow) AS k
LEFT JOIN events AS e ON e.id = k.id
LEFT JOIN flows AS f ON f.flow = k.flow`

	// qNewFlow creates a flow with the new event (seq 1) as its head,
	// dispatchable from ?2 (its available_at: now, or a later NotBefore),
	// enqueued at ?3 (now), delivering to the destination ?4 ('' the
	// default one).
	qNewFlow = `INSERT INTO flows (flow, last_seq, served, head_seq, ready_at, ready, head_enqueued_at, dest)
VALUES (?1, 1, 0, 1, ?2, ?2 <= ?3, ?3, ?4)`

	// qEventDest reads whether the destination ?1 is registered and the
	// destination of flow ?2 (NULL for a new flow).
	qEventDest = `SELECT EXISTS (SELECT 1 FROM destinations WHERE name = ?1), (SELECT dest FROM flows WHERE flow = ?2)`

	// qNextSeq records ?2 (last_seq + 1, read in the same transaction) as the
	// last sequence number of a flow that has a head: the new event waits
	// behind it. It sets no head column, so SQLite updates none of the
	// indexes on them (it updates every index of a column the statement
	// sets, whatever the value): the common enqueue touches the flows row
	// alone (no index reads last_seq).
	qNextSeq = `UPDATE flows SET last_seq = ?2 WHERE flow = ?1`

	// qNextSeqHead is qNextSeq for a flow without a head (every event
	// acked): the new event becomes its head, dispatchable from ?3 (its
	// available_at), enqueued at ?4 (now). A paused flow stays blocked
	// (flows_paused_blocks).
	qNextSeqHead = `UPDATE flows SET last_seq = ?2, head_seq = ?2, ready_at = ?3, ready = ?3 <= ?4, head_enqueued_at = ?4
WHERE flow = ?1`

	qInsertEvent = `INSERT INTO events
    (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
     available_at, lease_until, ticket, reason, enqueued_at)
VALUES (?1, ?2, ?3, ?4, 'pending', 0, 0, 0, ?5, 0, 0, '', ?6)`
)

// Enqueue stores e as the next event of its flow, pending and available at
// now (or at e.NotBefore when that is later: a scheduled event,
// docs/contract.md §7.9), in one transaction. The same ID again with the same flow and
// byte-identical body returns the stored sequence number with Duplicate set
// and changes nothing but the clock mark; with another flow or body it is
// ErrConflict and changes nothing. Bad input is ErrInvalid (see MaxNameLen,
// MaxBodyLen); a NotBefore the policy's lease would push past
// math.MaxInt64 is ErrTickOverflow; a tick below the clock mark is
// ErrTimeRegression. NotBefore, like Weight and Destination, is not part
// of the event's identity: a duplicate with another NotBefore changes
// nothing. Destination names the flow's destination on its first event;
// later it must be "" or the same (docs/contract.md §7.11:
// ErrUnknownDestination, ErrDestinationMismatch).
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
	if err := pol.CheckTick(e.NotBefore); err != nil {
		return Enqueued{}, fmt.Errorf("not before: %w", err)
	}
	if e.Weight != 0 || isRotation(pol) {
		return s.enqueueWeighted(ctx, tx, pol, e, now)
	}
	var (
		flow    sql.NullString
		seq     sql.NullInt64
		body    []byte
		lastSeq sql.NullInt64
		hasHead sql.NullBool
	)
	// One read finds a stored event with this ID and the flow's last
	// sequence number; then one write takes the next number (no RETURNING:
	// it would build a temporary table per event).
	if err := tx.QueryRowContext(ctx, qFindEventFlow, e.ID, e.Flow).Scan(&flow, &seq, &body, &lastSeq, &hasHead); err != nil {
		return Enqueued{}, fmt.Errorf("find event: %w", err)
	}
	if flow.Valid {
		if flow.String == e.Flow && bytes.Equal(body, e.Body) {
			return Enqueued{Seq: seq.Int64, Duplicate: true}, nil
		}
		return Enqueued{}, fmt.Errorf("%w: stored in flow %q as seq %d", ErrConflict, flow.String, seq.Int64)
	}
	if err := checkEventDest(ctx, tx, e); err != nil {
		return Enqueued{}, err
	}
	next := int64(1)
	if lastSeq.Valid {
		next = lastSeq.Int64 + 1
		if err := takeSeq(ctx, tx, e.Flow, next, hasHead.Bool, availableAt(e, now), now); err != nil {
			return Enqueued{}, err
		}
	} else if _, err := tx.ExecContext(ctx, qNewFlow, e.Flow, int64(availableAt(e, now)), int64(now), e.Destination); err != nil {
		return Enqueued{}, fmt.Errorf("take sequence number: %w", err)
	}
	s.call(HookEnqueueSeqTaken)
	if _, err := tx.ExecContext(ctx, qInsertEvent, e.ID, e.Flow, next, e.Body, int64(availableAt(e, now)), int64(now)); err != nil {
		return Enqueued{}, fmt.Errorf("insert event: %w", err)
	}
	return Enqueued{Seq: next}, nil
}

// checkEventDest checks e's destination (docs/contract.md §7.11), after
// the duplicate check (a destination is not part of an event's identity):
// "" is the flow's own, whatever it is; a name must be registered
// (ErrUnknownDestination) and, for an existing flow, be its destination
// (ErrDestinationMismatch). The common event, naming none, reads nothing.
func checkEventDest(ctx context.Context, tx *txn, e Event) error {
	if e.Destination == queue.DefaultDestination {
		return nil
	}
	var (
		known int64
		dest  sql.NullString
	)
	if err := tx.QueryRowContext(ctx, qEventDest, e.Destination, e.Flow).Scan(&known, &dest); err != nil {
		return fmt.Errorf("read destination: %w", err)
	}
	if known == 0 {
		return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, e.Destination)
	}
	if dest.Valid && dest.String != e.Destination {
		return fmt.Errorf("%w: flow %q delivers to %q, the event names %q", queue.ErrDestinationMismatch, e.Flow, dest.String, e.Destination)
	}
	return nil
}

// availableAt is the tick from which e, enqueued at now, may be claimed:
// now, or its NotBefore when that is later.
func availableAt(e Event, now clock.Tick) clock.Tick { return max(now, e.NotBefore) }

// takeSeq records next as the last sequence number of the existing flow
// (qNextSeq), making the new event, available at avail, its head when the
// flow has none (qNextSeqHead).
func takeSeq(ctx context.Context, tx *txn, flow string, next int64, hasHead bool, avail, now clock.Tick) error {
	var err error
	if hasHead {
		_, err = tx.ExecContext(ctx, qNextSeq, flow, next)
	} else {
		_, err = tx.ExecContext(ctx, qNextSeqHead, flow, next, int64(avail), int64(now))
	}
	if err != nil {
		return fmt.Errorf("take sequence number: %w", err)
	}
	return nil
}
