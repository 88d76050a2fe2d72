package queuestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Weights of flows (docs/contract.md §7.6): an integer from MinWeight to
// MaxWeight; a flow whose weight was never set has weight 1. Weights are
// stored under every policy; only FairRotation's order uses them.
const (
	MinWeight = queue.MinWeight // the smallest weight
	MaxWeight = queue.MaxWeight // the largest weight
)

// RotationScale is the virtual time one claim costs a flow of weight 1
// under FairRotation: 720720 = lcm(1..16), fairness.Scale.
const RotationScale int64 = 720720

// ReasonEnqueueWeight is queue.ReasonEnqueueWeight: the reason of the
// 'weight' audit row an enqueue writes when its Event.Weight changes the
// weight of an existing flow.
const ReasonEnqueueWeight = queue.ReasonEnqueueWeight

// stride is fairness.Stride: the virtual time the claim of a flow of
// weight w costs when served claims were made before it.
//
//	r = served % w; stride = (r+1)*RotationScale/w - r*RotationScale/w
func stride(w int, served int64) int64 {
	ww := int64(w)
	r := served % ww
	return (r+1)*RotationScale/ww - r*RotationScale/ww
}

// WeightChange is queue.WeightChange: the detail of a 'weight' audit row,
// as JSON.
type WeightChange = queue.WeightChange

// The rotation's statements (FairRotation only; a FairMinServed queue runs
// the statements of claim.go, enqueue.go, settle.go and redrive.go, which
// never read or write pass, joined, vnow, vtail or joins). Every statement
// that turns a flow's ready flag on clamps its pass to vnow (rule 3 of
// docs/fairness.md), and an enqueue that gives a flow a head joins it at
// the tail (rule 2).
const (
	// qRotIndex is the index of the rotation's pick: ready flows in (pass,
	// joined) order. It exists only while the recorded policy is
	// FairRotation: a min_served queue does not maintain it.
	// Its keys begin with the flow's destination, as flows_ready's
	// (docs/contract.md §7.11: one range per destination).
	qRotIndex     = `CREATE INDEX IF NOT EXISTS flows_rotation ON flows (ready, dest, pass, joined) WHERE ready = 1`
	qRotIndexDrop = `DROP INDEX IF EXISTS flows_rotation`

	// qRotRejoin joins every flow that has a head at the tail, in flow ID
	// order, when a queue switches to FairRotation (SetPolicy): as if they
	// arrived one after the other. One pass over flows, at switch time.
	qRotRejoin = `UPDATE flows SET pass = max(flows.pass, m.vtail), joined = m.joins + r.k
FROM (SELECT flow AS f, row_number() OVER (ORDER BY flow) AS k FROM flows WHERE head_seq IS NOT NULL) AS r,
    (SELECT vtail, joins FROM meta WHERE id = 1) AS m
WHERE flows.flow = r.f`
	qRotRejoinCount = `UPDATE meta SET joins = joins + (SELECT count(*) FROM flows WHERE head_seq IS NOT NULL) WHERE id = 1`

	qRotPromote = `UPDATE flows SET ready = 1, pass = max(pass, (SELECT vnow FROM meta WHERE id = 1))
WHERE ready = 0 AND ready_at <= ?1`

	// qRotPickHeads is qPickHeads in rotation order: the next ?3 ready
	// flows of the destination ?4 after (pass ?1, joined ?2) in (pass,
	// joined) order, with what the claim's stride needs.
	qRotPickHeads = `SELECT json_group_array(json_array(flow, head_seq, id, state, attempts, lease_until,
    available_at, hex(body), generation, pass, joined, weight, served, frow, erow)), EXISTS (SELECT 1 FROM destinations)
FROM (SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
        e.body, e.generation, f.pass, f.joined, f.weight, f.served, f.rowid AS frow, e.rowid AS erow
    FROM flows AS f LEFT JOIN events AS e ON e.flow = f.flow AND e.seq = f.head_seq
    WHERE f.ready = 1 AND f.dest = ?4 AND (f.pass, f.joined) > (?1, ?2) ORDER BY f.pass, f.joined LIMIT ?3)`

	// qRotPickDestKeys is qPickDestKeys in rotation order: rows [pass,
	// joined, flow rowid], all in flows_rotation's entries.
	qRotPickDestKeys = `SELECT '[' || group_concat('[' || k || coalesce(',' || h, '') || ']', ',') || ']' FROM (SELECT j.key AS k, (
    SELECT group_concat(r, ',') FROM (SELECT json_array(f.pass, f.joined, f.rowid) AS r
    FROM flows AS f WHERE f.ready = 1 AND f.dest = j.value ORDER BY f.pass, f.joined LIMIT ?2)) AS h
FROM json_each(?1) AS j)`

	// qRotPickDestKey is qPickDestKey in rotation order.
	qRotPickDestKey = `SELECT '[' || group_concat('[' || j.key || coalesce(',[' || (SELECT f.pass || ',' || f.joined || ',' || f.rowid
    FROM flows AS f WHERE f.ready = 1 AND f.dest = j.value ORDER BY f.pass, f.joined LIMIT 1) || ']', '') || ']', ',') || ']'
FROM json_each(?1) AS j`

	// qRotPickKeys is qPickKeys in rotation order: after (pass ?1, joined
	// ?2).
	qRotPickKeys = `SELECT json_group_array(json_array(pass, joined, frow))
FROM (SELECT f.pass, f.joined, f.rowid AS frow FROM flows AS f
    WHERE f.ready = 1 AND f.dest = ?4 AND (f.pass, f.joined) > (?1, ?2) ORDER BY f.pass, f.joined LIMIT ?3)`

	// qRotServeFlow is qRotServeFlows for one flow (rowid ?1, new pass
	// ?3), as qServeFlow.
	qRotServeFlow = `UPDATE flows SET served = served + 1, ready_at = ?2, ready = 0, pass = ?3 WHERE rowid = ?1`

	// qRotServeFlows serves the flows of the JSON array ?1 of [flow rowid,
	// new pass]: qServeFlows, and each flow's pass moves on by its stride.
	qRotServeFlows = `WITH j (r, p) AS MATERIALIZED (SELECT value ->> 0, value ->> 1 FROM json_each(?1))
UPDATE OR FAIL flows SET served = served + 1, ready_at = ?2, ready = 0, pass = j.p
FROM j WHERE flows.rowid = j.r`

	// qRotSetClock records the ticket and the claims' virtual time: vnow is
	// the pass of the flow claimed last, vtail the largest pass assigned.
	qRotSetClock = `UPDATE meta SET ticket = ?1, vnow = ?2, vtail = max(vtail, ?3) WHERE id = 1`

	qRotSetHead = `UPDATE flows SET head_seq = ?2, ready_at = ?3, ready = coalesce(?3 <= ?4, 0), head_enqueued_at = ?5,
    pass = CASE WHEN ?3 <= ?4 THEN max(pass, (SELECT vnow FROM meta WHERE id = 1)) ELSE pass END
WHERE flow = ?1`

	qRotSetHeads = `WITH j (r, h, a, q) AS MATERIALIZED (SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?1))
UPDATE OR FAIL flows SET head_seq = j.h, ready_at = j.a, ready = coalesce(j.a <= ?2, 0), head_enqueued_at = j.q,
    pass = CASE WHEN j.a <= ?2 THEN max(pass, (SELECT vnow FROM meta WHERE id = 1)) ELSE pass END
FROM j WHERE flows.rowid = j.r`

	qRotSetReadyNow = `UPDATE flows SET ready_at = ?2, ready = 1, pass = max(pass, (SELECT vnow FROM meta WHERE id = 1))
WHERE flow = ?1`

	// qFlowHeadWeight reads what an enqueue with a weight, or under
	// FairRotation, needs besides qFindEventFlow: whether the flow has a
	// head, and its weight (no row for a new flow).
	qFlowHeadWeight = `SELECT head_seq IS NOT NULL, weight FROM flows WHERE flow = ?1`

	// qRotArrive joins flow ?1 at the tail: pass = max(pass, vtail),
	// joined = joins + 1 (qRotJoin then counts the arrival).
	qRotArrive = `UPDATE flows SET pass = max(pass, (SELECT vtail FROM meta WHERE id = 1)),
    joined = (SELECT joins FROM meta WHERE id = 1) + 1 WHERE flow = ?1`
	qRotJoin = `UPDATE meta SET joins = joins + 1 WHERE id = 1`

	qSetWeight = `UPDATE flows SET weight = ?2 WHERE flow = ?1`
)

// switchFairness does what a change of the recorded fairness from old to
// neu needs, in the transaction that records it: to FairRotation, the
// rotation's index is created and every flow with a head joins the tail in
// flow ID order (pass = max(pass, vtail), joined = joins + 1, 2, …);
// back to FairMinServed, the index is dropped and pass, joined, vnow, vtail
// and joins are kept as they are (min_served never reads them).
func switchFairness(ctx context.Context, tx *txn, old, neu Fairness) error {
	if old == "" {
		old = FairMinServed
	}
	if neu == "" {
		neu = FairMinServed
	}
	if old == neu {
		return nil
	}
	if neu == FairRotation {
		for _, q := range []string{qRotIndex, qRotRejoin, qRotRejoinCount} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("switch to rotation: %w", err)
			}
		}
		return nil
	}
	if _, err := tx.ExecContext(ctx, qRotIndexDrop); err != nil {
		return fmt.Errorf("switch to %s: %w", neu, err)
	}
	return nil
}

// rotation reports whether p's flow order is FairRotation.
func isRotation(p Policy) bool { return p.Fairness == FairRotation }

// SetWeight sets the weight of flow to weight (MinWeight..MaxWeight), on an
// operator's word, and writes a 'weight' audit row (WeightChange as JSON in
// its detail) with the reason and now. The weight applies from the flow's
// next claim under FairRotation (docs/contract.md §7.6); under FairMinServed
// it is stored and does not change the order. Setting the weight a flow
// already has is not an error and still writes the audit row.
//
// Checks, in this order: the weight (ErrInvalid), the reason (as
// Redrive's), the flow name (ErrInvalid), the tick (as every write), the
// flow (ErrNotFound when it has never had an event). On any error nothing
// changes.
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
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		var hasHead int64
		var old int
		err = tx.QueryRowContext(ctx, qFlowHeadWeight, flow).Scan(&hasHead, &old)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: flow %q", ErrNotFound, flow)
		}
		if err != nil {
			return fmt.Errorf("read flow: %w", err)
		}
		return writeWeight(ctx, tx, flow, old, weight, reason, a.now)
	})
	if err != nil {
		return fmt.Errorf("set weight of %q: %w", flow, err)
	}
	return nil
}

// writeWeight records flow's new weight and its audit row.
func writeWeight(ctx context.Context, tx *txn, flow string, old, weight int, reason string, now clock.Tick) error {
	detail, err := json.Marshal(WeightChange{Flow: flow, Old: old, New: weight})
	if err != nil {
		return fmt.Errorf("encode weight change: %w", err)
	}
	if _, err := tx.ExecContext(ctx, qSetWeight, flow, weight); err != nil {
		return fmt.Errorf("set weight: %w", err)
	}
	if _, err := tx.ExecContext(ctx, qInsertAuditKind, AuditWeight, reason, string(detail), int64(now)); err != nil {
		return fmt.Errorf("insert audit: %w", err)
	}
	return nil
}

// enqueueWeighted is enqueueOne for an event with a weight, or for any
// event under FairRotation: the same checks and writes, plus the flow's
// weight (a new flow gets e.Weight, or 1; an existing flow whose weight
// differs from a non-zero e.Weight gets it, with a 'weight' audit row of
// reason ReasonEnqueueWeight) and, under FairRotation, the arrival of a
// flow that had no head (it joins at the tail). A duplicate changes
// nothing, whatever its weight.
func (s *Store) enqueueWeighted(ctx context.Context, tx *txn, pol Policy, e Event, now clock.Tick) (Enqueued, error) {
	var (
		flow    sql.NullString
		seq     sql.NullInt64
		body    []byte
		lastSeq sql.NullInt64
		found   sql.NullBool // the flow has a head; read again below with its weight
	)
	if err := tx.QueryRowContext(ctx, qFindEventFlow, e.ID, e.Flow).Scan(&flow, &seq, &body, &lastSeq, &found); err != nil {
		return Enqueued{}, fmt.Errorf("find event: %w", err)
	}
	if flow.Valid {
		if flow.String == e.Flow && string(body) == string(e.Body) {
			return Enqueued{Seq: seq.Int64, Duplicate: true}, nil
		}
		return Enqueued{}, fmt.Errorf("%w: stored in flow %q as seq %d", ErrConflict, flow.String, seq.Int64)
	}
	if err := checkEventDest(ctx, tx, e); err != nil {
		return Enqueued{}, err
	}
	next := int64(1)
	arrives := true
	if lastSeq.Valid {
		var hasHead int64
		var old int
		if err := tx.QueryRowContext(ctx, qFlowHeadWeight, e.Flow).Scan(&hasHead, &old); err != nil {
			return Enqueued{}, fmt.Errorf("read flow: %w", err)
		}
		arrives = hasHead == 0
		next = lastSeq.Int64 + 1
		if err := takeSeq(ctx, tx, e.Flow, next, hasHead != 0, availableAt(e, now), now); err != nil {
			return Enqueued{}, err
		}
		if e.Weight != 0 && e.Weight != old {
			if err := writeWeight(ctx, tx, e.Flow, old, e.Weight, ReasonEnqueueWeight, now); err != nil {
				return Enqueued{}, err
			}
		}
	} else {
		if _, err := tx.ExecContext(ctx, qNewFlow, e.Flow, int64(availableAt(e, now)), int64(now), e.Destination); err != nil {
			return Enqueued{}, fmt.Errorf("take sequence number: %w", err)
		}
		if e.Weight != 0 && e.Weight != MinWeight {
			if _, err := tx.ExecContext(ctx, qSetWeight, e.Flow, e.Weight); err != nil {
				return Enqueued{}, fmt.Errorf("set weight: %w", err)
			}
		}
	}
	if isRotation(pol) && arrives {
		if _, err := tx.ExecContext(ctx, qRotArrive, e.Flow); err != nil {
			return Enqueued{}, fmt.Errorf("join rotation: %w", err)
		}
		if _, err := tx.ExecContext(ctx, qRotJoin); err != nil {
			return Enqueued{}, fmt.Errorf("join rotation: %w", err)
		}
	}
	s.call(HookEnqueueSeqTaken)
	if _, err := tx.ExecContext(ctx, qInsertEvent, e.ID, e.Flow, next, e.Body, int64(availableAt(e, now)), int64(now)); err != nil {
		return Enqueued{}, fmt.Errorf("insert event: %w", err)
	}
	return Enqueued{Seq: next}, nil
}

// rotationOrder is FairRotation (docs/contract.md §7.6): the ready flow
// with the smallest (pass, joined); a claim sets vnow to its flow's pass
// and adds the stride to that pass. A used-up take-over is quarantined and
// costs nothing.
type rotationOrder struct {
	vnow, vtail int64  // the pass of the flow claimed last; the largest new pass
	flowRows    []byte // [flow rowid, new pass] of each claimed flow, a JSON array (not yet closed)
}

func (o *rotationOrder) promoteSQL() string          { return qRotPromote }
func (o *rotationOrder) pickSQL() string             { return qRotPickHeads }
func (o *rotationOrder) keysSQL() string             { return qRotPickKeys }
func (o *rotationOrder) destKeysSQL() string         { return qRotPickDestKeys }
func (o *rotationOrder) destKeySQL() string          { return qRotPickDestKey }
func (o *rotationOrder) start() (any, any)           { return int64(-1), int64(0) } // passes are >= 0
func (o *rotationOrder) after(h *headRow) (any, any) { return h.k1, h.k2 }

func (o *rotationOrder) readKey(r *jsonRows, h *headRow) {
	r.element(false)
	h.k1, _ = r.int()
	r.element(false)
	h.k2, _ = r.int()
	r.element(false)
	w, _ := r.int()
	h.weight = int(w)
	r.element(false)
	h.served, _ = r.int()
}

func (o *rotationOrder) readKeyRow(r *jsonRows, h *headRow) {
	r.open()
	h.k1, _ = r.int()
	r.element(false)
	h.k2, _ = r.int()
	r.element(false)
	h.fRowid, _ = r.int()
	r.end()
}

func (o *rotationOrder) less(a, b *headRow) bool {
	return a.k1 < b.k1 || a.k1 == b.k1 && a.k2 < b.k2
}

func (o *rotationOrder) claimed(h *headRow) {
	pass := h.k1 + stride(h.weight, h.served)
	o.vnow, o.vtail = h.k1, max(o.vtail, pass)
	if len(o.flowRows) == 0 {
		o.flowRows = append(o.flowRows, '[')
	} else {
		o.flowRows = append(o.flowRows, ',')
	}
	o.flowRows = append(o.flowRows, '[')
	o.flowRows = strconv.AppendInt(o.flowRows, h.fRowid, 10)
	o.flowRows = append(o.flowRows, ',')
	o.flowRows = strconv.AppendInt(o.flowRows, pass, 10)
	o.flowRows = append(o.flowRows, ']')
}

func (o *rotationOrder) finish(ctx context.Context, tx *txn, lease clock.Tick, ticket int64, claims int, last int64) error {
	var (
		res sql.Result
		err error
	)
	if claims == 1 {
		// The one flow's new pass is the largest: vtail.
		res, err = tx.ExecContext(ctx, qRotServeFlow, last, int64(lease), o.vtail)
	} else {
		res, err = tx.ExecContext(ctx, qRotServeFlows, string(append(o.flowRows, ']')), int64(lease))
	}
	if err != nil {
		return fmt.Errorf("serve flows: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != int64(claims) {
		return fmt.Errorf("serve flows: updated %d rows (%v), want %d", k, err, claims)
	}
	if _, err := tx.ExecContext(ctx, qRotSetClock, ticket, o.vnow, o.vtail); err != nil {
		return fmt.Errorf("record ticket: %w", err)
	}
	return nil
}
