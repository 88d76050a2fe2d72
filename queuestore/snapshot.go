package queuestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// SnapshotFormat is the layout version a Snapshot reports in its
// SchemaVersion field: 1, the layout of schema version 1, which schema
// version 2 keeps for every queue with the default policy.
const SnapshotFormat = queue.SnapshotFormat

// The snapshot's queries (prepared at Open).
const (
	qSnapMeta   = `SELECT clock_mark, ticket FROM meta WHERE id = 1`
	qSnapFlows  = `SELECT flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined, paused, dest FROM flows ORDER BY flow`
	qSnapRot    = `SELECT vnow, vtail, joins FROM meta WHERE id = 1`
	qSnapEvents = `SELECT id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at FROM events ORDER BY flow, seq`
	qSnapAudit = `SELECT id, event_id, generation, reason, at FROM audit WHERE kind = 'redrive' ORDER BY id`

	qSnapAuditOther = `SELECT id, kind, event_id, generation, reason, detail, at FROM audit
WHERE kind <> 'redrive' ORDER BY id`

	qAuditAll = `SELECT id, kind, event_id, generation, reason, detail, at FROM audit ORDER BY id`

	// qSnapHistory is every history row in the primary key's order: by
	// event ID (BINARY, byte-wise), then generation.
	qSnapHistory = `SELECT event_id, generation, attempt, at, outcome, reason, error FROM history ORDER BY event_id, generation`
)

// Snapshot reads every table in one read transaction.
func (s *Store) Snapshot(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{Flows: []SnapshotFlow{}, Events: []SnapshotEvent{}}
	err := s.withReadTx(ctx, func(tx *txn) error {
		var mark int64
		if err := tx.QueryRowContext(ctx, qSnapMeta).Scan(&mark, &snap.Ticket); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
		snap.ClockMark = clock.Tick(mark)
		snap.SchemaVersion = SnapshotFormat
		p, err := readPolicy(ctx, tx)
		if err != nil {
			return err
		}
		if !p.Equal(DefaultPolicy()) {
			snap.Policy = &p
		}
		if isRotation(p) {
			var r RotationState
			if err := tx.QueryRowContext(ctx, qSnapRot).Scan(&r.VNow, &r.VTail, &r.Joins); err != nil {
				return fmt.Errorf("rotation: %w", err)
			}
			snap.Rotation = &r
		}
		if err := snapshotFlows(ctx, tx, &snap, isRotation(p)); err != nil {
			return fmt.Errorf("flows: %w", err)
		}
		if err := snapshotEvents(ctx, tx, &snap); err != nil {
			return fmt.Errorf("events: %w", err)
		}
		a, err := readAudit(ctx, tx)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		snap.Audit = a
		other, err := readAuditRecords(ctx, tx, qSnapAuditOther)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if len(other) > 0 {
			snap.OperatorAudit = other
		}
		if err := snapshotHistory(ctx, tx, &snap); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if err := snapshotDests(ctx, tx, &snap); err != nil {
			return fmt.Errorf("destinations: %w", err)
		}
		return nil
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return snap, nil
}

func snapshotFlows(ctx context.Context, tx *txn, snap *Snapshot, rot bool) error {
	rows, err := tx.QueryContext(ctx, qSnapFlows)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var f SnapshotFlow
		var head, readyAt sql.NullInt64
		var pass, joined int64
		var paused sql.NullString
		if err := rows.Scan(&f.Flow, &f.LastSeq, &f.Served, &head, &readyAt, &f.Ready, &f.Weight, &pass, &joined, &paused, &f.Destination); err != nil {
			return err
		}
		f.Paused = paused.String
		if rot {
			f.Pass, f.Joined = &pass, &joined
		} else if f.Weight == MinWeight {
			f.Weight = 0
		}
		if head.Valid {
			f.HeadSeq = &head.Int64
		}
		if readyAt.Valid {
			t := clock.Tick(readyAt.Int64)
			f.ReadyAt = &t
		}
		snap.Flows = append(snap.Flows, f)
	}
	return rows.Err()
}

func snapshotEvents(ctx context.Context, tx *txn, snap *Snapshot) error {
	rows, err := tx.QueryContext(ctx, qSnapEvents)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var e SnapshotEvent
		var avail, lease, enq int64
		var body []byte
		if err := rows.Scan(&e.ID, &e.Flow, &e.Seq, &body, &e.State, &e.Generation, &e.Attempts, &e.LifetimeAttempts,
			&avail, &lease, &e.Ticket, &e.Reason, &enq); err != nil {
			return err
		}
		e.Body = Bytes(body)
		e.AvailableAt, e.LeaseUntil, e.EnqueuedAt = clock.Tick(avail), clock.Tick(lease), clock.Tick(enq)
		snap.Events = append(snap.Events, e)
	}
	return rows.Err()
}

// snapshotHistory reads every history row into snap.Failures (left nil
// when there is none: a queue that never failed keeps its snapshot).
func snapshotHistory(ctx context.Context, tx *txn, snap *Snapshot) error {
	rows, err := tx.QueryContext(ctx, qSnapHistory)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a SnapshotAttempt
		var at int64
		var o string
		if err := rows.Scan(&a.EventID, &a.Generation, &a.Attempt.Attempt, &at, &o, &a.Reason, &a.Error); err != nil {
			return err
		}
		a.At, a.Outcome = clock.Tick(at), Outcome(o)
		snap.Failures = append(snap.Failures, a)
	}
	return rows.Err()
}
