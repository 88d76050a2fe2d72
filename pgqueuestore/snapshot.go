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
	qSnapFlows  = `SELECT flow, last_seq, served, head_seq, ready_at, ready FROM {s}.flows ORDER BY flow`
	qSnapEvents = `SELECT id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at FROM {s}.events ORDER BY flow, seq`
	qSnapAudit = `SELECT id, event_id, generation, reason, at FROM {s}.audit ORDER BY id`
)

// Snapshot reads every table in one read-only REPEATABLE READ
// transaction, rows in the order queuestore.Store.Snapshot gives (byte
// order of flow IDs), so the snapshots of the two backends after the same
// operations are equal.
func (s *Store) Snapshot(ctx context.Context) (queue.Snapshot, error) {
	snap := queue.Snapshot{SchemaVersion: SnapshotVersion, Flows: []queue.SnapshotFlow{}, Events: []queue.SnapshotEvent{}}
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		var mark int64
		if err := tx.QueryRow(ctx, s.q(qSnapMeta)).Scan(&mark, &snap.Ticket); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
		snap.ClockMark = clock.Tick(mark)
		rows, _ := tx.Query(ctx, s.q(qSnapFlows))
		var f queue.SnapshotFlow
		var head, readyAt *int64
		if _, err := pgx.ForEachRow(rows, []any{&f.Flow, &f.LastSeq, &f.Served, &head, &readyAt, &f.Ready}, func() error {
			c := f
			c.HeadSeq, c.ReadyAt = nil, nil
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
		return nil
	})
	if err != nil {
		return queue.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return snap, nil
}
