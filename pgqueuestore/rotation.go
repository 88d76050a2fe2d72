package pgqueuestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// ReasonEnqueueWeight is queue.ReasonEnqueueWeight: the reason of the
// 'weight' audit row an enqueue writes when its Event.Weight changes the
// weight of an existing flow.
const ReasonEnqueueWeight = queue.ReasonEnqueueWeight

// WeightChange is queue.WeightChange: the detail of a 'weight' audit row,
// as JSON, the same bytes in every backend.
type WeightChange = queue.WeightChange

// The rotation's statements (FairRotation only; a FairMinServed queue runs
// the statements of claim.go, enqueue.go, settle.go and redrive.go, which
// never read or write pass, joined, vnow, vtail or joins). They are
// queuestore's (rotation.go) in PostgreSQL: every statement that turns a
// flow's ready flag on clamps its pass to vnow (rule 3 of
// docs/fairness.md), and an enqueue that gives a flow a head joins it at
// the tail (rule 2). The meta row they read is locked by admit.
const (
	// qRotRejoin joins every flow that has a head at the tail, in flow ID
	// order (byte order: COLLATE "C"), when a queue switches to
	// FairRotation (SetPolicy): as if they arrived one after the other.
	qRotRejoin = `UPDATE {s}.flows AS f SET pass = greatest(f.pass, m.vtail), joined = m.joins + r.k
FROM (SELECT flow AS fl, row_number() OVER (ORDER BY flow) AS k FROM {s}.flows WHERE head_seq IS NOT NULL) AS r,
    (SELECT vtail, joins FROM {s}.meta WHERE id = 1) AS m
WHERE f.flow = r.fl`
	qRotRejoinCount = `UPDATE {s}.meta SET joins = joins + (SELECT count(*) FROM {s}.flows WHERE head_seq IS NOT NULL) WHERE id = 1`

	qRotPromote = `UPDATE {s}.flows SET ready = true, pass = greatest(pass, (SELECT vnow FROM {s}.meta WHERE id = 1))
WHERE NOT ready AND ready_at <= $1 AND paused IS NULL`

	// qRotPickHead is qPickHead in rotation order: the smallest (pass,
	// joined), straight from flows_rotation, with what the claim's stride
	// needs. Under rotation every flow with a head has joined the rotation
	// (joined > 0: qRotArrive, qRotRejoin, an import), which the index's
	// predicate asks of its rows (migration 12).
	qRotPickHead = `SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
    e.body, e.generation, f.pass, f.weight, f.served
FROM {s}.flows AS f LEFT JOIN {s}.events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.ready AND f.joined > 0 AND f.dest = '' ORDER BY f.pass, f.joined LIMIT 1`

	// qRotPickHeads is qRotPickHead without its LIMIT, its columns in
	// qPickHeads's order (pickDefault appends "LIMIT n").
	qRotPickHeads = `SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
    e.body, e.generation, f.pass, f.served, f.weight, f.dest
FROM {s}.flows AS f LEFT JOIN {s}.events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.ready AND f.joined > 0 AND f.dest = '' ORDER BY f.pass, f.joined`

	// qRotServeFlows is qRotServeFlow for the flows of the array $1, the
	// k-th getting the k-th pass of $3.
	qRotServeFlows = `UPDATE {s}.flows AS f SET served = f.served + 1, ready_at = $2, ready = false, pass = u.pass
FROM unnest($1::text[], $3::bigint[]) AS u(flow, pass)
WHERE f.flow = u.flow`

	qRotServeFlow = `UPDATE {s}.flows SET served = served + 1, ready_at = $2, ready = false, pass = $3 WHERE flow = $1`

	// qRotSetClock records the ticket and the claims' virtual time: vnow is
	// the pass of the flow claimed last, vtail the largest pass assigned.
	qRotSetClock = `UPDATE {s}.meta SET ticket = $1, vnow = $2, vtail = greatest(vtail, $3) WHERE id = 1`

	qRotSetHead = `UPDATE {s}.flows SET head_seq = $2::bigint, ready_at = $3::bigint,
    ready = coalesce($3::bigint <= $4::bigint, false) AND paused IS NULL,
    pass = CASE WHEN $3::bigint <= $4::bigint THEN greatest(pass, (SELECT vnow FROM {s}.meta WHERE id = 1)) ELSE pass END,
    head_enqueued_at = $5::bigint
WHERE flow = $1`

	qRotSetReadyNow = `UPDATE {s}.flows SET ready_at = $2, ready = paused IS NULL,
    pass = greatest(pass, (SELECT vnow FROM {s}.meta WHERE id = 1))
WHERE flow = $1`

	// qFlowHeadWeight reads what SetWeight needs of a flow: whether it
	// has a head, and its weight (no row for a new flow).
	qFlowHeadWeight = `SELECT head_seq IS NOT NULL, weight FROM {s}.flows WHERE flow = $1`

	// qRotArrive joins flow $1 at the tail: pass = max(pass, vtail),
	// joined = joins + 1 (qRotJoin then counts the arrival).
	qRotArrive = `UPDATE {s}.flows SET pass = greatest(pass, (SELECT vtail FROM {s}.meta WHERE id = 1)),
    joined = (SELECT joins FROM {s}.meta WHERE id = 1) + 1 WHERE flow = $1`
	qRotJoin = `UPDATE {s}.meta SET joins = joins + 1 WHERE id = 1`

	qSetWeight = `UPDATE {s}.flows SET weight = $2 WHERE flow = $1`

	qSnapRot = `SELECT vnow, vtail, joins FROM {s}.meta WHERE id = 1`
)

// rotation reports whether p's flow order is FairRotation.
func rotation(p queue.Policy) bool { return p.Fairness == queue.FairRotation }

// switchFairness does what a change of the recorded fairness from old to
// neu needs, in the transaction that records it: to FairRotation, every
// flow with a head joins the tail in flow ID order (pass = max(pass,
// vtail), joined = joins + 1, 2, …); back to FairMinServed, pass, joined,
// vnow, vtail and joins are kept as they are (min_served never reads
// them). flows_rotation exists under every policy (migration 2) and holds
// only the flows that have joined the rotation (migration 12), so a queue
// that never used the rotation writes no entry in it.
func (s *Store) switchFairness(ctx context.Context, tx pgx.Tx, old, neu queue.Fairness) error {
	if old == "" {
		old = queue.FairMinServed
	}
	if neu == "" {
		neu = queue.FairMinServed
	}
	if old == neu || neu != queue.FairRotation {
		return nil
	}
	for _, q := range []string{qRotRejoin, qRotRejoinCount} {
		if _, err := tx.Exec(ctx, s.q(q)); err != nil {
			return fmt.Errorf("switch to rotation: %w", err)
		}
	}
	return nil
}

// SetWeight sets the weight of flow to weight (queue.MinWeight ..
// queue.MaxWeight), on an operator's word, and writes a 'weight' audit row
// (WeightChange as JSON in its detail) with the reason and now, as
// queuestore.Store.SetWeight does. The weight applies from the flow's next
// claim under FairRotation (docs/contract.md §7.6); under FairMinServed it
// is stored and does not change the order. Setting the weight a flow
// already has is not an error and still writes the audit row.
//
// Checks, in this order: the weight (queue.ErrInvalid), the reason, the
// flow name (queue.ErrInvalid), the tick (as every write), the flow
// (queue.ErrNotFound when it has never had an event). On any error
// nothing changes.
func (s *Store) SetWeight(ctx context.Context, flow string, weight int, reason string, now clock.Tick) error {
	if err := queue.CheckWeight(weight); err != nil {
		return fmt.Errorf("set weight: %w", err)
	}
	if err := queue.CheckReason(reason); err != nil {
		return fmt.Errorf("set weight: %w", err)
	}
	if err := queue.CheckFlow(flow); err != nil {
		return fmt.Errorf("set weight: %w", err)
	}
	err := s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, _, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		var hasHead bool
		var old int
		err = tx.QueryRow(ctx, s.q(qFlowHeadWeight), flow).Scan(&hasHead, &old)
		if isNoRows(err) {
			return fmt.Errorf("%w: flow %q", queue.ErrNotFound, flow)
		}
		if err != nil {
			return fmt.Errorf("read flow: %w", err)
		}
		return s.writeWeight(ctx, tx, flow, old, weight, reason, now)
	})
	if err != nil {
		return fmt.Errorf("set weight of %q: %w", flow, err)
	}
	return nil
}

// writeWeight records flow's new weight and its audit row.
func (s *Store) writeWeight(ctx context.Context, tx pgx.Tx, flow string, old, weight int, reason string, now clock.Tick) error {
	detail, err := json.Marshal(WeightChange{Flow: flow, Old: old, New: weight})
	if err != nil {
		return fmt.Errorf("encode weight change: %w", err)
	}
	if _, err := tx.Exec(ctx, s.q(qSetWeight), flow, weight); err != nil {
		return fmt.Errorf("set weight: %w", err)
	}
	if _, err := tx.Exec(ctx, s.q(qInsertAuditKind), string(queue.AuditWeight), reason, string(detail), int64(now)); err != nil {
		return fmt.Errorf("insert audit: %w", err)
	}
	return nil
}
