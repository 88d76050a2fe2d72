package queuestore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Moving whole flows between stores (docs/contract.md §7.10): the store's
// part of an offline reshard. ExportFlow reads one flow in one read
// transaction; ImportFlow writes it in one write transaction, exactly as
// it was, after queue.FlowExport.Check; ImportAudit appends queue-wide
// audit rows.

var _ queue.Transplanter = (*Store)(nil)

// MaxFlowNames is the most names one FlowNames call returns.
const MaxFlowNames = 10000

const (
	qFlowNames = `SELECT flow FROM flows WHERE flow > ?1 ORDER BY flow LIMIT ?2`

	qExportFlow = `SELECT f.flow, f.served, f.last_seq, coalesce(f.head_seq, 0), coalesce(e.state, ''), f.ready_at,
    CASE WHEN f.head_seq IS NULL THEN 0 ELSE f.last_seq - f.head_seq + 1 END, f.weight, f.paused` + qExportDestCol + `
FROM flows f LEFT JOIN events e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.flow = ?1`

	qExportEvents = `SELECT ` + qEventCols + `, ` + qEventError + `, ticket, enqueued_at` + qExportEventDestCol + ` FROM events WHERE flow = ?1 ORDER BY seq`

	// qExportAudit reads the rows about the flow: redrives of its events
	// (the flow's range of events, then audit_event per event) and the rows
	// whose detail names it (audit_flow, one range); ExportFlow sorts them
	// by id (write order).
	qExportAudit = `SELECT a.id, a.kind, coalesce(a.event_id, ''), coalesce(a.generation, 0), a.reason, coalesce(a.detail, ''), a.at
FROM events AS e CROSS JOIN audit AS a ON a.event_id = e.id WHERE e.flow = ?1
UNION ALL
SELECT id, kind, coalesce(event_id, ''), coalesce(generation, 0), reason, coalesce(detail, ''), at FROM audit
WHERE json_extract(detail, '$.flow') = ?1 AND detail IS NOT NULL AND kind <> 'redrive'`

	qImportFindFlow  = `SELECT 1 FROM flows WHERE flow = ?1`
	qImportFindEvent = `SELECT flow FROM events WHERE id = ?1`
	qImportRotation  = `SELECT vnow, joins FROM meta WHERE id = 1`
	qImportJoin      = `UPDATE meta SET joins = joins + 1 WHERE id = 1`
	qImportFlow      = `INSERT INTO flows (flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined, head_enqueued_at, paused)
VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?7, ?8, ?9, ?10)`
	qImportEvent = `INSERT INTO events
    (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
     available_at, lease_until, ticket, reason, enqueued_at, acked_at, dest)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)`
	qImportAudit = `INSERT INTO audit (kind, event_id, generation, reason, detail, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`
	// qImportMeta raises the ticket and the clock mark to at least ?1 and
	// ?2.
	qImportMeta = `UPDATE meta SET ticket = max(ticket, ?1), clock_mark = max(clock_mark, ?2) WHERE id = 1`
)

// FlowNames lists flow names in byte order after the name after ("" from
// the first), at most limit (1..MaxFlowNames): one range of the flows'
// primary key.
func (s *Store) FlowNames(ctx context.Context, after string, limit int) ([]string, error) {
	if limit < 1 || limit > MaxFlowNames {
		return nil, fmt.Errorf("%w: limit %d, want 1..%d", ErrInvalid, limit, MaxFlowNames)
	}
	var out []string
	err := s.withReadTx(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, qFlowNames, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f string
			if err := rows.Scan(&f); err != nil {
				return err
			}
			out = append(out, f)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("flow names: %w", err)
	}
	return out, nil
}

// ExportFlow reads flow whole in one read transaction: its row, every
// event the store keeps of it with its history, and the audit rows about
// it; an unknown flow is ErrNotFound.
func (s *Store) ExportFlow(ctx context.Context, flow string) (queue.FlowExport, error) {
	if err := queue.CheckFlow(flow); err != nil {
		return queue.FlowExport{}, err
	}
	var x queue.FlowExport
	err := s.withReadTx(ctx, func(tx *txn) error {
		var readyAt sql.NullInt64
		var paused, dest sql.NullString
		f := &x.Flow
		dests := []any{&f.Flow, &f.Served, &f.LastSeq, &f.HeadSeq, &f.HeadState, &readyAt, &f.Backlog, &f.Weight, &paused}
		if qExportDestCol != "" {
			dests = append(dests, &dest)
		}
		err := tx.QueryRowContext(ctx, qExportFlow, flow).Scan(dests...)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		f.Paused, f.PauseReason, f.Destination = paused.Valid, paused.String, dest.String
		if readyAt.Valid {
			t := clock.Tick(readyAt.Int64)
			f.ReadyAt = &t
		}
		rows, err := tx.QueryContext(ctx, qExportEvents, flow)
		if err != nil {
			return err
		}
		for rows.Next() {
			var e queue.ExportedEvent
			var avail, lease, acked, enq int64
			if err := rows.Scan(&e.ID, &e.Flow, &e.Seq, &e.Body, &e.State, &e.Generation, &e.Attempts, &e.LifetimeAttempts,
				&avail, &lease, &e.Reason, &acked, &e.Error, &e.Ticket, &enq, &e.Dest); err != nil {
				rows.Close()
				return err
			}
			e.AvailableAt, e.LeaseUntil, e.AckedAt, e.EnqueuedAt = clock.Tick(avail), clock.Tick(lease), clock.Tick(acked), clock.Tick(enq)
			x.Events = append(x.Events, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for k := range x.Events {
			if x.Events[k].History, err = readHistory(ctx, tx, x.Events[k].ID); err != nil {
				return err
			}
		}
		x.Audit, err = readAuditRecords(ctx, bound{tx, []any{flow}}, qExportAudit)
		slices.SortFunc(x.Audit, func(a, b queue.AuditRecord) int { return cmp.Compare(a.ID, b.ID) })
		return err
	})
	if err != nil {
		return queue.FlowExport{}, fmt.Errorf("export flow %q: %w", flow, err)
	}
	return x, nil
}

// ImportFlow writes x into the store in one transaction, exactly as it
// was (queue.Transplanter): a flow or event ID the store has is
// ErrConflict, an x that fails queue.FlowExport.Check (or that the schema
// refuses) ErrInvalid, a destination not registered here
// ErrUnknownDestination; each changes nothing. The ticket and the clock
// mark are raised to at least x's highest; the flow's head waits to be
// promoted by the next claim, and under FairRotation the flow joins the
// rotation at pass vnow, as a flow returning with a backlog does.
func (s *Store) ImportFlow(ctx context.Context, x queue.FlowExport, now clock.Tick) error {
	head, mark, err := x.Check()
	if err != nil {
		return err
	}
	f := x.Flow
	err = s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		var one int
		switch err := tx.QueryRowContext(ctx, qImportFindFlow, f.Flow).Scan(&one); {
		case err == nil:
			return fmt.Errorf("%w: flow %q is in the store already", ErrConflict, f.Flow)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("find flow: %w", err)
		}
		var ticket int64
		for _, e := range x.Events {
			var other string
			switch err := tx.QueryRowContext(ctx, qImportFindEvent, e.ID).Scan(&other); {
			case err == nil:
				return fmt.Errorf("%w: event %q is in the store already (flow %q)", ErrConflict, e.ID, other)
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("find event: %w", err)
			}
			ticket = max(ticket, e.Ticket)
		}
		if err := importDestinations(ctx, tx, x); err != nil {
			return err
		}
		var headSeq, readyAt, headEnq, paused any
		if head >= 0 {
			h := x.Events[head]
			headSeq, headEnq = h.Seq, int64(h.EnqueuedAt)
			switch h.State {
			case queue.StatePending:
				readyAt = int64(h.AvailableAt)
			case queue.StateInflight:
				readyAt = int64(h.LeaseUntil)
			}
		}
		if f.Paused {
			paused, readyAt = f.PauseReason, nil
		}
		var vnow, joins int64
		if err := tx.QueryRowContext(ctx, qImportRotation).Scan(&vnow, &joins); err != nil {
			return fmt.Errorf("read rotation: %w", err)
		}
		if _, err := tx.ExecContext(ctx, qImportFlow, f.Flow, f.LastSeq, f.Served, headSeq, readyAt, f.Weight,
			vnow, joins+1, headEnq, paused); err != nil {
			return importError("insert flow", err)
		}
		if _, err := tx.ExecContext(ctx, qImportJoin); err != nil {
			return fmt.Errorf("join rotation: %w", err)
		}
		if err := importFlowDestination(ctx, tx, f.Flow, f.Destination); err != nil {
			return err
		}
		for _, e := range x.Events {
			if _, err := tx.ExecContext(ctx, qImportEvent, e.ID, e.Flow, e.Seq, e.Body, e.State, e.Generation, e.Attempts,
				e.LifetimeAttempts, int64(e.AvailableAt), int64(e.LeaseUntil), e.Ticket, e.Reason, int64(e.EnqueuedAt), int64(e.AckedAt), e.Dest); err != nil {
				return importError("insert event", err)
			}
			for _, h := range e.History {
				if _, err := tx.ExecContext(ctx, qInsertHistory, e.ID, h.Generation, h.Attempt, int64(h.At), string(h.Outcome), h.Reason, h.Error); err != nil {
					return importError("insert history", err)
				}
			}
		}
		if err := insertAudit(ctx, tx, x.Audit); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qImportMeta, ticket, int64(max(mark, a.now))); err != nil {
			return fmt.Errorf("raise ticket and mark: %w", err)
		}
		return nil
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
	err = s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		if err := insertAudit(ctx, tx, rows); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qImportMeta, 0, int64(max(mark, a.now))); err != nil {
			return fmt.Errorf("raise mark: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("import audit: %w", err)
	}
	return nil
}

func insertAudit(ctx context.Context, tx *txn, rows []queue.AuditRecord) error {
	for _, r := range rows {
		var ev, gen, detail any
		if r.Kind == AuditRedrive {
			ev, gen = r.EventID, r.Generation
		} else {
			detail = r.Detail
		}
		if _, err := tx.ExecContext(ctx, qImportAudit, string(r.Kind), ev, gen, r.Reason, detail, int64(r.At)); err != nil {
			return importError("insert audit", err)
		}
	}
	return nil
}

// importError wraps a failed insert: a constraint the schema holds is
// ErrInvalid (the export broke it), anything else the SQL error.
func importError(what string, err error) error {
	if strings.Contains(err.Error(), "constraint failed") {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// bound is a querier whose queries take args.
type bound struct {
	tx   *txn
	args []any
}

func (b bound) QueryContext(ctx context.Context, q string, _ ...any) (*sql.Rows, error) {
	return b.tx.QueryContext(ctx, q, b.args...)
}
