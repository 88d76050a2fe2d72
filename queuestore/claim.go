package queuestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// The claim path. Every statement is driven by an index (see plan_test.go):
// none scans events or flows, so a claim costs the same at 10 flows and at
// 100,000.
const (
	// qPromote turns on the ready flag of flows whose head became
	// dispatchable by now. Each flow is promoted at most once per head
	// change, so the cost is amortised over the writes that set ready_at.
	qPromote = `UPDATE flows SET ready = 1 WHERE ready = 0 AND ready_at <= ?1`

	// qPickHead is fairness.MinServed in SQL: the smallest served, ties to
	// the smallest flow ID (BINARY collation = Go's byte-wise string order),
	// with the flow's head event read in the same statement (one statement
	// instead of two per claimed event). LEFT JOIN keeps flows_ready as the
	// outer loop and reports a ready flow without a head event (corrupt) as
	// NULL event columns instead of skipping it.
	qPickHead = `SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
    e.body, e.generation
FROM flows AS f LEFT JOIN events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.ready = 1 ORDER BY f.served, f.flow LIMIT 1`

	qQuarantineExpired = `UPDATE events SET state = 'quarantined', reason = 'lease_expired', lease_until = 0 WHERE id = ?1`

	qBlockFlow = `UPDATE flows SET ready_at = NULL, ready = 0 WHERE flow = ?1`

	qClaimEvent = `UPDATE events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = ?2, ticket = ?3
WHERE id = ?1`

	qServeFlow = `UPDATE flows SET served = served + 1, ready_at = ?2, ready = 0 WHERE flow = ?1`

	qSetTicket = `UPDATE meta SET ticket = ?1 WHERE id = 1`
)

// ReasonLeaseExpired is queue.ReasonLeaseExpired: the reason a claim
// records when it quarantines an event whose last attempt of the round let
// its lease expire.
const ReasonLeaseExpired = queue.ReasonLeaseExpired

// Claim hands out the head of the flow that has been served least (ties to
// the smallest flow ID: fairness.MinServed) among the flows whose head is
// dispatchable at now: pending with available_at <= now, or inflight with an
// expired lease (a take-over). ok is false when nothing is dispatchable.
// Under the FairRotation policy the flow is instead the one with the
// smallest (pass, joined), and the claim advances the rotation's virtual
// time (docs/contract.md §7.6).
//
// In the same transaction the global ticket, the flow's served count, the
// event's generation, attempts and lifetime attempts grow by one, and the
// event is leased until now + Lease. A take-over of an event whose round is
// used up (attempts == MaxAttempts) is not claimed: it is quarantined with
// reason ReasonLeaseExpired (served, ticket and generation unchanged) and the
// claim picks again. Even when nothing is claimed, now is recorded as the
// clock mark.
func (s *Store) Claim(ctx context.Context, now clock.Tick) (Claim, bool, error) {
	cs, err := s.claim(ctx, now, 1)
	if err != nil {
		return Claim{}, false, fmt.Errorf("claim: %w", err)
	}
	if len(cs) == 0 {
		return Claim{}, false, nil
	}
	return cs[0], true, nil
}

// ClaimBatch hands out up to n heads of n different flows in one
// transaction, in exactly the order, and with exactly the tickets, served
// counts, generations, attempts and leases, that n successive Claim calls at
// the same now would give. It returns fewer (or none) when fewer flows are
// dispatchable. n must be at least 1 (ErrInvalid otherwise).
func (s *Store) ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]Claim, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim batch: %w: n is %d, want at least 1", ErrInvalid, n)
	}
	cs, err := s.claim(ctx, now, n)
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	return cs, nil
}

func (s *Store) claim(ctx context.Context, now clock.Tick, n int) ([]Claim, error) {
	var out []Claim
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		out, err = claimIn(ctx, tx, a, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		s.call(HookClaimCommitted)
	}
	return out, nil
}

// claimIn claims up to n heads inside tx, after admit (a): the body of every
// claim transaction (Claim, ClaimBatch, SettleClaimBatch).
func claimIn(ctx context.Context, tx *txn, a admission, n int) ([]Claim, error) {
	now, ticket, pol := a.now, a.ticket, a.pol
	if isRotation(pol) {
		if _, err := tx.ExecContext(ctx, qRotPromote, int64(now)); err != nil {
			return nil, fmt.Errorf("promote ready flows: %w", err)
		}
		return claimRot(ctx, tx, pol, now, n, ticket)
	}
	if _, err := tx.ExecContext(ctx, qPromote, int64(now)); err != nil {
		return nil, fmt.Errorf("promote ready flows: %w", err)
	}
	if n > 1 {
		return claimMany(ctx, tx, pol, now, n, ticket, nil)
	}
	var out []Claim
	for len(out) < n {
		c, ok, err := claimOne(ctx, tx, pol, now, ticket+1)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		ticket = c.Ticket
		out = append(out, c)
	}
	if len(out) > 0 {
		if _, err := tx.ExecContext(ctx, qSetTicket, ticket); err != nil {
			return nil, fmt.Errorf("record ticket: %w", err)
		}
	}
	return out, nil
}

// claimOne picks and claims one head, quarantining used-up take-overs on the
// way. The flows table is already promoted for now.
func claimOne(ctx context.Context, tx *txn, pol Policy, now clock.Tick, ticket int64) (Claim, bool, error) {
	for {
		var (
			flow                string
			headSeq             sql.NullInt64
			id, state           sql.NullString
			attempts            int
			leaseUntil, availAt int64
			body                []byte
			generation          int64
		)
		var nAttempts, nLease, nAvail, nGen sql.NullInt64
		err := tx.QueryRowContext(ctx, qPickHead).Scan(&flow, &headSeq, &id, &state, &nAttempts, &nLease, &nAvail, &body, &nGen)
		if errors.Is(err, sql.ErrNoRows) {
			return Claim{}, false, nil
		}
		if err != nil {
			return Claim{}, false, fmt.Errorf("pick flow: %w", err)
		}
		if !headSeq.Valid {
			return Claim{}, false, fmt.Errorf("%w: flow %q is ready without a head", ErrCorrupt, flow)
		}
		if !id.Valid {
			return Claim{}, false, fmt.Errorf("%w: flow %q has no event at its head seq %d", ErrCorrupt, flow, headSeq.Int64)
		}
		attempts, leaseUntil, availAt, generation = int(nAttempts.Int64), nLease.Int64, nAvail.Int64, nGen.Int64
		switch {
		case state.String == queue.StateInflight && clock.Tick(leaseUntil) <= now && attempts >= pol.MaxAttempts:
			if _, err := tx.ExecContext(ctx, qQuarantineExpired, id.String); err != nil {
				return Claim{}, false, fmt.Errorf("quarantine %q: %w", id.String, err)
			}
			if _, err := tx.ExecContext(ctx, qBlockFlow, flow); err != nil {
				return Claim{}, false, fmt.Errorf("block flow %q: %w", flow, err)
			}
			continue
		case state.String == queue.StateInflight && clock.Tick(leaseUntil) <= now:
		case state.String == queue.StatePending && clock.Tick(availAt) <= now:
		default:
			return Claim{}, false, fmt.Errorf("%w: flow %q is ready but its head %q is %s", ErrCorrupt, flow, id.String, state.String)
		}
		lease := now + pol.Lease
		// The update below adds one to generation, attempts and lifetime
		// attempts of the row just read in this transaction: the claim
		// reports the same values without reading them back (RETURNING would
		// build a temporary table per claimed event).
		c := Claim{EventID: id.String, Flow: flow, Seq: headSeq.Int64, Body: body,
			Generation: generation + 1, Attempts: attempts + 1, Ticket: ticket, LeaseUntil: lease}
		res, err := tx.ExecContext(ctx, qClaimEvent, id.String, int64(lease), ticket)
		if err != nil {
			return Claim{}, false, fmt.Errorf("claim event %q: %w", id.String, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return Claim{}, false, fmt.Errorf("claim event %q: updated %d rows (%v), want 1", id.String, n, err)
		}
		if _, err := tx.ExecContext(ctx, qServeFlow, flow, int64(lease)); err != nil {
			return Claim{}, false, fmt.Errorf("serve flow %q: %w", flow, err)
		}
		return c, true, nil
	}
}

// The batch claim path (ClaimBatch with n > 1): one read for the next
// heads (again only after a used-up take-over among them), and the claims'
// writes as two statements for the whole batch.
const (
	// qPickHeads is qPickHead for the next ?3 heads in MinServed order
	// after the flow (served ?1, flow ?2), through the same indexes, as one
	// JSON array of rows [qPickHead's columns with the body in hex, the
	// flow's served count, the flow's rowid, the event's rowid]. The rows
	// are read in index order; claimMany checks that order.
	qPickHeads = `SELECT json_group_array(json_array(flow, head_seq, id, state, attempts, lease_until,
    available_at, hex(body), generation, served, frow, erow))
FROM (SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
        e.body, e.generation, f.served, f.rowid AS frow, e.rowid AS erow
    FROM flows AS f LEFT JOIN events AS e ON e.flow = f.flow AND e.seq = f.head_seq
    WHERE f.ready = 1 AND (f.served, f.flow) > (?1, ?2) ORDER BY f.served, f.flow LIMIT ?3)`

	// qClaimEvents is qClaimEvent for the events whose rowids are the JSON
	// array ?1; the k-th (from 0) gets ticket ?3 + k. The list is
	// materialized so that the plan is always "scan the list, find each row
	// by rowid" (without it, a small analyzed table was scanned instead).
	// OR FAIL: no statement journal; any failure rolls back the whole
	// transaction anyway.
	qClaimEvents = `WITH j (r, k) AS MATERIALIZED (SELECT value, key FROM json_each(?1))
UPDATE OR FAIL events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = ?2, ticket = ?3 + j.k
FROM j WHERE events.rowid = j.r`

	// qServeFlows is qServeFlow for the flows whose rowids are the JSON
	// array ?1.
	qServeFlows = `WITH j (r) AS MATERIALIZED (SELECT value FROM json_each(?1))
UPDATE OR FAIL flows SET served = served + 1, ready_at = ?2, ready = 0
FROM j WHERE flows.rowid = j.r`
)

// claimMany is n successive claims in one transaction (after admit and the
// promotion), with fewer statements. A claim takes its flow out of the
// ready set (ready = 0), and so does the quarantine of a used-up take-over;
// nothing else in a claim changes another flow. So n successive picks are
// the first heads of flows_ready in (served, flow) order: one read returns
// the next n - len(out) of them after the last flow read, and the claims'
// writes to events and flows are made at the end, one statement each. A
// used-up take-over is quarantined at once, as claimOne does, and counts
// no claim, so then the read goes on after the last flow read.
func claimMany(ctx context.Context, tx *txn, pol Policy, now clock.Tick, n int, ticket int64, out []Claim) ([]Claim, error) {
	lease := now + pol.Lease
	var (
		evRows, flowRows []byte
		lastServed       int64
		lastFlow         string
		picked           bool // lastServed and lastFlow hold the last flow picked
	)
	first := ticket + 1
	lastServed = -1 // below every served count: the first pick is the first ready flow
	for len(out) < n {
		want := n - len(out)
		var js []byte
		if err := tx.QueryRowContext(ctx, qPickHeads, lastServed, lastFlow, want).Scan(&js); err != nil {
			return nil, fmt.Errorf("pick flows: %w", err)
		}
		r := jsonRows{b: js}
		r.open()
		got := 0
		for first := true; r.next(first); first = false {
			got++
			var (
				flow                               string
				headSeq, nAttempts, nLease, nAvail sql.NullInt64
				nGen, eRow                         sql.NullInt64
				id, state                          sql.NullString
				body                               []byte
				served, fRowid                     int64
			)
			r.open()
			flow, _ = r.str()
			r.element(false)
			headSeq.Int64, headSeq.Valid = r.int()
			r.element(false)
			id.String, id.Valid = r.str()
			r.element(false)
			state.String, state.Valid = r.str()
			r.element(false)
			nAttempts.Int64, nAttempts.Valid = r.int()
			r.element(false)
			nLease.Int64, nLease.Valid = r.int()
			r.element(false)
			nAvail.Int64, nAvail.Valid = r.int()
			r.element(false)
			body, _ = r.blob()
			r.element(false)
			nGen.Int64, nGen.Valid = r.int()
			r.element(false)
			served, _ = r.int()
			r.element(false)
			fRowid, _ = r.int()
			r.element(false)
			eRow.Int64, eRow.Valid = r.int()
			r.end()
			if r.err != nil {
				return nil, r.err
			}
			if picked && (served < lastServed || served == lastServed && flow <= lastFlow) {
				return nil, fmt.Errorf("%w: pick flows: flow %q (served %d) after %q (served %d)", ErrCorrupt, flow, served, lastFlow, lastServed)
			}
			if !headSeq.Valid {
				return nil, fmt.Errorf("%w: flow %q is ready without a head", ErrCorrupt, flow)
			}
			if !id.Valid {
				return nil, fmt.Errorf("%w: flow %q has no event at its head seq %d", ErrCorrupt, flow, headSeq.Int64)
			}
			lastServed, lastFlow, picked = served, flow, true
			attempts, leaseUntil, availAt := int(nAttempts.Int64), clock.Tick(nLease.Int64), clock.Tick(nAvail.Int64)
			switch {
			case state.String == queue.StateInflight && leaseUntil <= now && attempts >= pol.MaxAttempts:
				if _, err := tx.ExecContext(ctx, qQuarantineExpired, id.String); err != nil {
					return nil, fmt.Errorf("quarantine %q: %w", id.String, err)
				}
				if _, err := tx.ExecContext(ctx, qBlockFlow, flow); err != nil {
					return nil, fmt.Errorf("block flow %q: %w", flow, err)
				}
				continue
			case state.String == queue.StateInflight && leaseUntil <= now:
			case state.String == queue.StatePending && availAt <= now:
			default:
				return nil, fmt.Errorf("%w: flow %q is ready but its head %q is %s", ErrCorrupt, flow, id.String, state.String)
			}
			ticket++
			out = append(out, Claim{EventID: id.String, Flow: flow, Seq: headSeq.Int64, Body: body,
				Generation: nGen.Int64 + 1, Attempts: attempts + 1, Ticket: ticket, LeaseUntil: lease})
			evRows = appendRowid(evRows, eRow.Int64)
			flowRows = appendRowid(flowRows, fRowid)
		}
		if r.err != nil {
			return nil, r.err
		}
		if got < want {
			break // no more ready flows
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	evRows = append(evRows, ']')
	flowRows = append(flowRows, ']')
	res, err := tx.ExecContext(ctx, qClaimEvents, string(evRows), int64(lease), first)
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != int64(len(out)) {
		return nil, fmt.Errorf("claim events: updated %d rows (%v), want %d", k, err, len(out))
	}
	res, err = tx.ExecContext(ctx, qServeFlows, string(flowRows), int64(lease))
	if err != nil {
		return nil, fmt.Errorf("serve flows: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != int64(len(out)) {
		return nil, fmt.Errorf("serve flows: updated %d rows (%v), want %d", k, err, len(out))
	}
	if _, err := tx.ExecContext(ctx, qSetTicket, ticket); err != nil {
		return nil, fmt.Errorf("record ticket: %w", err)
	}
	return out, nil
}

// appendRowid appends rowid to the JSON array of integers in b, opening it
// when b is empty; the caller closes it.
func appendRowid(b []byte, rowid int64) []byte {
	if len(b) == 0 {
		b = append(b, '[')
	} else {
		b = append(b, ',')
	}
	return strconv.AppendInt(b, rowid, 10)
}
