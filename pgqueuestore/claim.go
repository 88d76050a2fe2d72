package pgqueuestore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// The claim path; every statement is index-driven (plan_test.go).
const (
	qPromote = `UPDATE {s}.flows SET ready = true WHERE NOT ready AND ready_at <= $1`

	// qPickHead is fairness.MinServed in SQL: the smallest served, ties to
	// the smallest flow ID in byte order (COLLATE "C"), with the head event
	// in the same statement.
	qPickHead = `SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
    e.body, e.generation
FROM {s}.flows AS f LEFT JOIN {s}.events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.ready ORDER BY f.served, f.flow LIMIT 1`

	qQuarantineExpired = `UPDATE {s}.events SET state = 'quarantined', reason = 'lease_expired', lease_until = 0 WHERE id = $1`

	qBlockFlow = `UPDATE {s}.flows SET ready_at = NULL, ready = false WHERE flow = $1`

	qClaimEvent = `UPDATE {s}.events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = $2, ticket = $3
WHERE id = $1`

	qServeFlow = `UPDATE {s}.flows SET served = served + 1, ready_at = $2, ready = false WHERE flow = $1`

	qSetTicket = `UPDATE {s}.meta SET ticket = $1 WHERE id = 1`
)

// Claim hands out the head of the flow served least (ties to the smallest
// flow ID in byte order) among the flows whose head is dispatchable at now,
// exactly as queuestore.Store.Claim does (docs/contract.md §2.3). ok is
// false when nothing is dispatchable; now is recorded either way.
func (s *Store) Claim(ctx context.Context, now clock.Tick) (queue.Claim, bool, error) {
	cs, err := s.claim(ctx, now, 1)
	if err != nil {
		return queue.Claim{}, false, fmt.Errorf("claim: %w", err)
	}
	if len(cs) == 0 {
		return queue.Claim{}, false, nil
	}
	return cs[0], true, nil
}

// ClaimBatch is n successive Claims at the same now, in one transaction:
// the same order, tickets, served counts, generations, attempts and
// leases. It returns fewer (or none) when fewer flows are dispatchable. n
// must be at least 1 (queue.ErrInvalid otherwise).
func (s *Store) ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim batch: %w: n is %d, want at least 1", queue.ErrInvalid, n)
	}
	cs, err := s.claim(ctx, now, n)
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	return cs, nil
}

func (s *Store) claim(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error) {
	var out []queue.Claim
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		now, m, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qPromote), int64(now)); err != nil {
			return fmt.Errorf("promote ready flows: %w", err)
		}
		ticket := m.ticket
		for len(out) < n {
			c, ok, err := s.claimOne(ctx, tx, now, ticket+1, m.policy)
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
			if _, err := tx.Exec(ctx, s.q(qSetTicket), ticket); err != nil {
				return fmt.Errorf("record ticket: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		s.call(queue.HookClaimCommitted)
	}
	return out, nil
}

// claimOne picks and claims one head, quarantining used-up take-overs on
// the way (docs/contract.md §2.3).
func (s *Store) claimOne(ctx context.Context, tx pgx.Tx, now clock.Tick, ticket int64, p queue.Policy) (queue.Claim, bool, error) {
	for {
		var (
			flow                        string
			headSeq                     *int64
			id, state                   *string
			attempts                    *int
			leaseUntil, availAt, genPtr *int64
			body                        []byte
		)
		err := tx.QueryRow(ctx, s.q(qPickHead)).Scan(&flow, &headSeq, &id, &state, &attempts, &leaseUntil, &availAt, &body, &genPtr)
		if isNoRows(err) {
			return queue.Claim{}, false, nil
		}
		if err != nil {
			return queue.Claim{}, false, fmt.Errorf("pick flow: %w", err)
		}
		if headSeq == nil {
			return queue.Claim{}, false, fmt.Errorf("%w: flow %q is ready without a head", queue.ErrCorrupt, flow)
		}
		if id == nil {
			return queue.Claim{}, false, fmt.Errorf("%w: flow %q has no event at its head seq %d", queue.ErrCorrupt, flow, *headSeq)
		}
		inflight, pending := *state == queue.StateInflight, *state == queue.StatePending
		switch {
		case inflight && clock.Tick(*leaseUntil) <= now && *attempts >= p.MaxAttempts:
			if _, err := tx.Exec(ctx, s.q(qQuarantineExpired), *id); err != nil {
				return queue.Claim{}, false, fmt.Errorf("quarantine %q: %w", *id, err)
			}
			if _, err := tx.Exec(ctx, s.q(qBlockFlow), flow); err != nil {
				return queue.Claim{}, false, fmt.Errorf("block flow %q: %w", flow, err)
			}
			continue
		case inflight && clock.Tick(*leaseUntil) <= now:
		case pending && clock.Tick(*availAt) <= now:
		default:
			return queue.Claim{}, false, fmt.Errorf("%w: flow %q is ready but its head %q is %s", queue.ErrCorrupt, flow, *id, *state)
		}
		lease := now + p.Lease
		c := queue.Claim{EventID: *id, Flow: flow, Seq: *headSeq, Body: body,
			Generation: *genPtr + 1, Attempts: *attempts + 1, Ticket: ticket, LeaseUntil: lease}
		tag, err := tx.Exec(ctx, s.q(qClaimEvent), *id, int64(lease), ticket)
		if err != nil {
			return queue.Claim{}, false, fmt.Errorf("claim event %q: %w", *id, err)
		}
		if tag.RowsAffected() != 1 {
			return queue.Claim{}, false, fmt.Errorf("claim event %q: updated %d rows, want 1", *id, tag.RowsAffected())
		}
		if _, err := tx.Exec(ctx, s.q(qServeFlow), flow, int64(lease)); err != nil {
			return queue.Claim{}, false, fmt.Errorf("serve flow %q: %w", flow, err)
		}
		return c, true, nil
	}
}
