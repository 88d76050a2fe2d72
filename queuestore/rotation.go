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
	qRotIndex     = `CREATE INDEX IF NOT EXISTS flows_rotation ON flows (ready, pass, joined) WHERE ready = 1`
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

	// qRotPickHead is qPickHead in rotation order: the smallest (pass,
	// joined), with what the claim's stride needs.
	qRotPickHead = `SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
    e.body, e.generation, f.pass, f.joined, f.weight, f.served
FROM flows AS f LEFT JOIN events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.ready = 1 ORDER BY f.pass, f.joined LIMIT 1`

	// qRotPickHeads is qPickHeads in rotation order, after (pass ?1,
	// joined ?2).
	qRotPickHeads = `SELECT json_group_array(json_array(flow, head_seq, id, state, attempts, lease_until,
    available_at, hex(body), generation, pass, joined, weight, served, frow, erow))
FROM (SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
        e.body, e.generation, f.pass, f.joined, f.weight, f.served, f.rowid AS frow, e.rowid AS erow
    FROM flows AS f LEFT JOIN events AS e ON e.flow = f.flow AND e.seq = f.head_seq
    WHERE f.ready = 1 AND (f.pass, f.joined) > (?1, ?2) ORDER BY f.pass, f.joined LIMIT ?3)`

	qRotServeFlow = `UPDATE flows SET served = served + 1, ready_at = ?2, ready = 0, pass = ?3 WHERE flow = ?1`

	// qRotServeFlows is qRotServeFlow for the JSON array ?1 of [flow rowid,
	// new pass].
	qRotServeFlows = `WITH j (r, p) AS MATERIALIZED (SELECT value ->> 0, value ->> 1 FROM json_each(?1))
UPDATE OR FAIL flows SET served = served + 1, ready_at = ?2, ready = 0, pass = j.p
FROM j WHERE flows.rowid = j.r`

	// qRotSetClock records the ticket and the claims' virtual time: vnow is
	// the pass of the flow claimed last, vtail the largest pass assigned.
	qRotSetClock = `UPDATE meta SET ticket = ?1, vnow = ?2, vtail = max(vtail, ?3) WHERE id = 1`

	qRotSetHead = `UPDATE flows SET head_seq = ?2, ready_at = ?3, ready = coalesce(?3 <= ?4, 0),
    pass = CASE WHEN ?3 <= ?4 THEN max(pass, (SELECT vnow FROM meta WHERE id = 1)) ELSE pass END
WHERE flow = ?1`

	qRotSetHeads = `WITH j (r, h, a) AS MATERIALIZED (SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?1))
UPDATE OR FAIL flows SET head_seq = j.h, ready_at = j.a, ready = coalesce(j.a <= ?2, 0),
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
	)
	if err := tx.QueryRowContext(ctx, qFindEventFlow, e.ID, e.Flow).Scan(&flow, &seq, &body, &lastSeq); err != nil {
		return Enqueued{}, fmt.Errorf("find event: %w", err)
	}
	if flow.Valid {
		if flow.String == e.Flow && string(body) == string(e.Body) {
			return Enqueued{Seq: seq.Int64, Duplicate: true}, nil
		}
		return Enqueued{}, fmt.Errorf("%w: stored in flow %q as seq %d", ErrConflict, flow.String, seq.Int64)
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
		if _, err := tx.ExecContext(ctx, qNextSeq, e.Flow, next, int64(now)); err != nil {
			return Enqueued{}, fmt.Errorf("take sequence number: %w", err)
		}
		if e.Weight != 0 && e.Weight != old {
			if err := writeWeight(ctx, tx, e.Flow, old, e.Weight, ReasonEnqueueWeight, now); err != nil {
				return Enqueued{}, err
			}
		}
	} else {
		if _, err := tx.ExecContext(ctx, qNewFlow, e.Flow, int64(now)); err != nil {
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
	if _, err := tx.ExecContext(ctx, qInsertEvent, e.ID, e.Flow, next, e.Body, int64(now)); err != nil {
		return Enqueued{}, fmt.Errorf("insert event: %w", err)
	}
	return Enqueued{Seq: next}, nil
}

// rotPick is a picked flow's rotation state, read with its head.
type rotPick struct {
	pass, joined, served int64
	weight               int
}

// claimOneRot is claimOne in rotation order: the pick is the ready flow
// with the smallest (pass, joined); a claim sets vnow to its pass and adds
// the stride to it. A used-up take-over is quarantined and costs nothing.
// It returns the new vnow and the flow's new pass with the claim.
func claimOneRot(ctx context.Context, tx *txn, pol Policy, now clock.Tick, ticket int64) (Claim, int64, int64, bool, error) {
	for {
		var (
			flow                            string
			headSeq                         sql.NullInt64
			id, state                       sql.NullString
			nAttempts, nLease, nAvail, nGen sql.NullInt64
			body                            []byte
			rp                              rotPick
		)
		err := tx.QueryRowContext(ctx, qRotPickHead).Scan(&flow, &headSeq, &id, &state, &nAttempts, &nLease, &nAvail, &body, &nGen,
			&rp.pass, &rp.joined, &rp.weight, &rp.served)
		if errors.Is(err, sql.ErrNoRows) {
			return Claim{}, 0, 0, false, nil
		}
		if err != nil {
			return Claim{}, 0, 0, false, fmt.Errorf("pick flow: %w", err)
		}
		c, claimed, err := takeHead(ctx, tx, pol, now, ticket, flow, headSeq, id, state, nAttempts, nLease, nAvail, nGen, body)
		if err != nil {
			return Claim{}, 0, 0, false, err
		}
		if !claimed {
			continue
		}
		res, err := tx.ExecContext(ctx, qClaimEvent, id.String, int64(c.LeaseUntil), ticket)
		if err != nil {
			return Claim{}, 0, 0, false, fmt.Errorf("claim event %q: %w", id.String, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return Claim{}, 0, 0, false, fmt.Errorf("claim event %q: updated %d rows (%v), want 1", id.String, n, err)
		}
		pass := rp.pass + stride(rp.weight, rp.served)
		if _, err := tx.ExecContext(ctx, qRotServeFlow, flow, int64(c.LeaseUntil), pass); err != nil {
			return Claim{}, 0, 0, false, fmt.Errorf("serve flow %q: %w", flow, err)
		}
		return c, rp.pass, pass, true, nil
	}
}

// takeHead checks a picked head as claimOne does: a used-up take-over is
// quarantined and its flow blocked (claimed false); a dispatchable head
// gives the Claim to hand out (not yet written); anything else is
// ErrCorrupt.
func takeHead(ctx context.Context, tx *txn, pol Policy, now clock.Tick, ticket int64, flow string, headSeq sql.NullInt64,
	id, state sql.NullString, nAttempts, nLease, nAvail, nGen sql.NullInt64, body []byte) (Claim, bool, error) {
	if !headSeq.Valid {
		return Claim{}, false, fmt.Errorf("%w: flow %q is ready without a head", ErrCorrupt, flow)
	}
	if !id.Valid {
		return Claim{}, false, fmt.Errorf("%w: flow %q has no event at its head seq %d", ErrCorrupt, flow, headSeq.Int64)
	}
	attempts, leaseUntil, availAt := int(nAttempts.Int64), clock.Tick(nLease.Int64), clock.Tick(nAvail.Int64)
	switch {
	case state.String == queue.StateInflight && leaseUntil <= now && attempts >= pol.MaxAttempts:
		if _, err := tx.ExecContext(ctx, qQuarantineExpired, id.String); err != nil {
			return Claim{}, false, fmt.Errorf("quarantine %q: %w", id.String, err)
		}
		if _, err := tx.ExecContext(ctx, qBlockFlow, flow); err != nil {
			return Claim{}, false, fmt.Errorf("block flow %q: %w", flow, err)
		}
		return Claim{}, false, nil
	case state.String == queue.StateInflight && leaseUntil <= now:
	case state.String == queue.StatePending && availAt <= now:
	default:
		return Claim{}, false, fmt.Errorf("%w: flow %q is ready but its head %q is %s", ErrCorrupt, flow, id.String, state.String)
	}
	return Claim{EventID: id.String, Flow: flow, Seq: headSeq.Int64, Body: body,
		Generation: nGen.Int64 + 1, Attempts: attempts + 1, Ticket: ticket, LeaseUntil: now + pol.Lease}, true, nil
}

// claimRot is the rotation's claim of up to n heads after the promotion:
// Claim (n = 1) picks with qRotPickHead; ClaimBatch pages through the
// ready flows in (pass, joined) order. Within one transaction that order
// does not change: a claim takes its flow out of the ready set (and so does
// a quarantine), and no flow enters it. So n successive claims are the
// first dispatchable heads in that order, exactly as in claimMany.
func claimRot(ctx context.Context, tx *txn, pol Policy, now clock.Tick, n int, ticket int64) ([]Claim, error) {
	var (
		out         []Claim
		vnow, vtail int64
	)
	if n == 1 {
		c, picked, pass, ok, err := claimOneRot(ctx, tx, pol, now, ticket+1)
		if err != nil || !ok {
			return nil, err
		}
		out, vnow, vtail = append(out, c), picked, pass
	} else {
		var err error
		if out, vnow, vtail, err = claimManyRot(ctx, tx, pol, now, n, ticket); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	if _, err := tx.ExecContext(ctx, qRotSetClock, out[len(out)-1].Ticket, vnow, vtail); err != nil {
		return nil, fmt.Errorf("record ticket: %w", err)
	}
	return out, nil
}

// claimManyRot is claimMany in rotation order. It returns the claims, the
// pass of the last flow claimed (the new vnow) and the largest new pass.
func claimManyRot(ctx context.Context, tx *txn, pol Policy, now clock.Tick, n int, ticket int64) ([]Claim, int64, int64, error) {
	lease := now + pol.Lease
	var (
		out                  []Claim
		evRows, flowRows     []byte
		lastPass, lastJoined int64 = -1, 0 // below every key: passes are >= 0
		picked               bool
		vnow, vtail          int64
	)
	first := ticket + 1
	for len(out) < n {
		want := n - len(out)
		var js []byte
		if err := tx.QueryRowContext(ctx, qRotPickHeads, lastPass, lastJoined, want).Scan(&js); err != nil {
			return nil, 0, 0, fmt.Errorf("pick flows: %w", err)
		}
		var rows [][]json.RawMessage
		if err := json.Unmarshal(js, &rows); err != nil {
			return nil, 0, 0, fmt.Errorf("pick flows: %w", err)
		}
		for _, row := range rows {
			var (
				flow                               string
				headSeq, nAttempts, nLease, nAvail sql.NullInt64
				nGen, eRow                         sql.NullInt64
				id, state                          sql.NullString
				hexBody                            sql.NullString
				rp                                 rotPick
				fRowid                             int64
			)
			if len(row) != 15 {
				return nil, 0, 0, fmt.Errorf("pick flows: row of %d columns, want 15", len(row))
			}
			dst := []any{&flow, &headSeq, &id, &state, &nAttempts, &nLease, &nAvail, &hexBody, &nGen,
				&rp.pass, &rp.joined, &rp.weight, &rp.served, &fRowid, &eRow}
			for i, col := range row {
				if err := scanJSON(col, dst[i]); err != nil {
					return nil, 0, 0, fmt.Errorf("pick flows: column %d: %w", i, err)
				}
			}
			if picked && (rp.pass < lastPass || rp.pass == lastPass && rp.joined <= lastJoined) {
				return nil, 0, 0, fmt.Errorf("%w: pick flows: flow %q (%d, %d) after (%d, %d)", ErrCorrupt, flow, rp.pass, rp.joined, lastPass, lastJoined)
			}
			lastPass, lastJoined, picked = rp.pass, rp.joined, true
			var body []byte
			if hexBody.Valid {
				b, err := decodeHex(hexBody.String)
				if err != nil {
					return nil, 0, 0, fmt.Errorf("pick flows: body: %w", err)
				}
				body = b
			}
			c, claimed, err := takeHead(ctx, tx, pol, now, ticket+1, flow, headSeq, id, state, nAttempts, nLease, nAvail, nGen, body)
			if err != nil {
				return nil, 0, 0, err
			}
			if !claimed {
				continue
			}
			ticket++
			pass := rp.pass + stride(rp.weight, rp.served)
			vnow, vtail = rp.pass, max(vtail, pass)
			out = append(out, c)
			evRows = appendRowid(evRows, eRow.Int64)
			if len(flowRows) == 0 {
				flowRows = append(flowRows, '[')
			} else {
				flowRows = append(flowRows, ',')
			}
			flowRows = append(flowRows, '[')
			flowRows = strconv.AppendInt(flowRows, fRowid, 10)
			flowRows = append(flowRows, ',')
			flowRows = strconv.AppendInt(flowRows, pass, 10)
			flowRows = append(flowRows, ']')
		}
		if len(rows) < want {
			break // no more ready flows
		}
	}
	if len(out) == 0 {
		return out, 0, 0, nil
	}
	evRows = append(evRows, ']')
	flowRows = append(flowRows, ']')
	res, err := tx.ExecContext(ctx, qClaimEvents, string(evRows), int64(lease), first)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("claim events: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != int64(len(out)) {
		return nil, 0, 0, fmt.Errorf("claim events: updated %d rows (%v), want %d", k, err, len(out))
	}
	res, err = tx.ExecContext(ctx, qRotServeFlows, string(flowRows), int64(lease))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("serve flows: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != int64(len(out)) {
		return nil, 0, 0, fmt.Errorf("serve flows: updated %d rows (%v), want %d", k, err, len(out))
	}
	return out, vnow, vtail, nil
}

// scanJSON decodes one JSON column (null, a number or a string) into dst:
// *string, *int64, *int, *sql.NullString or *sql.NullInt64.
func scanJSON(col json.RawMessage, dst any) error {
	null := string(col) == "null"
	switch d := dst.(type) {
	case *sql.NullString:
		if null {
			*d = sql.NullString{}
			return nil
		}
		d.Valid = true
		return json.Unmarshal(col, &d.String)
	case *sql.NullInt64:
		if null {
			*d = sql.NullInt64{}
			return nil
		}
		d.Valid = true
		return json.Unmarshal(col, &d.Int64)
	case *string:
		return json.Unmarshal(col, d)
	case *int64:
		return json.Unmarshal(col, d)
	case *int:
		return json.Unmarshal(col, d)
	}
	return fmt.Errorf("scan JSON into %T", dst)
}

// decodeHex decodes SQLite's hex() of a body.
func decodeHex(s string) ([]byte, error) {
	if len(s)%2 != 0 {
		return nil, fmt.Errorf("odd hex length %d", len(s))
	}
	b := make([]byte, len(s)/2)
	for i := range b {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, err
		}
		b[i] = byte(v)
	}
	return b, nil
}
