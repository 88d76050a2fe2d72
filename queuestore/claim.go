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

	// qPick is fairness.MinServed in SQL: the smallest served, ties to the
	// smallest flow ID (BINARY collation = Go's byte-wise string order).
	qPick = `SELECT flow, head_seq FROM flows WHERE ready = 1 ORDER BY served, flow LIMIT 1`

	qHead = `SELECT id, state, attempts, lease_until, available_at FROM events WHERE flow = ?1 AND seq = ?2`

	qQuarantineExpired = `UPDATE events SET state = 'quarantined', reason = 'lease_expired', lease_until = 0 WHERE id = ?1`

	qBlockFlow = `UPDATE flows SET ready_at = NULL, ready = 0 WHERE flow = ?1`

	qClaimEvent = `UPDATE events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = ?2, ticket = ?3
WHERE id = ?1 RETURNING body, generation, attempts`

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
			flow    string
			headSeq sql.NullInt64
		)
		err := tx.QueryRowContext(ctx, qPick).Scan(&flow, &headSeq)
		if errors.Is(err, sql.ErrNoRows) {
			return Claim{}, false, nil
		}
		if err != nil {
			return Claim{}, false, fmt.Errorf("pick flow: %w", err)
		}
		if !headSeq.Valid {
			return Claim{}, false, fmt.Errorf("%w: flow %q is ready without a head", ErrCorrupt, flow)
		}
		var (
			id                  string
			state               string
			attempts            int
			leaseUntil, availAt int64
		)
		if err := tx.QueryRowContext(ctx, qHead, flow, headSeq.Int64).Scan(&id, &state, &attempts, &leaseUntil, &availAt); err != nil {
			return Claim{}, false, fmt.Errorf("read head of flow %q: %w", flow, err)
		}
		switch {
		case state == stateInflight && clock.Tick(leaseUntil) <= now && attempts >= MaxAttempts:
			if _, err := tx.ExecContext(ctx, qQuarantineExpired, id); err != nil {
				return Claim{}, false, fmt.Errorf("quarantine %q: %w", id, err)
			}
			if _, err := tx.ExecContext(ctx, qBlockFlow, flow); err != nil {
				return Claim{}, false, fmt.Errorf("block flow %q: %w", flow, err)
			}
			continue
		case state == stateInflight && clock.Tick(leaseUntil) <= now:
		case state == statePending && clock.Tick(availAt) <= now:
		default:
			return Claim{}, false, fmt.Errorf("%w: flow %q is ready but its head %q is %s", ErrCorrupt, flow, id, state)
		}
		lease := now + Lease
		c := Claim{EventID: id, Flow: flow, Seq: headSeq.Int64, Ticket: ticket, LeaseUntil: lease}
		if err := tx.QueryRowContext(ctx, qClaimEvent, id, int64(lease), ticket).Scan(&c.Body, &c.Generation, &c.Attempts); err != nil {
			return Claim{}, false, fmt.Errorf("claim event %q: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, qServeFlow, flow, int64(lease)); err != nil {
			return Claim{}, false, fmt.Errorf("serve flow %q: %w", flow, err)
		}
		return c, true, nil
	}
}
