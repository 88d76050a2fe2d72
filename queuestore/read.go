package queuestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

const qEventCols = `id, flow, seq, body, state, generation, attempts, lifetime_attempts, available_at, lease_until, reason, acked_at`

// qEventError is the error text of the history row of the event in the
// outer query at its current generation (empty when there is none): one
// lookup by the history's primary key per event, inside the statement that
// reads the event.
const qEventError = `coalesce((SELECT h.error FROM history AS h WHERE h.event_id = events.id AND h.generation = events.generation), '')`

// qEventHistory reads an event's history rows, oldest first.
const qEventHistory = `SELECT generation, attempt, at, outcome, reason, error FROM history WHERE event_id = ?1 ORDER BY generation`

type scanner interface {
	Scan(dest ...any) error
}

// scanEventState scans qEventCols and qEventError.
func scanEventState(r scanner) (EventState, error) {
	var e EventState
	var avail, lease, acked int64
	err := r.Scan(&e.ID, &e.Flow, &e.Seq, &e.Body, &e.State, &e.Generation, &e.Attempts, &e.LifetimeAttempts, &avail, &lease, &e.Reason, &acked, &e.Error)
	e.AvailableAt, e.LeaseUntil, e.AckedAt = clock.Tick(avail), clock.Tick(lease), clock.Tick(acked)
	return e, err
}

// Event returns the event with the given ID as it is now, with its
// history (oldest first) and the error text of the failure at its current
// generation (docs/contract.md §7.8), read in one read transaction; or
// ErrNotFound.
func (s *Store) Event(ctx context.Context, id string) (EventState, error) {
	var e EventState
	err := s.withReadTx(ctx, func(tx *txn) error {
		var err error
		e, err = scanEventState(tx.QueryRowContext(ctx, `SELECT `+qEventCols+`, `+qEventError+` FROM events WHERE id = ?1`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		e.History, err = readHistory(ctx, tx, id)
		return err
	})
	if err != nil {
		return EventState{}, fmt.Errorf("event %q: %w", id, err)
	}
	return e, nil
}

// readHistory reads the history of the event id, oldest first; nil when
// it has none.
func readHistory(ctx context.Context, tx *txn, id string) ([]Attempt, error) {
	rows, err := tx.QueryContext(ctx, qEventHistory, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var at int64
		var o string
		if err := rows.Scan(&a.Generation, &a.Attempt, &at, &o, &a.Reason, &a.Error); err != nil {
			return nil, err
		}
		a.At, a.Outcome = clock.Tick(at), Outcome(o)
		out = append(out, a)
	}
	return out, rows.Err()
}

// FlowEvents returns every event of flow, acked ones included, in sequence
// order; ErrNotFound for a flow that has never had an event. Each event's
// Error is filled (a lookup by the history's primary key inside the same
// statement); History is left nil (Event reads it).
func (s *Store) FlowEvents(ctx context.Context, flow string) ([]EventState, error) {
	return s.flowEvents(ctx, flow, 0, -1)
}

// FlowEventsFrom is one page of FlowEvents (queue.Pager): at most limit
// events from the first whose seq is at least from, one range of the
// (flow, seq) index.
func (s *Store) FlowEventsFrom(ctx context.Context, flow string, from int64, limit int) ([]EventState, error) {
	if err := queue.CheckPageLimit(limit); err != nil {
		return nil, fmt.Errorf("flow events %q: %w", flow, err)
	}
	return s.flowEvents(ctx, flow, from, limit)
}

// flowEvents reads flow's events from seq from on, at most limit (-1: all).
func (s *Store) flowEvents(ctx context.Context, flow string, from int64, limit int) ([]EventState, error) {
	var out []EventState
	err := s.withReadTx(ctx, func(tx *txn) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM flows WHERE flow = ?1`, flow).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+qEventCols+`, `+qEventError+` FROM events WHERE flow = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3`, flow, from, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanEventState(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("flow events %q: %w", flow, err)
	}
	return out, nil
}

// Quarantined returns every quarantined event, ordered by flow and sequence
// number, each with the error text of the failure that quarantined it.
func (s *Store) Quarantined(ctx context.Context) ([]QuarantinedEvent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, flow, seq, generation, lifetime_attempts, reason, `+qEventError+`
FROM events WHERE state = 'quarantined' ORDER BY flow, seq`)
	if err != nil {
		return nil, fmt.Errorf("quarantined: %w", err)
	}
	defer rows.Close()
	var out []QuarantinedEvent
	for rows.Next() {
		var q QuarantinedEvent
		if err := rows.Scan(&q.EventID, &q.Flow, &q.Seq, &q.Generation, &q.LifetimeAttempts, &q.Reason, &q.Error); err != nil {
			return nil, fmt.Errorf("quarantined: %w", err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("quarantined: %w", err)
	}
	return out, nil
}

// Audit returns every redrive audit row in the order they were written
// (AuditAll returns the rows of every kind).
func (s *Store) Audit(ctx context.Context) ([]AuditEntry, error) {
	out, err := readAudit(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}

// The audit kinds (queue's).
const (
	AuditRedrive = queue.AuditRedrive // Redrive, RedriveAll: EventID and its new Generation
	AuditPolicy  = queue.AuditPolicy  // SetPolicy: Detail is PolicyChange as JSON
	AuditWeight  = queue.AuditWeight  // a flow's weight changed (FairRotation): Detail says which
)

// AuditAll returns every audit row, of every kind, in the order they were
// written.
func (s *Store) AuditAll(ctx context.Context) ([]AuditRecord, error) {
	var out []AuditRecord
	err := s.withReadTx(ctx, func(tx *txn) error {
		var err error
		out, err = readAuditRecords(ctx, tx, qAuditAll)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("audit all: %w", err)
	}
	return out, nil
}

func readAuditRecords(ctx context.Context, q querier, query string) ([]AuditRecord, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []AuditRecord{}
	for rows.Next() {
		var (
			a      AuditRecord
			kind   string
			ev     sql.NullString
			gen    sql.NullInt64
			detail sql.NullString
			at     int64
		)
		if err := rows.Scan(&a.ID, &kind, &ev, &gen, &a.Reason, &detail, &at); err != nil {
			return nil, err
		}
		a.Kind, a.EventID, a.Generation, a.Detail, a.At = AuditKind(kind), ev.String, gen.Int64, detail.String, clock.Tick(at)
		out = append(out, a)
	}
	return out, rows.Err()
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func readAudit(ctx context.Context, q querier) ([]AuditEntry, error) {
	rows, err := q.QueryContext(ctx, qSnapAudit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var a AuditEntry
		var at int64
		if err := rows.Scan(&a.ID, &a.EventID, &a.Generation, &a.Reason, &at); err != nil {
			return nil, err
		}
		a.At = clock.Tick(at)
		out = append(out, a)
	}
	return out, rows.Err()
}

// Flows returns every flow, ordered by flow ID, read in one read
// transaction.
func (s *Store) Flows(ctx context.Context) ([]FlowState, error) {
	var out []FlowState
	err := s.withReadTx(ctx, func(tx *txn) error {
		p, err := readPolicy(ctx, tx)
		if err != nil {
			return err
		}
		out, err = readFlows(ctx, tx, isRotation(p))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("flows: %w", err)
	}
	return out, nil
}

// qFlowsPosition numbers the flows with a backlog in rotation order.
const qFlowsPosition = `SELECT flow, row_number() OVER (ORDER BY max(pass, (SELECT vnow FROM meta WHERE id = 1)), joined)
FROM flows WHERE head_seq IS NOT NULL`

func readFlows(ctx context.Context, tx *txn, rot bool) ([]FlowState, error) {
	pos := map[string]int64{}
	if rot {
		prow, err := tx.QueryContext(ctx, qFlowsPosition)
		if err != nil {
			return nil, err
		}
		for prow.Next() {
			var f string
			var k int64
			if err := prow.Scan(&f, &k); err != nil {
				prow.Close()
				return nil, err
			}
			pos[f] = k
		}
		prow.Close()
		if err := prow.Err(); err != nil {
			return nil, err
		}
	}
	// Events after the head are never claimed, so they are all pending and
	// the backlog is last_seq - head_seq + 1.
	rows, err := tx.QueryContext(ctx, `SELECT f.flow, f.served, f.last_seq, coalesce(f.head_seq, 0),
    coalesce(e.state, ''), f.ready_at,
    CASE WHEN f.head_seq IS NULL THEN 0 ELSE f.last_seq - f.head_seq + 1 END, f.weight, f.paused, f.dest
FROM flows f LEFT JOIN events e ON e.flow = f.flow AND e.seq = f.head_seq
ORDER BY f.flow`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []FlowState
	for rows.Next() {
		var f FlowState
		var readyAt sql.NullInt64
		var paused sql.NullString
		if err := rows.Scan(&f.Flow, &f.Served, &f.LastSeq, &f.HeadSeq, &f.HeadState, &readyAt, &f.Backlog, &f.Weight, &paused, &f.Destination); err != nil {
			return nil, err
		}
		f.Paused, f.PauseReason = paused.Valid, paused.String
		f.Position = pos[f.Flow]
		if readyAt.Valid {
			t := clock.Tick(readyAt.Int64)
			f.ReadyAt = &t
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Stats returns a summary of the store.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.withReadTx(ctx, func(tx *txn) error {
		var mark int64
		if err := tx.QueryRowContext(ctx, `SELECT clock_mark, ticket FROM meta WHERE id = 1`).Scan(&mark, &st.Ticket); err != nil {
			return err
		}
		st.ClockMark = clock.Tick(mark)
		if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&st.SchemaVersion); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM flows`).Scan(&st.Flows); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM audit`).Scan(&st.AuditRows); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, qPausedCount).Scan(&st.PausedFlows); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, qDestCount).Scan(&st.Destinations); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT state, count(*) FROM events GROUP BY state`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var state string
			var n int64
			if err := rows.Scan(&state, &n); err != nil {
				return err
			}
			switch state {
			case queue.StatePending:
				st.Events.Pending = n
			case queue.StateInflight:
				st.Events.Inflight = n
			case queue.StateAcked:
				st.Events.Acked = n
			case queue.StateQuarantined:
				st.Events.Quarantined = n
			}
		}
		return rows.Err()
	})
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	st.Quarantined = st.Events.Quarantined
	return st, nil
}
