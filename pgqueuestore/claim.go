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
// exactly as queuestore.Store.Claim does (docs/contract.md §2.3). Under
// the FairRotation policy the flow is instead the one with the smallest
// (pass, joined), and the claim advances the rotation's virtual time
// (docs/contract.md §7.6). ok is false when nothing is dispatchable; now
// is recorded either way.
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
		if rotation(m.policy) {
			out, err = s.claimRot(ctx, tx, now, n, m.ticket, m.policy)
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

// head is a picked flow's head as the pick statements read it.
type head struct {
	flow                     string
	headSeq                  *int64
	id, state                *string
	attempts                 *int
	leaseUntil, availAt, gen *int64
	body                     []byte
}

// claimOne picks and claims one head, quarantining used-up take-overs on
// the way (docs/contract.md §2.3).
func (s *Store) claimOne(ctx context.Context, tx pgx.Tx, now clock.Tick, ticket int64, p queue.Policy) (queue.Claim, bool, error) {
	for {
		var h head
		err := tx.QueryRow(ctx, s.q(qPickHead)).Scan(&h.flow, &h.headSeq, &h.id, &h.state, &h.attempts, &h.leaseUntil, &h.availAt, &h.body, &h.gen)
		if isNoRows(err) {
			return queue.Claim{}, false, nil
		}
		if err != nil {
			return queue.Claim{}, false, fmt.Errorf("pick flow: %w", err)
		}
		c, claimed, err := s.takeHead(ctx, tx, now, ticket, p, h)
		if err != nil {
			return queue.Claim{}, false, err
		}
		if !claimed {
			continue
		}
		if _, err := tx.Exec(ctx, s.q(qServeFlow), h.flow, int64(c.LeaseUntil)); err != nil {
			return queue.Claim{}, false, fmt.Errorf("serve flow %q: %w", h.flow, err)
		}
		return c, true, nil
	}
}

// takeHead checks a picked head and claims its event: a used-up take-over
// is quarantined and its flow blocked (claimed false); a dispatchable head
// is claimed with ticket (the flow's row is the caller's to update);
// anything else is queue.ErrCorrupt.
func (s *Store) takeHead(ctx context.Context, tx pgx.Tx, now clock.Tick, ticket int64, p queue.Policy, h head) (queue.Claim, bool, error) {
	if h.headSeq == nil {
		return queue.Claim{}, false, fmt.Errorf("%w: flow %q is ready without a head", queue.ErrCorrupt, h.flow)
	}
	if h.id == nil {
		return queue.Claim{}, false, fmt.Errorf("%w: flow %q has no event at its head seq %d", queue.ErrCorrupt, h.flow, *h.headSeq)
	}
	inflight, pending := *h.state == queue.StateInflight, *h.state == queue.StatePending
	switch {
	case inflight && clock.Tick(*h.leaseUntil) <= now && *h.attempts >= p.MaxAttempts:
		if _, err := tx.Exec(ctx, s.q(qQuarantineExpired), *h.id); err != nil {
			return queue.Claim{}, false, fmt.Errorf("quarantine %q: %w", *h.id, err)
		}
		if _, err := tx.Exec(ctx, s.q(qBlockFlow), h.flow); err != nil {
			return queue.Claim{}, false, fmt.Errorf("block flow %q: %w", h.flow, err)
		}
		return queue.Claim{}, false, nil
	case inflight && clock.Tick(*h.leaseUntil) <= now:
	case pending && clock.Tick(*h.availAt) <= now:
	default:
		return queue.Claim{}, false, fmt.Errorf("%w: flow %q is ready but its head %q is %s", queue.ErrCorrupt, h.flow, *h.id, *h.state)
	}
	lease := now + p.Lease
	c := queue.Claim{EventID: *h.id, Flow: h.flow, Seq: *h.headSeq, Body: h.body,
		Generation: *h.gen + 1, Attempts: *h.attempts + 1, Ticket: ticket, LeaseUntil: lease}
	tag, err := tx.Exec(ctx, s.q(qClaimEvent), *h.id, int64(lease), ticket)
	if err != nil {
		return queue.Claim{}, false, fmt.Errorf("claim event %q: %w", *h.id, err)
	}
	if tag.RowsAffected() != 1 {
		return queue.Claim{}, false, fmt.Errorf("claim event %q: updated %d rows, want 1", *h.id, tag.RowsAffected())
	}
	return c, true, nil
}
