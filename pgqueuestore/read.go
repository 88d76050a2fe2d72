package pgqueuestore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// querier is what *pgxpool.Pool and pgx.Tx share.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// qEventCols are an event's columns as EventState has them, the error text
// of its current generation's history row last ("" when none:
// qErrorCol).
const qEventCols = `id, flow, seq, body, state, generation, attempts, lifetime_attempts, available_at, lease_until, reason, ` + qErrorCol + `,
    coalesce(acked_at, 0)`

// qErrorCol is the error text of the history row of the event's current
// generation, "" when it has none (docs/contract.md §7.8): one probe of
// the attempts primary key per event row of a statement that reads
// events unaliased.
const qErrorCol = `coalesce((SELECT a.error FROM {s}.attempts AS a
    WHERE a.event_id = events.id AND a.generation = events.generation), '')`

func eventDest(e *queue.EventState, avail, lease, acked *int64) []any {
	return []any{&e.ID, &e.Flow, &e.Seq, &e.Body, &e.State, &e.Generation, &e.Attempts, &e.LifetimeAttempts, avail, lease, &e.Reason, &e.Error, acked}
}

// qEventHistory reads one event (qEventCols) and its history, oldest
// first, as arrays, in one statement (so one snapshot): the history
// through the attempts primary key.
const qEventHistory = `SELECT ` + qEventCols + `, h.h_at, h.h_gen, h.h_attempt, h.h_outcome, h.h_reason, h.h_error
FROM {s}.events LEFT JOIN LATERAL (
    SELECT array_agg(a.at ORDER BY a.generation) AS h_at, array_agg(a.generation ORDER BY a.generation) AS h_gen,
        array_agg(a.attempt::bigint ORDER BY a.generation) AS h_attempt, array_agg(a.outcome ORDER BY a.generation) AS h_outcome,
        array_agg(a.reason ORDER BY a.generation) AS h_reason, array_agg(a.error ORDER BY a.generation) AS h_error
    FROM {s}.attempts AS a WHERE a.event_id = events.id) AS h ON true
WHERE events.id = $1`

// Event returns the event with the given ID as it is now, its attempt
// history (oldest first, at most queue.MaxHistory) and the error text of
// its current generation's failure (docs/contract.md §7.8), read in one
// statement; queue.ErrNotFound for an unknown ID.
func (s *Store) Event(ctx context.Context, id string) (queue.EventState, error) {
	var e queue.EventState
	var avail, lease, acked int64
	var (
		ats, gens, attempts     []int64
		outcomes, reasons, errs []string
	)
	// In a read transaction for its plan (qCustomPlans): a generic plan
	// made while attempts was nearly empty could keep scanning it.
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, s.q(qEventHistory), id).Scan(append(eventDest(&e, &avail, &lease, &acked),
			&ats, &gens, &attempts, &outcomes, &reasons, &errs)...)
	})
	if isNoRows(err) {
		return queue.EventState{}, fmt.Errorf("event %q: %w", id, queue.ErrNotFound)
	}
	if err != nil {
		return queue.EventState{}, fmt.Errorf("event %q: %w", id, err)
	}
	e.AvailableAt, e.LeaseUntil, e.AckedAt = clock.Tick(avail), clock.Tick(lease), clock.Tick(acked)
	for i := range ats {
		e.History = append(e.History, queue.Attempt{At: clock.Tick(ats[i]), Generation: gens[i], Attempt: int(attempts[i]),
			Outcome: queue.Outcome(outcomes[i]), Reason: reasons[i], Error: errs[i]})
	}
	return e, nil
}

// FlowEvents returns every event of flow, acked ones included, in sequence
// order, each with the error text of its current generation's failure
// (one primary key probe of attempts per event, in the same statement)
// but without its History (nil); queue.ErrNotFound for a flow that has
// never had an event.
func (s *Store) FlowEvents(ctx context.Context, flow string) ([]queue.EventState, error) {
	return s.flowEvents(ctx, flow, 0, nil)
}

// FlowEventsFrom is one page of FlowEvents (queue.Pager): at most limit
// events from the first whose seq is at least from, one range of the
// events' (flow, seq) key.
func (s *Store) FlowEventsFrom(ctx context.Context, flow string, from int64, limit int) ([]queue.EventState, error) {
	if err := queue.CheckPageLimit(limit); err != nil {
		return nil, fmt.Errorf("flow events %q: %w", flow, err)
	}
	return s.flowEvents(ctx, flow, from, &limit)
}

// flowEvents reads flow's events from seq from on, at most *limit (nil:
// all).
func (s *Store) flowEvents(ctx context.Context, flow string, from int64, limit *int) ([]queue.EventState, error) {
	var out []queue.EventState
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		var one int
		// flow_seqs: a flow whose events all came in a caller's
		// transaction has no flows row until a write turn promotes them.
		err := tx.QueryRow(ctx, s.q(`SELECT 1 FROM {s}.flow_seqs WHERE flow = $1 AND last_seq > 0`), flow).Scan(&one)
		if isNoRows(err) {
			return queue.ErrNotFound
		}
		if err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, s.q(`SELECT `+qEventCols+` FROM {s}.events WHERE flow = $1 AND seq >= $2 ORDER BY seq LIMIT $3`), flow, from, limit)
		var e queue.EventState
		var avail, lease, acked int64
		_, err = pgx.ForEachRow(rows, eventDest(&e, &avail, &lease, &acked), func() error {
			e.AvailableAt, e.LeaseUntil, e.AckedAt = clock.Tick(avail), clock.Tick(lease), clock.Tick(acked)
			c := e
			c.Body = append([]byte(nil), e.Body...)
			out = append(out, c)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("flow events %q: %w", flow, err)
	}
	return out, nil
}

// Quarantined returns every quarantined event, ordered by flow and
// sequence number.
func (s *Store) Quarantined(ctx context.Context) ([]queue.QuarantinedEvent, error) {
	out, err := s.quarantinedRead(ctx, queue.RedriveFilter{})
	if err != nil {
		return nil, fmt.Errorf("quarantined: %w", err)
	}
	return out, nil
}

// Audit returns every redrive audit row in the order they were written
// (AuditAll returns the rows of every kind).
func (s *Store) Audit(ctx context.Context) ([]queue.AuditEntry, error) {
	out, err := s.readAudit(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}

func (s *Store) readAudit(ctx context.Context, q querier) ([]queue.AuditEntry, error) {
	rows, _ := q.Query(ctx, s.q(qSnapAudit))
	out := []queue.AuditEntry{}
	var a queue.AuditEntry
	var at int64
	_, err := pgx.ForEachRow(rows, []any{&a.ID, &a.EventID, &a.Generation, &a.Reason, &at}, func() error {
		a.At = clock.Tick(at)
		out = append(out, a)
		return nil
	})
	return out, err
}

// qFlows reads every flow with its head's state and backlog (events after
// the head are never claimed, so the backlog is last_seq - head_seq + 1)
// and, when $1 is true (FairRotation), its place in the rotation: the
// flows with a backlog numbered in (max(pass, vnow), joined) order, as
// queuestore's Flows numbers them; 0 otherwise.
const qFlows = `SELECT f.flow, f.served, f.last_seq, coalesce(f.head_seq, 0),
    coalesce(e.state, ''), f.ready_at,
    CASE WHEN f.head_seq IS NULL THEN 0 ELSE f.last_seq - f.head_seq + 1 END, f.weight, coalesce(r.k, 0),
    coalesce(f.paused, ''), f.dest
FROM {s}.flows f LEFT JOIN {s}.events e ON e.flow = f.flow AND e.seq = f.head_seq
LEFT JOIN (SELECT flow, row_number() OVER (ORDER BY greatest(pass, (SELECT vnow FROM {s}.meta WHERE id = 1)), joined) AS k
    FROM {s}.flows WHERE $1::boolean AND head_seq IS NOT NULL) AS r ON r.flow = f.flow
ORDER BY f.flow`

// Flows returns every flow, ordered by flow ID (byte order), read in one
// read transaction; under FairRotation each flow with a backlog has its
// Position.
func (s *Store) Flows(ctx context.Context) ([]queue.FlowState, error) {
	var out []queue.FlowState
	if err := s.promoteWaiting(ctx); err != nil {
		return nil, fmt.Errorf("flows: %w", err)
	}
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		p, err := readPolicy(ctx, tx, s.q)
		if err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, s.q(qFlows), rotation(p))
		var f queue.FlowState
		var readyAt *int64
		_, err = pgx.ForEachRow(rows, []any{&f.Flow, &f.Served, &f.LastSeq, &f.HeadSeq, &f.HeadState, &readyAt, &f.Backlog, &f.Weight, &f.Position, &f.PauseReason, &f.Destination}, func() error {
			c := f
			c.Paused = c.PauseReason != ""
			c.ReadyAt = nil
			if readyAt != nil {
				t := clock.Tick(*readyAt)
				c.ReadyAt = &t
			}
			out = append(out, c)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("flows: %w", err)
	}
	return out, nil
}

// Stats returns a summary of the store, read in one transaction.
func (s *Store) Stats(ctx context.Context) (queue.Stats, error) {
	var st queue.Stats
	if err := s.promoteWaiting(ctx); err != nil {
		return queue.Stats{}, fmt.Errorf("stats: %w", err)
	}
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		var mark int64
		if err := tx.QueryRow(ctx, s.q(`SELECT clock_mark, ticket FROM {s}.meta WHERE id = 1`)).Scan(&mark, &st.Ticket); err != nil {
			return err
		}
		st.ClockMark = clock.Tick(mark)
		if err := tx.QueryRow(ctx, s.q(`SELECT coalesce(max(version), 0) FROM {s}.schema_migrations`)).Scan(&st.SchemaVersion); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.q(`SELECT (SELECT count(*) FROM {s}.flows), (SELECT count(*) FROM {s}.audit),
    (SELECT count(*) FROM {s}.flows WHERE paused IS NOT NULL), (`+qCountDests+`)`)).Scan(&st.Flows, &st.AuditRows, &st.PausedFlows, &st.Destinations); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, s.q(`SELECT state, count(*) FROM {s}.events GROUP BY state`))
		var state string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
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
			return nil
		})
		return err
	})
	if err != nil {
		return queue.Stats{}, fmt.Errorf("stats: %w", err)
	}
	st.Quarantined = st.Events.Quarantined
	return st, nil
}

const (
	// qNextDueReady is the clock mark when some flow's head is dispatchable
	// already (flows_ready, whatever its destination).
	// The first entry of flows_ready, not EXISTS: the planner would read
	// EXISTS as a sequential scan that stops at the first ready row, which
	// is long when few flows are ready.
	// Committed arrivals (EnqueueTx) that no write turn has promoted yet
	// count as dispatchable now too: the next claim promotes them.
	qNextDueReady = `(SELECT m.clock_mark FROM {s}.meta AS m,
    LATERAL (SELECT served FROM {s}.flows WHERE ready ORDER BY dest, served, flow LIMIT 1) AS r
WHERE m.id = 1)
UNION ALL (SELECT clock_mark FROM {s}.meta WHERE id = 1 AND EXISTS (SELECT 1 FROM {s}.arrivals))
LIMIT 1`

	// qNextDueWaiting is the earliest ready_at of the flows whose head waits
	// for a tick (flows_waiting: the first entry of the index).
	// A paused flow's head is not due (flows_waiting leaves it out).
	qNextDueWaiting = `SELECT ready_at FROM {s}.flows WHERE NOT ready AND paused IS NULL AND ready_at IS NOT NULL
ORDER BY ready_at LIMIT 1`
)

// qOldestReady is the earliest ready_at of the flows marked dispatchable
// (flows_ready_due: the first entry).
const qOldestReady = `SELECT ready_at FROM {s}.flows WHERE ready ORDER BY ready_at LIMIT 1`

const (
	// qPausedDests is the names of the paused destinations (NULL when none
	// is): a read of the destinations table, which holds the operator's
	// registrations only (empty in a queue without destinations; a claim
	// reads it whole too).
	qPausedDests = `SELECT array_agg(name) FROM {s}.destinations WHERE paused IS NOT NULL`

	// qNextDueReadyDests is qNextDueReady leaving out the flows of paused
	// destinations (docs/contract.md §7.11): the first entry of flows_ready
	// of each destination that is not paused, the default one included (one
	// index seek each). Committed arrivals count as in qNextDueReady.
	qNextDueReadyDests = `(SELECT m.clock_mark FROM {s}.meta AS m,
    LATERAL (SELECT 1 FROM (SELECT '' COLLATE "C" AS name UNION ALL SELECT name FROM {s}.destinations WHERE paused IS NULL) AS d,
        LATERAL (SELECT served FROM {s}.flows AS f WHERE f.ready AND f.dest = d.name ORDER BY f.served, f.flow LIMIT 1) AS r
        LIMIT 1) AS head
WHERE m.id = 1)
UNION ALL (SELECT clock_mark FROM {s}.meta WHERE id = 1 AND EXISTS (SELECT 1 FROM {s}.arrivals))
LIMIT 1`

	// qNextDueWaitingDests is qNextDueWaiting leaving out the flows of the
	// paused destinations $1: flows_waiting in ready_at order up to the
	// first flow of a destination not paused. The entries it passes over
	// are flows of paused destinations whose head waits for a tick: every
	// write turn promotes the waiting heads due by then, whatever their
	// destination (qPromote), so they are only those that come due before
	// the next claim; and when no flow of a destination that is not paused
	// waits, the paused destinations' waiting flows.
	qNextDueWaitingDests = `SELECT ready_at FROM {s}.flows WHERE NOT ready AND paused IS NULL AND ready_at IS NOT NULL
    AND dest <> ALL ($1::text[])
ORDER BY ready_at LIMIT 1`

	// qOldestReadyDests is qOldestReady leaving out the flows of the paused
	// destinations $1: flows_ready_due in ready_at order up to the first
	// flow of a destination not paused. It passes over the paused
	// destinations' dispatchable flows that became due before it (at most
	// their number); OldestDue is a gauge's read, never on a claim's path.
	qOldestReadyDests = `SELECT ready_at FROM {s}.flows WHERE ready AND dest <> ALL ($1::text[])
ORDER BY ready_at LIMIT 1`
)

// pausedDests is the names of the paused destinations, nil when none is.
func (s *Store) pausedDests(ctx context.Context, tx pgx.Tx) ([]string, error) {
	var names []string
	if err := tx.QueryRow(ctx, s.q(qPausedDests)).Scan(&names); err != nil {
		return nil, err
	}
	return names, nil
}

// OldestDue returns the tick at which the longest-waiting dispatchable head
// became due, as queuestore.Store.OldestDue does: the smallest ready_at, at
// or below now, of the flows whose head can be claimed at now (a pending
// head's available_at, an in-flight head's lease end). now - the tick is
// how long work has waited for a claim, the lag a relay's gauge reports.
// ok is false when no head is dispatchable at now. The flows of a paused
// destination are left out (docs/contract.md §7.11); a destination at its
// concurrency or rate limit is not (that is transient). It reads the paused
// destinations' names and the first entry of two indexes (flows_ready_due,
// flows_waiting), or, when some destination is paused, those indexes up to
// the first flow of one that is not, in one read transaction, and writes
// nothing; now is not checked against the clock mark.
func (s *Store) OldestDue(ctx context.Context, now clock.Tick) (clock.Tick, bool, error) {
	var (
		due clock.Tick
		ok  bool
	)
	if err := s.promoteWaiting(ctx); err != nil {
		return 0, false, fmt.Errorf("oldest due: %w", err)
	}
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		paused, err := s.pausedDests(ctx, tx)
		if err != nil {
			return err
		}
		qs, args := []string{qOldestReady, qNextDueWaiting}, []any(nil)
		if paused != nil {
			qs, args = []string{qOldestReadyDests, qNextDueWaitingDests}, []any{paused}
		}
		for _, q := range qs {
			var at *int64
			err := tx.QueryRow(ctx, s.q(q), args...).Scan(&at)
			switch {
			case isNoRows(err):
				continue
			case err != nil:
				return err
			case at == nil:
				return fmt.Errorf("%w: a ready flow without a due tick", queue.ErrCorrupt)
			}
			if t := clock.Tick(*at); t <= now && (!ok || t < due) {
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

// qOldestWaiting is the smallest enqueue tick of the flows' heads: the
// first entry of flows_head_enqueued.
const qOldestWaiting = `SELECT head_enqueued_at FROM {s}.flows WHERE head_enqueued_at IS NOT NULL
ORDER BY head_enqueued_at LIMIT 1`

// OldestWaiting returns the enqueue tick of the oldest event that is not
// acked, whatever blocks it (a head waiting for its backoff, in flight or
// quarantined, or an event behind such a head; docs/contract.md §7.8); ok
// is false when every event is acked. A flow's events before its head are
// acked and the ones after it were enqueued after it, so that event is
// some flow's head: the one with the smallest head_enqueued_at, which the
// statements that move a head keep. One read of the first entry of
// flows_head_enqueued; it writes nothing.
func (s *Store) OldestWaiting(ctx context.Context) (clock.Tick, bool, error) {
	var at int64
	if err := s.promoteWaiting(ctx); err != nil {
		return 0, false, fmt.Errorf("oldest waiting: %w", err)
	}
	err := s.pool.QueryRow(ctx, s.q(qOldestWaiting)).Scan(&at)
	if isNoRows(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("oldest waiting: %w", err)
	}
	return clock.Tick(at), true, nil
}

// NextDue returns the earliest tick at which some flow's head becomes
// dispatchable, as queuestore.Store.NextDue does: the clock mark when a
// head is dispatchable already, else the earliest available_at of a
// pending head or lease end of an in-flight head; ok is false when no head
// is dispatchable and none waits for a tick. The flows of a paused
// destination are left out (docs/contract.md §7.11), as their heads are not
// claimed; a destination at its concurrency or rate limit still counts as
// due, since that is transient (a lease end, a few ticks of rate). It reads
// the paused destinations' names and, when none is paused, two index
// entries; when some is, one seek into flows_ready per destination that is
// not paused and flows_waiting up to the first flow of such a destination
// (qNextDueWaitingDests). One read transaction; it writes nothing.
func (s *Store) NextDue(ctx context.Context) (clock.Tick, bool, error) {
	var (
		due clock.Tick
		ok  bool
	)
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		paused, err := s.pausedDests(ctx, tx)
		if err != nil {
			return err
		}
		ready, waiting, args := qNextDueReady, qNextDueWaiting, []any(nil)
		if paused != nil {
			ready, waiting, args = qNextDueReadyDests, qNextDueWaitingDests, []any{paused}
		}
		var t int64
		err = tx.QueryRow(ctx, s.q(ready)).Scan(&t)
		if err == nil {
			due, ok = clock.Tick(t), true
			return nil
		}
		if !isNoRows(err) {
			return err
		}
		err = tx.QueryRow(ctx, s.q(waiting), args...).Scan(&t)
		if err == nil {
			due, ok = clock.Tick(t), true
			return nil
		}
		if isNoRows(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("next due: %w", err)
	}
	return due, ok, nil
}
