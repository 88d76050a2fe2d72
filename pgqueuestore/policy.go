package pgqueuestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

const qPolicyWrite = `UPDATE {s}.meta SET lease = $1, max_attempts = $2, backoff_base = $3, backoff_cap = $4,
    jitter = $5, fairness = $6, schedule = $7, retry_after_cap = $8, retention = $9 WHERE id = 1`

// SetPolicy records p as the queue's policy, on an operator's word, and
// writes a 'policy' audit row with the reason, now and the old and new
// policy (queue.PolicyChange as JSON in the row's detail), as
// queuestore.Store.SetPolicy does. Checks, in this order: p
// (queue.ErrInvalid), the
// reason, the tick under the new policy, then the tick checks of every
// write under the recorded one. On any error nothing changes. The new
// policy applies to every write after it, in every process.
//
// A change of Fairness from FairMinServed to FairRotation joins every flow
// that has a head at the rotation's tail, in flow ID order, in the same
// transaction (one pass over flows, at switch time); back to
// FairMinServed, the rotation's state is kept as it is and no longer
// maintained, as queuestore does (docs/contract.md §7.6).
func (s *Store) SetPolicy(ctx context.Context, p queue.Policy, reason string, now clock.Tick) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("set policy: %w", err)
	}
	if err := queue.CheckReason(reason); err != nil {
		return fmt.Errorf("set policy: %w", err)
	}
	p = p.Normal()
	if err := p.CheckTick(now); err != nil {
		return fmt.Errorf("set policy: %w", err)
	}
	err := s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		at, m, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		detail, err := json.Marshal(queue.PolicyChange{Old: m.policy, New: p})
		if err != nil {
			return fmt.Errorf("encode policy change: %w", err)
		}
		if err := s.switchFairness(ctx, tx, m.policy.Fairness, p.Fairness); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qPolicyWrite), policyArgs(p)...); err != nil {
			return fmt.Errorf("record policy: %w", err)
		}
		if _, err := tx.Exec(ctx, s.q(qInsertAuditKind), string(queue.AuditPolicy), reason, string(detail), int64(at)); err != nil {
			return fmt.Errorf("insert audit: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set policy: %w", err)
	}
	return nil
}
