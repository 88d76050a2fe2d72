package pgqueuestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Moving whole flows between stores (docs/contract.md §7.10), as
// queuestore's transplant.go: ExportFlow reads one flow in one read
// transaction, ImportFlow writes it in one write transaction exactly as it
// was after queue.FlowExport.Check, ImportAudit appends queue-wide audit
// rows.

var _ queue.Transplanter = (*Store)(nil)

// MaxFlowNames is the most names one FlowNames call returns.
const MaxFlowNames = 10000

const (
	qFlowNames = `SELECT flow FROM {s}.flow_seqs WHERE flow > $1 ORDER BY flow LIMIT $2`

	qExportFlow = `SELECT f.flow, f.served, s.last_seq, f.weight, coalesce(f.paused, '')` + qExportDestCol + `
FROM {s}.flows AS f JOIN {s}.flow_seqs AS s ON s.flow = f.flow WHERE f.flow = $1`

	qExportEvents = `SELECT ` + qEventCols + `, ticket, enqueued_at` + qExportEventDestCol + ` FROM {s}.events WHERE flow = $1 ORDER BY seq`

	qExportHistory = `SELECT a.event_id, a.generation, a.attempt, a.at, a.outcome, a.reason, a.error
FROM {s}.events AS e JOIN {s}.attempts AS a ON a.event_id = e.id WHERE e.flow = $1 ORDER BY a.event_id, a.generation`

	// qExportAudit reads the rows about the flow: redrives of its events
	// (the flow's range of events, then audit_event per event) and the rows
	// whose detail names it (audit_flow, one range), in write order.
	qExportAudit = `SELECT a.id, a.kind, coalesce(a.event_id, ''), coalesce(a.generation, 0), a.reason, coalesce(a.detail, ''), a.at
FROM {s}.events AS e CROSS JOIN LATERAL (SELECT * FROM {s}.audit AS r WHERE r.event_id = e.id OFFSET 0) AS a WHERE e.flow = $1
UNION ALL
SELECT id, kind, coalesce(event_id, ''), coalesce(generation, 0), reason, coalesce(detail, ''), at FROM {s}.audit
WHERE (detail::jsonb) ->> 'flow' = $1 AND detail IS NOT NULL AND kind <> 'redrive'
ORDER BY 1`

	qImportFindFlow   = `SELECT EXISTS (SELECT 1 FROM {s}.flow_seqs WHERE flow = $1)`
	qImportFindEvents = `SELECT id, flow FROM {s}.events WHERE id = ANY($1::text[]) LIMIT 1`
	qImportRotation   = `UPDATE {s}.meta SET joins = joins + 1 WHERE id = 1 RETURNING vnow, joins`
	qImportSeq        = `INSERT INTO {s}.flow_seqs (flow, last_seq) VALUES ($1, $2)`
	qImportFlow       = `INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined, head_enqueued_at, paused)
VALUES ($1, $2, $3, $4, $5, false, $6, $7, $8, $9, $10)`
	qImportEvents = `INSERT INTO {s}.events (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at, acked_at, dest)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::text[], $6::bigint[], $7::integer[], $8::bigint[],
    $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::bigint[], $14::bigint[], $15::text[])`
	qImportAttempts = `INSERT INTO {s}.attempts (event_id, generation, attempt, at, outcome, reason, error)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::integer[], $4::bigint[], $5::text[], $6::text[], $7::text[])`
	qImportAcked = `INSERT INTO {s}.acked (at, event_id) SELECT * FROM unnest($1::bigint[], $2::text[])`
	qImportAudit = `INSERT INTO {s}.audit (id, kind, event_id, generation, reason, detail, at)
SELECT coalesce(max(id), 0) + 1, $1, $2, $3, $4, $5, $6 FROM {s}.audit`
	qImportMeta = `UPDATE {s}.meta SET ticket = greatest(ticket, $1), clock_mark = greatest(clock_mark, $2) WHERE id = 1`
)

// FlowNames lists flow names in byte order after the name after ("" from
// the first), at most limit (1..MaxFlowNames): one range of flow_seqs'
// primary key.
func (s *Store) FlowNames(ctx context.Context, after string, limit int) ([]string, error) {
	if limit < 1 || limit > MaxFlowNames {
		return nil, fmt.Errorf("%w: limit %d, want 1..%d", queue.ErrInvalid, limit, MaxFlowNames)
	}
	rows, _ := s.pool.Query(ctx, s.q(qFlowNames), after, limit)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("flow names: %w", err)
	}
	return out, nil
}

// ExportFlow reads flow whole in one read transaction (after promoting
// committed arrivals, as Flows does): its row, every event the store keeps
// of it with its history, and the audit rows about it; an unknown flow is
// ErrNotFound. HeadSeq, HeadState and Backlog are derived from the events.
func (s *Store) ExportFlow(ctx context.Context, flow string) (queue.FlowExport, error) {
	if err := queue.CheckFlow(flow); err != nil {
		return queue.FlowExport{}, err
	}
	if err := s.promoteWaiting(ctx); err != nil {
		return queue.FlowExport{}, fmt.Errorf("export flow %q: %w", flow, err)
	}
	var x queue.FlowExport
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		f := &x.Flow
		var dest string
		dests := []any{&f.Flow, &f.Served, &f.LastSeq, &f.Weight, &f.PauseReason}
		if qExportDestCol != "" {
			dests = append(dests, &dest)
		}
		err := tx.QueryRow(ctx, s.q(qExportFlow), flow).Scan(dests...)
		if isNoRows(err) {
			return queue.ErrNotFound
		}
		if err != nil {
			return err
		}
		f.Paused, f.Destination = f.PauseReason != "", dest
		rows, _ := tx.Query(ctx, s.q(qExportEvents), flow)
		var e queue.ExportedEvent
		var avail, lease, acked, enq int64
		_, err = pgx.ForEachRow(rows, append(eventDest(&e.EventState, &avail, &lease, &acked), &e.Ticket, &enq, &e.Dest), func() error {
			c := e
			c.AvailableAt, c.LeaseUntil, c.AckedAt, c.EnqueuedAt = clock.Tick(avail), clock.Tick(lease), clock.Tick(acked), clock.Tick(enq)
			x.Events = append(x.Events, c)
			return nil
		})
		if err != nil {
			return err
		}
		at := make(map[string]int, len(x.Events))
		for k, e := range x.Events {
			at[e.ID] = k
			if f.HeadSeq == 0 && e.State != queue.StateAcked {
				f.HeadSeq, f.HeadState = e.Seq, e.State
				f.Backlog = f.LastSeq - e.Seq + 1
			}
		}
		rows, _ = tx.Query(ctx, s.q(qExportHistory), flow)
		var id, outcome string
		var h queue.Attempt
		var hAt int64
		_, err = pgx.ForEachRow(rows, []any{&id, &h.Generation, &h.Attempt, &hAt, &outcome, &h.Reason, &h.Error}, func() error {
			c := h
			c.At, c.Outcome = clock.Tick(hAt), queue.Outcome(outcome)
			k := at[id]
			x.Events[k].History = append(x.Events[k].History, c)
			return nil
		})
		if err != nil {
			return err
		}
		rows, _ = tx.Query(ctx, s.q(qExportAudit), flow)
		var r queue.AuditRecord
		var kind string
		var rAt int64
		_, err = pgx.ForEachRow(rows, []any{&r.ID, &kind, &r.EventID, &r.Generation, &r.Reason, &r.Detail, &rAt}, func() error {
			c := r
			c.Kind, c.At = queue.AuditKind(kind), clock.Tick(rAt)
			x.Audit = append(x.Audit, c)
			return nil
		})
		return err
	})
	if err != nil {
		return queue.FlowExport{}, fmt.Errorf("export flow %q: %w", flow, err)
	}
	return x, nil
}

// ImportFlow writes x into the store in one transaction, exactly as it
// was (queue.Transplanter), as queuestore's ImportFlow does: a flow or
// event ID the store has is ErrConflict, an x that fails
// queue.FlowExport.Check (or that the schema refuses) ErrInvalid, a
// destination not registered here ErrUnknownDestination; each changes
// nothing. The ticket and the clock mark are raised to at least x's
// highest; the flow's head waits for the next claim's promotion, and under
// FairRotation the flow joins at pass vnow, as a flow returning with a
// backlog does.
func (s *Store) ImportFlow(ctx context.Context, x queue.FlowExport, now clock.Tick) error {
	head, mark, err := x.Check()
	if err != nil {
		return err
	}
	f := x.Flow
	n := len(x.Events)
	ids, flows, bodies, states, reasons, evDests := make([]string, n), make([]string, n), make([][]byte, n), make([]string, n), make([]string, n), make([]string, n)
	seqs, gens, lifes, avails, leases, tickets, enqs := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	attempts := make([]int32, n)
	ackedAts := make([]*int64, n)
	var hIDs, hOutcomes, hReasons, hErrors []string
	var hGens, hAts []int64
	var hAttempts []int32
	var aAts []int64
	var aIDs []string
	var ticket int64
	for k, e := range x.Events {
		ids[k], flows[k], seqs[k], bodies[k], states[k], evDests[k] = e.ID, e.Flow, e.Seq, e.Body, e.State, e.Dest
		gens[k], attempts[k], lifes[k] = e.Generation, int32(e.Attempts), int64(e.LifetimeAttempts)
		avails[k], leases[k], tickets[k], reasons[k], enqs[k] = int64(e.AvailableAt), int64(e.LeaseUntil), e.Ticket, e.Reason, int64(e.EnqueuedAt)
		if e.State == queue.StateAcked {
			t := int64(e.AckedAt)
			ackedAts[k] = &t
			aAts, aIDs = append(aAts, t), append(aIDs, e.ID)
		}
		ticket = max(ticket, e.Ticket)
		for _, h := range e.History {
			hIDs, hGens, hAttempts, hAts = append(hIDs, e.ID), append(hGens, h.Generation), append(hAttempts, int32(h.Attempt)), append(hAts, int64(h.At))
			hOutcomes, hReasons, hErrors = append(hOutcomes, string(h.Outcome)), append(hReasons, h.Reason), append(hErrors, h.Error)
		}
	}
	err = s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, _, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, s.q(qImportFindFlow), f.Flow).Scan(&exists); err != nil {
			return fmt.Errorf("find flow: %w", err)
		}
		if exists {
			return fmt.Errorf("%w: flow %q is in the store already", queue.ErrConflict, f.Flow)
		}
		var id, other string
		switch err := tx.QueryRow(ctx, s.q(qImportFindEvents), ids).Scan(&id, &other); {
		case err == nil:
			return fmt.Errorf("%w: event %q is in the store already (flow %q)", queue.ErrConflict, id, other)
		case !isNoRows(err):
			return fmt.Errorf("find events: %w", err)
		}
		if err := s.importDestinations(ctx, tx, x); err != nil {
			return err
		}
		var headSeq, readyAt, headEnq *int64
		var paused *string
		if head >= 0 {
			h := x.Events[head]
			hs, he := h.Seq, int64(h.EnqueuedAt)
			headSeq, headEnq = &hs, &he
			switch h.State {
			case queue.StatePending:
				t := int64(h.AvailableAt)
				readyAt = &t
			case queue.StateInflight:
				t := int64(h.LeaseUntil)
				readyAt = &t
			}
		}
		if f.Paused {
			reason := f.PauseReason
			paused, readyAt = &reason, nil
		}
		var vnow, joins int64
		if err := tx.QueryRow(ctx, s.q(qImportRotation)).Scan(&vnow, &joins); err != nil {
			return fmt.Errorf("join rotation: %w", err)
		}
		if _, err := tx.Exec(ctx, s.q(qImportSeq), f.Flow, f.LastSeq); err != nil {
			return importError("insert flow_seqs", err)
		}
		if _, err := tx.Exec(ctx, s.q(qImportFlow), f.Flow, f.LastSeq, f.Served, headSeq, readyAt, f.Weight, vnow, joins, headEnq, paused); err != nil {
			return importError("insert flow", err)
		}
		if err := s.importFlowDestination(ctx, tx, f.Flow, f.Destination); err != nil {
			return err
		}
		if n > 0 {
			if _, err := tx.Exec(ctx, s.q(qImportEvents), ids, flows, seqs, bodies, states, gens, attempts, lifes,
				avails, leases, tickets, reasons, enqs, ackedAts, evDests); err != nil {
				return importError("insert events", err)
			}
		}
		if len(hIDs) > 0 {
			if _, err := tx.Exec(ctx, s.q(qImportAttempts), hIDs, hGens, hAttempts, hAts, hOutcomes, hReasons, hErrors); err != nil {
				return importError("insert history", err)
			}
		}
		if len(aIDs) > 0 {
			if _, err := tx.Exec(ctx, s.q(qImportAcked), aAts, aIDs); err != nil {
				return importError("record acks", err)
			}
		}
		if err := s.insertAudit(ctx, tx, x.Audit); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qImportMeta), ticket, int64(max(mark, now))); err != nil {
			return fmt.Errorf("raise ticket and mark: %w", err)
		}
		return s.wake(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("import flow %q: %w", f.Flow, err)
	}
	return nil
}

// ImportAudit appends queue-wide audit rows in order, as they were
// (queue.CheckQueueAudit); the clock mark is raised to their highest tick.
func (s *Store) ImportAudit(ctx context.Context, rows []queue.AuditRecord, now clock.Tick) error {
	mark, err := queue.CheckQueueAudit(rows)
	if err != nil {
		return err
	}
	err = s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, _, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		if err := s.insertAudit(ctx, tx, rows); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qImportMeta), 0, int64(max(mark, now))); err != nil {
			return fmt.Errorf("raise mark: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("import audit: %w", err)
	}
	return nil
}

func (s *Store) insertAudit(ctx context.Context, tx pgx.Tx, rows []queue.AuditRecord) error {
	for _, r := range rows {
		var ev, detail *string
		var gen *int64
		if r.Kind == queue.AuditRedrive {
			id, g := r.EventID, r.Generation
			ev, gen = &id, &g
		} else {
			d := r.Detail
			detail = &d
		}
		if _, err := tx.Exec(ctx, s.q(qImportAudit), string(r.Kind), ev, gen, r.Reason, detail, int64(r.At)); err != nil {
			return importError("insert audit", err)
		}
	}
	return nil
}

// importError wraps a failed insert: a constraint the schema holds
// (SQLSTATE class 23, or a bad JSON detail) is ErrInvalid (the export
// broke it), anything else the SQL error.
func importError(what string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code[:2] == "23" || pe.Code == "22P02") {
		return fmt.Errorf("%w: %s: %v", queue.ErrInvalid, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
