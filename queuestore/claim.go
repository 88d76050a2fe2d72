package queuestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
)

// Claim is one event handed to a sender: the event, the generation the
// settle must quote, the round's attempts so far, the global ticket of this
// claim and the end of its lease.
type Claim struct {
	EventID, Flow string     // the event and its flow
	Seq           int64      // the event's sequence number in its flow
	Body          []byte     // the event's body, byte-exact
	Generation    int64      // the generation Settle must quote
	Attempts      int        // attempts used in this round, this claim included
	Ticket        int64      // the global ticket of this claim (the first claim gets 1)
	LeaseUntil    clock.Tick // now + Lease; a settle at or after it is Expired
}

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

// ReasonLeaseExpired is the reason a claim records when it quarantines an
// event whose last attempt of the round let its lease expire.
const ReasonLeaseExpired = "lease_expired"

// Claim hands out the head of the flow that has been served least (ties to
// the smallest flow ID: fairness.MinServed) among the flows whose head is
// dispatchable at now: pending with available_at <= now, or inflight with an
// expired lease (a take-over). ok is false when nothing is dispatchable.
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
		out = out[:0]
		ticket, err := admit(ctx, tx, now)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qPromote, int64(now)); err != nil {
			return fmt.Errorf("promote ready flows: %w", err)
		}
		for len(out) < n {
			c, ok, err := claimOne(ctx, tx, now, ticket+1)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			ticket = c.Ticket
			out = append(out, c)
		}
		if len(out) > 0 {
			if _, err := tx.ExecContext(ctx, qSetTicket, ticket); err != nil {
				return fmt.Errorf("record ticket: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		s.call(HookClaimCommitted)
	}
	return out, nil
}

// claimOne picks and claims one head, quarantining used-up take-overs on the
// way. The flows table is already promoted for now.
func claimOne(ctx context.Context, tx *txn, now clock.Tick, ticket int64) (Claim, bool, error) {
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
		case state.String == stateInflight && clock.Tick(leaseUntil) <= now && attempts >= MaxAttempts:
			if _, err := tx.ExecContext(ctx, qQuarantineExpired, id.String); err != nil {
				return Claim{}, false, fmt.Errorf("quarantine %q: %w", id.String, err)
			}
			if _, err := tx.ExecContext(ctx, qBlockFlow, flow); err != nil {
				return Claim{}, false, fmt.Errorf("block flow %q: %w", flow, err)
			}
			continue
		case state.String == stateInflight && clock.Tick(leaseUntil) <= now:
		case state.String == statePending && clock.Tick(availAt) <= now:
		default:
			return Claim{}, false, fmt.Errorf("%w: flow %q is ready but its head %q is %s", ErrCorrupt, flow, id.String, state.String)
		}
		lease := now + Lease
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
