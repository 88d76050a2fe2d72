package queuestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/dbfile"
	"github.com/fairrelay/fairrelay/queue"
)

// The life of an event (docs/contract.md §7.9): the operator's pause of a
// flow and the retention window's Prune. Scheduled events are Enqueue's
// (Event.NotBefore).

// Audit kinds of PauseFlow and ResumeFlow (queue's).
const (
	AuditPause  = queue.AuditPause  // PauseFlow: Detail is FlowChange as JSON
	AuditResume = queue.AuditResume // ResumeFlow: Detail is FlowChange as JSON
)

// FlowChange is queue.FlowChange: the detail of a 'pause' or 'resume' audit
// row, as JSON.
type FlowChange = queue.FlowChange

// PruneResult is queue.PruneResult: what a Prune deleted.
type PruneResult = queue.PruneResult

// Batch sizes of Prune (queue's): each batch is one short transaction.
const (
	DefaultPruneBatch = queue.DefaultPruneBatch // what the relay runtime and relayctl prune use
	MaxPruneBatch     = queue.MaxPruneBatch     // the largest limit Prune accepts
)

const (
	// qPauseRead reads flow ?1's pause and, for a resume, its head's
	// readiness: available_at of a pending head, lease_until of an
	// in-flight one, NULL for a quarantined head or none (no row for an
	// unknown flow).
	qPauseRead = `SELECT f.paused,
    CASE e.state WHEN 'pending' THEN e.available_at WHEN 'inflight' THEN e.lease_until END
FROM flows AS f LEFT JOIN events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.flow = ?1`

	// qPause pauses flow ?1 with reason ?2: its head leaves the claim's
	// indexes as a quarantined head does (flows_paused_blocks keeps it
	// there until the resume).
	qPause = `UPDATE flows SET paused = ?2, ready_at = NULL, ready = 0 WHERE flow = ?1`

	// qResume resumes flow ?1: its head's readiness ?2 (qPauseRead's) comes
	// back, ready at once when it is at or below now (?3).
	qResume = `UPDATE flows SET paused = NULL, ready_at = ?2, ready = coalesce(?2 <= ?3, 0) WHERE flow = ?1`

	// qRotResume is qResume under FairRotation: a head ready at once
	// returns as a flow with a backlog does, pass = max(pass, vnow); a head
	// ready later gets the same when a claim promotes it (qRotPromote).
	qRotResume = `UPDATE flows SET paused = NULL, ready_at = ?2, ready = coalesce(?2 <= ?3, 0),
    pass = CASE WHEN ?2 <= ?3 THEN max(pass, (SELECT vnow FROM meta WHERE id = 1)) ELSE pass END
WHERE flow = ?1`

	// qPausedCount counts the paused flows (flows_paused).
	qPausedCount = `SELECT count(*) FROM flows WHERE paused IS NOT NULL`
)

// PauseFlow pauses flow on an operator's word (docs/contract.md §7.9): its
// head is not dispatchable until ResumeFlow. A claim already in flight
// settles or expires as usual, and an expired one is not claimed again
// while the flow is paused; enqueues into the flow go on; its served
// count, weight and rotation pass are kept. It writes a 'pause' audit row
// (FlowChange as JSON in its detail) with the reason and now.
//
// Checks, in this order: the reason (as Redrive's), the flow name
// (ErrInvalid), the tick (as every write), the flow (ErrNotFound when it
// has never had an event), the pause (ErrFlowPaused when it is paused
// already). On any error nothing changes.
func (s *Store) PauseFlow(ctx context.Context, flow, reason string, now clock.Tick) error {
	if err := s.pauseOrResume(ctx, flow, reason, now, true); err != nil {
		return fmt.Errorf("pause flow %q: %w", flow, err)
	}
	return nil
}

// ResumeFlow resumes a paused flow on an operator's word (docs/contract.md
// §7.9): its head is dispatchable again from its own tick (at once when
// that has passed), and under FairRotation the flow returns as a flow with
// a backlog does. It writes a 'resume' audit row (FlowChange as JSON in its
// detail) with the reason and now.
//
// Checks, as PauseFlow's, with ErrFlowNotPaused for a flow that is not
// paused. On any error nothing changes.
func (s *Store) ResumeFlow(ctx context.Context, flow, reason string, now clock.Tick) error {
	if err := s.pauseOrResume(ctx, flow, reason, now, false); err != nil {
		return fmt.Errorf("resume flow %q: %w", flow, err)
	}
	return nil
}

func (s *Store) pauseOrResume(ctx context.Context, flow, reason string, now clock.Tick, pausing bool) error {
	if err := queue.CheckReason(reason); err != nil {
		return err
	}
	if err := queue.CheckFlow(flow); err != nil {
		return err
	}
	detail, err := json.Marshal(FlowChange{Flow: flow})
	if err != nil {
		return fmt.Errorf("encode flow change: %w", err)
	}
	return s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		var (
			paused  sql.NullString
			readyAt sql.NullInt64
		)
		err = tx.QueryRowContext(ctx, qPauseRead, flow).Scan(&paused, &readyAt)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("read flow: %w", err)
		}
		kind := AuditPause
		switch {
		case pausing && paused.Valid:
			return fmt.Errorf("%w: since %q", ErrFlowPaused, paused.String)
		case pausing:
			_, err = tx.ExecContext(ctx, qPause, flow, reason)
		case !paused.Valid:
			return ErrFlowNotPaused
		default:
			kind = AuditResume
			q := qResume
			if isRotation(a.pol) {
				q = qRotResume
			}
			_, err = tx.ExecContext(ctx, q, flow, readyAt, int64(a.now))
		}
		if err != nil {
			return fmt.Errorf("update flow: %w", err)
		}
		if _, err := tx.ExecContext(ctx, qInsertAuditKind, kind, reason, string(detail), int64(a.now)); err != nil {
			return fmt.Errorf("insert audit: %w", err)
		}
		return nil
	})
}

// Prune's statements. Each walks an index from its oldest entry and stops
// after ?2 rows: events_acked (acked events by acked_at, then ID) and audit_at
// (audit rows by tick); ?1 is the cut, now - retention.
const (
	// qPruneAudit deletes the oldest ?2 audit rows at or below the cut.
	qPruneAudit = `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at <= ?1 ORDER BY at, id LIMIT ?2)`

	// qPrunableSel is the prunable events of one batch: acked at or below
	// the cut, oldest ack first, ties in byte order of their IDs (the
	// order of events_acked, and of pgqueuestore's acked table). An event with a redrive audit row left
	// (a batch whose audit limit stopped before it) waits for a later
	// batch: the row references it, and was written before its ack, so it
	// is at or below the cut too.
	qPrunableSel = `FROM events WHERE state = 'acked' AND acked_at <= ?1
    AND NOT EXISTS (SELECT 1 FROM audit AS a WHERE a.event_id = events.id)
ORDER BY acked_at, id LIMIT ?2`

	// qPruneHistory deletes the history rows of the batch's events (one
	// range of the primary key per event); qPruneEvents then the events.
	qPruneHistory = `DELETE FROM history WHERE event_id IN (SELECT id ` + qPrunableSel + `)`
	qPruneEvents  = `DELETE FROM events WHERE rowid IN (SELECT rowid ` + qPrunableSel + `)`

	// qPrunableEvents and qPrunableAudit count what every batch of Prune
	// at the cut ?1 would delete together: a range of each index.
	qPrunableEvents = `SELECT count(*) FROM events WHERE state = 'acked' AND acked_at <= ?1`
	qPrunableAudit  = `SELECT count(*) FROM audit WHERE at <= ?1`
)

// cut is the tick at or below which retention r no longer keeps a row at
// now; ok is false when it keeps everything (r is 0, or no row can be old
// enough yet).
func cut(r, now clock.Tick) (clock.Tick, bool) {
	if r <= 0 || now < r {
		return 0, false
	}
	return now - r, true
}

// Prune deletes, in one transaction, at most limit acked events whose
// AckedAt is at or below now - the policy's Retention (with their attempt
// history), oldest ack first (ties in ID order), and at most limit audit
// rows whose tick is, oldest first (docs/contract.md §7.9). Pending, in-flight and quarantined
// events are never deleted; the flows table is not touched, so each flow's
// sequence numbering, served count, weight and pause go on. An event whose
// redrive audit row is still there waits for the batch that deletes the
// row. With Retention 0 nothing is deleted. More is set when a kind filled
// limit: the caller prunes again.
//
// Each deletion walks an index from its oldest entry (events_acked,
// audit_at), never the table. After the deletes, a file created with
// auto_vacuum=INCREMENTAL (every file this build creates) gives the pages
// the batch freed back to the file system, and up to limit pages more
// (PRAGMA incremental_vacuum: a batch of large bodies frees more pages than
// it deletes rows); a file
// without it reuses its free pages for later rows and keeps its size
// (PRAGMA auto_vacuum = INCREMENTAL then VACUUM, once, converts it;
// docs/contract.md §7.9). The vacuum runs in the batch's transaction: when
// it fails the deletes roll back with it, and the zero result returned
// with the error is what was deleted (receiverstore's Prune, whose vacuum
// runs after its commit, returns its batch's count with such an error).
//
// Prune is a write: limit is checked first (queue.CheckPruneLimit,
// ErrInvalid), then now as every write's tick (recorded as the clock mark).
func (s *Store) Prune(ctx context.Context, now clock.Tick, limit int) (PruneResult, error) {
	if err := queue.CheckPruneLimit(limit); err != nil {
		return PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	var r PruneResult
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		c, ok := cut(a.pol.Retention, a.now)
		if !ok {
			return nil
		}
		var free0 int64
		if err := tx.QueryRowContext(ctx, dbfile.FreePagesSQL).Scan(&free0); err != nil {
			return fmt.Errorf("free pages: %w", err)
		}
		res, err := tx.ExecContext(ctx, qPruneAudit, int64(c), limit)
		if err != nil {
			return fmt.Errorf("delete audit rows: %w", err)
		}
		if r.Audit, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("delete audit rows: %w", err)
		}
		if _, err := tx.ExecContext(ctx, qPruneHistory, int64(c), limit); err != nil {
			return fmt.Errorf("delete history: %w", err)
		}
		if res, err = tx.ExecContext(ctx, qPruneEvents, int64(c), limit); err != nil {
			return fmt.Errorf("delete events: %w", err)
		}
		if r.Events, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("delete events: %w", err)
		}
		r.More = r.Events == int64(limit) || r.Audit == int64(limit)
		if r.Events+r.Audit > 0 {
			// Give back what this batch freed, and up to limit pages
			// more (dbfile.IncrementalVacuum).
			var free1 int64
			if err := tx.QueryRowContext(ctx, dbfile.FreePagesSQL).Scan(&free1); err != nil {
				return fmt.Errorf("free pages: %w", err)
			}
			if _, err := tx.ExecContext(ctx, dbfile.IncrementalVacuum(free0, free1, limit)); err != nil {
				return fmt.Errorf("incremental vacuum: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	return r, nil
}

// Prunable counts, in one read transaction and without writing anything,
// what Prune at now would delete in all its batches together (More is never
// set). Each count is a range of an index (events_acked, audit_at): its
// cost grows with what is prunable, not with the table.
func (s *Store) Prunable(ctx context.Context, now clock.Tick) (PruneResult, error) {
	var r PruneResult
	err := s.withReadTx(ctx, func(tx *txn) error {
		p, err := readPolicy(ctx, tx)
		if err != nil {
			return err
		}
		c, ok := cut(p.Retention, now)
		if !ok {
			return nil
		}
		if err := tx.QueryRowContext(ctx, qPrunableEvents, int64(c)).Scan(&r.Events); err != nil {
			return fmt.Errorf("count events: %w", err)
		}
		if err := tx.QueryRowContext(ctx, qPrunableAudit, int64(c)).Scan(&r.Audit); err != nil {
			return fmt.Errorf("count audit rows: %w", err)
		}
		return nil
	})
	if err != nil {
		return PruneResult{}, fmt.Errorf("prunable: %w", err)
	}
	return r, nil
}
