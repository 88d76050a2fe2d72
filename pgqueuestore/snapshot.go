package pgqueuestore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

const (
	qSnapMeta   = `SELECT clock_mark, ticket FROM {s}.meta WHERE id = 1`
	qSnapFlows  = `SELECT flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined, coalesce(paused, ''), dest FROM {s}.flows ORDER BY flow`
	qSnapEvents = `SELECT id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at FROM {s}.events ORDER BY flow, seq`
	qSnapAudit = `SELECT id, event_id, generation, reason, at FROM {s}.audit WHERE kind = 'redrive' ORDER BY id`

	qSnapAuditOther = `SELECT id, kind, event_id, generation, reason, detail, at FROM {s}.audit
WHERE kind <> 'redrive' ORDER BY id`

	qAuditAll = `SELECT id, kind, event_id, generation, reason, detail, at FROM {s}.audit ORDER BY id`

	// qSnapFailures is every attempt history row, by event ID (byte
	// order) then generation: the attempts primary key in order.
	qSnapFailures = `SELECT event_id, at, generation, attempt, outcome, reason, error FROM {s}.attempts
ORDER BY event_id, generation`
)

// Snapshot reads every table in one read-only REPEATABLE READ
// transaction, in the layout queuestore.Store.Snapshot gives
// (queue.SnapshotFormat) and in its row order (byte order of flow IDs), so
// the snapshots of the two backends after the same operations are equal:
// the policy only when it is not the default, the audit rows of other
// kinds than redrive in OperatorAudit, the rotation's state (Rotation, each
// flow's Pass and Joined) under FairRotation only, a flow's Weight under
// FairRotation or when it is not 1, the attempt history in Failures only
// when some attempt failed.
func (s *Store) Snapshot(ctx context.Context) (queue.Snapshot, error) {
	snap := queue.Snapshot{SchemaVersion: queue.SnapshotFormat, Flows: []queue.SnapshotFlow{}, Events: []queue.SnapshotEvent{}}
	if err := s.promoteWaiting(ctx); err != nil {
		return queue.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		var mark int64
		if err := tx.QueryRow(ctx, s.q(qSnapMeta)).Scan(&mark, &snap.Ticket); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
		snap.ClockMark = clock.Tick(mark)
		p, err := readPolicy(ctx, tx, s.q)
		if err != nil {
			return err
		}
		if !p.Equal(queue.DefaultPolicy()) {
			snap.Policy = &p
		}
		rot := rotation(p)
		if rot {
			var r queue.RotationState
			if err := tx.QueryRow(ctx, s.q(qSnapRot)).Scan(&r.VNow, &r.VTail, &r.Joins); err != nil {
				return fmt.Errorf("rotation: %w", err)
			}
			snap.Rotation = &r
		}
		if snap.Destinations, err = s.snapshotDests(ctx, tx); err != nil {
			return fmt.Errorf("destinations: %w", err)
		}
		rows, _ := tx.Query(ctx, s.q(qSnapFlows))
		var f queue.SnapshotFlow
		var head, readyAt *int64
		var pass, joined int64
		if _, err := pgx.ForEachRow(rows, []any{&f.Flow, &f.LastSeq, &f.Served, &head, &readyAt, &f.Ready, &f.Weight, &pass, &joined, &f.Paused, &f.Destination}, func() error {
			c := f
			c.HeadSeq, c.ReadyAt, c.Pass, c.Joined = nil, nil, nil, nil
			if rot {
				ps, js := pass, joined
				c.Pass, c.Joined = &ps, &js
			} else if c.Weight == queue.MinWeight {
				c.Weight = 0
			}
			if head != nil {
				h := *head
				c.HeadSeq = &h
			}
			if readyAt != nil {
				t := clock.Tick(*readyAt)
				c.ReadyAt = &t
			}
			snap.Flows = append(snap.Flows, c)
			return nil
		}); err != nil {
			return fmt.Errorf("flows: %w", err)
		}
		rows, _ = tx.Query(ctx, s.q(qSnapEvents))
		var e queue.SnapshotEvent
		var avail, lease, enq int64
		var body []byte
		if _, err := pgx.ForEachRow(rows, []any{&e.ID, &e.Flow, &e.Seq, &body, &e.State, &e.Generation, &e.Attempts,
			&e.LifetimeAttempts, &avail, &lease, &e.Ticket, &e.Reason, &enq}, func() error {
			e.Body = queue.Bytes(append([]byte(nil), body...))
			e.AvailableAt, e.LeaseUntil, e.EnqueuedAt = clock.Tick(avail), clock.Tick(lease), clock.Tick(enq)
			snap.Events = append(snap.Events, e)
			return nil
		}); err != nil {
			return fmt.Errorf("events: %w", err)
		}
		a, err := s.readAudit(ctx, tx)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		snap.Audit = a
		other, err := s.readAuditRecords(ctx, tx, qSnapAuditOther)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if len(other) > 0 {
			snap.OperatorAudit = other
		}
		rows, _ = tx.Query(ctx, s.q(qSnapFailures))
		var fa queue.SnapshotAttempt
		var at int64
		var outcome string
		if _, err := pgx.ForEachRow(rows, []any{&fa.EventID, &at, &fa.Generation, &fa.Attempt.Attempt, &outcome, &fa.Reason, &fa.Error}, func() error {
			fa.At, fa.Outcome = clock.Tick(at), queue.Outcome(outcome)
			snap.Failures = append(snap.Failures, fa)
			return nil
		}); err != nil {
			return fmt.Errorf("failures: %w", err)
		}
		return nil
	})
	if err != nil {
		return queue.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return snap, nil
}

// AuditAll returns every audit row, of every kind, in the order they were
// written.
func (s *Store) AuditAll(ctx context.Context) ([]queue.AuditRecord, error) {
	var out []queue.AuditRecord
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.readAuditRecords(ctx, tx, qAuditAll)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("audit all: %w", err)
	}
	return out, nil
}

func (s *Store) readAuditRecords(ctx context.Context, q querier, query string, args ...any) ([]queue.AuditRecord, error) {
	rows, _ := q.Query(ctx, s.q(query), args...)
	out := []queue.AuditRecord{}
	var (
		a      queue.AuditRecord
		kind   string
		ev     *string
		gen    *int64
		detail *string
		at     int64
	)
	_, err := pgx.ForEachRow(rows, []any{&a.ID, &kind, &ev, &gen, &a.Reason, &detail, &at}, func() error {
		r := queue.AuditRecord{ID: a.ID, Kind: queue.AuditKind(kind), Reason: a.Reason, At: clock.Tick(at)}
		if ev != nil {
			r.EventID = *ev
		}
		if gen != nil {
			r.Generation = *gen
		}
		if detail != nil {
			r.Detail = *detail
		}
		out = append(out, r)
		return nil
	})
	return out, err
}
