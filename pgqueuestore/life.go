package pgqueuestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// The statements of pause and retention (docs/contract.md §7.9).
const (
	// qFlowPaused reads flow $1's pause reason (NULL when not paused) and,
	// for a resume, its head's readiness: available_at of a pending head,
	// lease_until of an in-flight one, NULL for a quarantined head or none;
	// no row for an unknown flow (queuestore's qPauseRead).
	qFlowPaused = `SELECT f.paused,
    CASE e.state WHEN 'pending' THEN e.available_at WHEN 'inflight' THEN e.lease_until END
FROM {s}.flows AS f LEFT JOIN {s}.events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.flow = $1`

	// qPause pauses flow $1 with reason $2: its head leaves the claim's
	// indexes as a quarantined head does (flows_paused_blocks keeps it
	// there until the resume).
	qPause = `UPDATE {s}.flows SET paused = $2, ready_at = NULL, ready = false WHERE flow = $1`

	// qResume ends flow $1's pause: its head's readiness $2 (qFlowPaused's)
	// comes back, ready at once when it is at or below now ($3), under
	// FairRotation ($4) with its pass clamped to vnow as every flow that
	// becomes ready again (rule 3 of docs/fairness.md); a head ready later
	// gets the same when a claim promotes it.
	qResume = `UPDATE {s}.flows SET paused = NULL, ready_at = $2::bigint, ready = coalesce($2::bigint <= $3::bigint, false),
    pass = CASE WHEN $4::boolean AND $2::bigint <= $3::bigint THEN greatest(pass, (SELECT vnow FROM {s}.meta WHERE id = 1)) ELSE pass END
WHERE flow = $1`

	// qPruneEvents deletes at most $2 acked events acked at or before $1,
	// in ack order, through the acked table's primary key, with their
	// ack rows and attempt history; it returns how many events it
	// deleted. An event whose redrive audit row is still there (a batch
	// whose audit limit stopped before it) waits for a later batch, as
	// on SQLite, where that row's foreign key holds the event: the row
	// was written before the ack, so it is at or below the cutoff too and
	// qPruneAudit, run first, reaches it. The rows to delete are passed
	// on as arrays (ctid = ANY, id = ANY), so that each deletion is a
	// probe per row, never a join that reads a whole table.
	qPruneEvents = `WITH k AS (
    SELECT ctid AS t FROM {s}.acked AS k WHERE at <= $1
        AND NOT EXISTS (SELECT 1 FROM {s}.audit AS a WHERE a.event_id = k.event_id)
    ORDER BY at, event_id LIMIT $2),
d AS (
    DELETE FROM {s}.acked WHERE ctid = ANY (ARRAY(SELECT t FROM k)) RETURNING event_id),
h AS (
    DELETE FROM {s}.attempts WHERE event_id = ANY (ARRAY(SELECT event_id FROM d))),
e AS (
    DELETE FROM {s}.events WHERE id = ANY (ARRAY(SELECT event_id FROM d)) AND state = 'acked' RETURNING 1)
SELECT count(*) FROM e`

	// qPruneAudit deletes at most $2 audit rows written at or before $1,
	// oldest first, through audit_at; it returns how many.
	qPruneAudit = `WITH d AS (
    DELETE FROM {s}.audit WHERE id = ANY (ARRAY(
        SELECT id FROM {s}.audit WHERE at <= $1 ORDER BY at, id LIMIT $2)) RETURNING 1)
SELECT count(*) FROM d`

	// qPrunable counts what every batch of Prune at cutoff $1 would
	// delete: index range counts of acked and audit_at.
	qPrunable = `SELECT (SELECT count(*) FROM {s}.acked WHERE at <= $1), (SELECT count(*) FROM {s}.audit WHERE at <= $1)`
)

// PauseFlow pauses flow on an operator's word (queue.Pauser,
// docs/contract.md §7.9): its head is not dispatchable until ResumeFlow;
// a claim in flight settles or expires as usual, and an expired one is not
// claimed again while paused. Enqueues into the flow go on; its served
// count, weight and rotation pass are kept. It writes a 'pause' audit row
// (queue.FlowChange as JSON in its detail) with the reason. Checks, in
// this order: the reason (queue.ErrEmptyReason, queue.ErrInvalid), the
// flow name (queue.ErrInvalid), the tick (as every write), the flow
// (queue.ErrNotFound), a pause already in place (queue.ErrFlowPaused). On
// any error nothing changes.
func (s *Store) PauseFlow(ctx context.Context, flow, reason string, now clock.Tick) error {
	if err := s.pauseFlow(ctx, flow, reason, now, true); err != nil {
		return fmt.Errorf("pause flow %q: %w", flow, err)
	}
	return nil
}

// ResumeFlow ends the pause of flow (queue.Pauser): its head is
// dispatchable again once due; under FairRotation the flow returns as a
// flow with a backlog returns (its pass at least the rotation's virtual
// time). It writes a 'resume' audit row with the reason. Checks as
// PauseFlow's, with queue.ErrFlowNotPaused for a flow that is not paused.
func (s *Store) ResumeFlow(ctx context.Context, flow, reason string, now clock.Tick) error {
	if err := s.pauseFlow(ctx, flow, reason, now, false); err != nil {
		return fmt.Errorf("resume flow %q: %w", flow, err)
	}
	return nil
}

func (s *Store) pauseFlow(ctx context.Context, flow, reason string, now clock.Tick, pause bool) error {
	if err := queue.CheckReason(reason); err != nil {
		return err
	}
	if err := queue.CheckFlow(flow); err != nil {
		return err
	}
	detail, err := json.Marshal(queue.FlowChange{Flow: flow})
	if err != nil {
		return fmt.Errorf("encode flow change: %w", err)
	}
	return s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, m, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		var paused *string
		var readyAt *int64
		err = tx.QueryRow(ctx, s.q(qFlowPaused), flow).Scan(&paused, &readyAt)
		if isNoRows(err) {
			return queue.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("read flow: %w", err)
		}
		kind := queue.AuditPause
		switch {
		case pause && paused != nil:
			return fmt.Errorf("%w: since %q", queue.ErrFlowPaused, *paused)
		case !pause && paused == nil:
			return queue.ErrFlowNotPaused
		case pause:
			_, err = tx.Exec(ctx, s.q(qPause), flow, reason)
		default:
			kind = queue.AuditResume
			_, err = tx.Exec(ctx, s.q(qResume), flow, readyAt, int64(now), rotation(m.policy))
		}
		if err != nil {
			return fmt.Errorf("write flow: %w", err)
		}
		if _, err := tx.Exec(ctx, s.q(qInsertAuditKind), string(kind), reason, string(detail), int64(now)); err != nil {
			return fmt.Errorf("insert audit: %w", err)
		}
		if !pause {
			// The flow's head may be dispatchable now: work for a claimant.
			return s.wake(ctx, tx)
		}
		return nil
	})
}

// Prune deletes what the policy's retention window no longer keeps
// (queue.Pruner, docs/contract.md §7.9), in one short transaction: at
// most limit acked events acked at or before now - Retention (with their
// attempt history), oldest ack first, and at most limit audit rows
// written at or before it, oldest first; More is set when a kind filled
// limit. With Retention 0 nothing is deleted. Pending, in-flight and
// quarantined events are never deleted; flows rows (sequence counters,
// served counts, weights, pauses) stay. limit is 1..queue.MaxPruneBatch
// (queue.ErrInvalid otherwise); now is checked and recorded as every
// write's tick. Both deletions go through an index (acked's primary key,
// audit_at); an event whose redrive audit row is left waits for the batch
// that deletes it.
func (s *Store) Prune(ctx context.Context, now clock.Tick, limit int) (queue.PruneResult, error) {
	if err := queue.CheckPruneLimit(limit); err != nil {
		return queue.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	var out queue.PruneResult
	err := s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, m, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		cutoff, ok := pruneCutoff(m.policy, now)
		if !ok {
			return nil
		}
		var pp pipe
		pp.query("prune audit", func(r pgx.Rows) error { return r.Scan(&out.Audit) }, s.q(qPruneAudit), int64(cutoff), limit)
		pp.query("prune events", func(r pgx.Rows) error { return r.Scan(&out.Events) }, s.q(qPruneEvents), int64(cutoff), limit)
		return pp.send(ctx, tx)
	})
	if err != nil {
		return queue.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	out.More = out.Events == int64(limit) || out.Audit == int64(limit)
	return out, nil
}

// Prunable counts what Prune at now would delete in all its batches
// together, in one read transaction, without writing anything (now is not
// checked against the clock mark).
func (s *Store) Prunable(ctx context.Context, now clock.Tick) (queue.PruneResult, error) {
	var out queue.PruneResult
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		p, err := readPolicy(ctx, tx, s.q)
		if err != nil {
			return err
		}
		cutoff, ok := pruneCutoff(p, now)
		if !ok {
			return nil
		}
		return tx.QueryRow(ctx, s.q(qPrunable), int64(cutoff)).Scan(&out.Events, &out.Audit)
	})
	if err != nil {
		return queue.PruneResult{}, fmt.Errorf("prunable: %w", err)
	}
	return out, nil
}

// pruneCutoff is the newest tick whose acks and audit rows the retention
// window of p no longer keeps at now; ok is false when it keeps
// everything (Retention 0, or now - Retention below 0).
func pruneCutoff(p queue.Policy, now clock.Tick) (clock.Tick, bool) {
	if p.Retention == 0 || now < p.Retention {
		return 0, false
	}
	return now - p.Retention, true
}
