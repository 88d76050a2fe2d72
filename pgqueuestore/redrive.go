package pgqueuestore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

const (
	qRedriveRead = `SELECT flow, state, generation FROM {s}.events WHERE id = $1`

	qRedrive = `UPDATE {s}.events SET generation = generation + 1, attempts = 0, state = 'pending',
    available_at = $2, reason = '', lease_until = 0
WHERE id = $1 RETURNING generation`

	qSetReadyNow = `UPDATE {s}.flows SET ready_at = $2, ready = paused IS NULL WHERE flow = $1`

	// qInsertAudit numbers audit rows max(id) + 1 under the meta row's lock
	// (every write holds it), as SQLite's INTEGER PRIMARY KEY does: a
	// rolled-back redrive leaves no hole, which a sequence would.
	qInsertAudit = `INSERT INTO {s}.audit (id, kind, event_id, generation, reason, at)
SELECT coalesce(max(id), 0) + 1, 'redrive', $1, $2, $3, $4 FROM {s}.audit`

	qInsertAuditKind = `INSERT INTO {s}.audit (id, kind, event_id, generation, reason, detail, at)
SELECT coalesce(max(id), 0) + 1, $1, NULL, NULL, $2, $3, $4 FROM {s}.audit`
)

// Redrive puts a quarantined event back in its flow for a new round, on an
// operator's word, with the checks and effects of queuestore.Store.Redrive
// (docs/contract.md §2.5), the audit row in the same transaction.
func (s *Store) Redrive(ctx context.Context, eventID string, generation int64, reason string, now clock.Tick) error {
	if err := queue.CheckReason(reason); err != nil {
		return fmt.Errorf("redrive: %w", err)
	}
	if err := queue.CheckID(eventID); err != nil {
		return fmt.Errorf("redrive: %w", err)
	}
	if err := queue.CheckGeneration(generation); err != nil {
		return fmt.Errorf("redrive: %w", err)
	}
	err := s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, m, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		var (
			flow, state string
			gen         int64
		)
		err = tx.QueryRow(ctx, s.q(qRedriveRead), eventID).Scan(&flow, &state, &gen)
		if isNoRows(err) {
			return queue.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("read event: %w", err)
		}
		if gen != generation {
			return fmt.Errorf("%w: event is at generation %d, not %d", queue.ErrStaleGeneration, gen, generation)
		}
		if state != queue.StateQuarantined {
			return fmt.Errorf("%w: event is %s", queue.ErrNotQuarantined, state)
		}
		if _, err = s.redriveOne(ctx, tx, eventID, flow, reason, now, m.policy); err != nil {
			return err
		}
		return s.wake(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("redrive %q: %w", eventID, err)
	}
	return nil
}

// redriveOne redrives a quarantined event (checked by the caller) and
// writes its audit row; it returns the new generation.
func (s *Store) redriveOne(ctx context.Context, tx pgx.Tx, eventID, flow, reason string, now clock.Tick, p queue.Policy) (int64, error) {
	var newGen int64
	if err := tx.QueryRow(ctx, s.q(qRedrive), eventID, int64(now)).Scan(&newGen); err != nil {
		return 0, fmt.Errorf("update event: %w", err)
	}
	// A quarantined event is its flow's head: make the flow ready now
	// (under FairRotation its pass is clamped to vnow).
	q := qSetReadyNow
	if rotation(p) {
		q = qRotSetReadyNow
	}
	if _, err := tx.Exec(ctx, s.q(q), flow, int64(now)); err != nil {
		return 0, fmt.Errorf("update flow %q: %w", flow, err)
	}
	s.call(queue.HookRedriveBeforeAudit)
	if _, err := tx.Exec(ctx, s.q(qInsertAudit), eventID, newGen, reason, int64(now)); err != nil {
		return 0, fmt.Errorf("insert audit: %w", err)
	}
	return newGen, nil
}

// QuarantinedMatching returns the quarantined events that f selects,
// ordered by flow and sequence number: what RedriveAll with f would
// redrive now (its dry run); nil when none. A bad filter is
// queue.ErrInvalid.
func (s *Store) QuarantinedMatching(ctx context.Context, f queue.RedriveFilter) ([]queue.QuarantinedEvent, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("quarantined matching: %w", err)
	}
	out, err := s.quarantinedRead(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("quarantined matching: %w", err)
	}
	return out, nil
}

// quarantinedRead is quarantined, every match, in a read transaction
// (for its plans: qCustomPlans).
func (s *Store) quarantinedRead(ctx context.Context, f queue.RedriveFilter) ([]queue.QuarantinedEvent, error) {
	var out []queue.QuarantinedEvent
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.quarantined(ctx, tx, f, 0)
		return err
	})
	return out, err
}

// quarantined lists the quarantined events f selects in (flow, seq) order,
// at most limit when limit > 0, through events_quarantined (no reason) or
// events_quarantined_reason (a reason), each with the error text of the
// failure that quarantined it (qErrorCol).
func (s *Store) quarantined(ctx context.Context, q querier, f queue.RedriveFilter, limit int) ([]queue.QuarantinedEvent, error) {
	sql := `SELECT id, flow, seq, generation, lifetime_attempts, reason, ` + qErrorCol + ` FROM {s}.events WHERE quarantined`
	var args []any
	if f.Flow != "" {
		args = append(args, f.Flow)
		sql += fmt.Sprintf(" AND flow = $%d", len(args))
	}
	if f.Reason != "" {
		args = append(args, f.Reason)
		sql += fmt.Sprintf(" AND reason = $%d", len(args))
	}
	sql += " ORDER BY flow, seq"
	if limit > 0 {
		sql += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, _ := q.Query(ctx, s.q(sql), args...)
	var out []queue.QuarantinedEvent
	var e queue.QuarantinedEvent
	_, err := pgx.ForEachRow(rows, []any{&e.EventID, &e.Flow, &e.Seq, &e.Generation, &e.LifetimeAttempts, &e.Reason, &e.Error}, func() error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// RedriveAll redrives every quarantined event that f selects, each as
// Redrive would, with one audit row per event, in chunks of
// queue.RedriveChunk events per transaction until none matches, as
// queuestore.Store.RedriveAll does. On an error it returns the events of
// the chunks already committed with the error; running it again redrives
// the rest and never an event twice.
func (s *Store) RedriveAll(ctx context.Context, f queue.RedriveFilter, reason string, now clock.Tick) ([]queue.Redriven, error) {
	if err := queue.CheckReason(reason); err != nil {
		return nil, fmt.Errorf("redrive all: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("redrive all: %w", err)
	}
	var all []queue.Redriven
	for {
		var chunk []queue.Redriven
		err := s.withTx(ctx, func(tx pgx.Tx, a admission) error {
			chunk = chunk[:0]
			now, m, err := s.admit(ctx, tx, a, now)
			if err != nil {
				return err
			}
			evs, err := s.quarantined(ctx, tx, f, queue.RedriveChunk)
			if err != nil {
				return fmt.Errorf("list: %w", err)
			}
			for _, e := range evs {
				g, err := s.redriveOne(ctx, tx, e.EventID, e.Flow, reason, now, m.policy)
				if err != nil {
					return fmt.Errorf("%q: %w", e.EventID, err)
				}
				chunk = append(chunk, queue.Redriven{EventID: e.EventID, Flow: e.Flow, Seq: e.Seq, Generation: g})
			}
			if len(chunk) > 0 {
				return s.wake(ctx, tx)
			}
			return nil
		})
		if err != nil {
			return all, fmt.Errorf("redrive all: %w", err)
		}
		all = append(all, chunk...)
		if len(chunk) < queue.RedriveChunk {
			return all, nil
		}
	}
}
