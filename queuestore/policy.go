package queuestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// The claim's flow orders (queue's).
const (
	// FairMinServed is queue.FairMinServed, the default: the flow served
	// least, ties to the smallest flow ID (fairness.MinServed).
	FairMinServed = queue.FairMinServed
	// FairRotation is queue.FairRotation, the opt-in order with bounded
	// waiting and weights (docs/contract.md §7.6): stride scheduling in
	// integer virtual time, new flows joining at the tail
	// (fairness.Rotation is its model).
	FairRotation = queue.FairRotation
)

// MaxPolicyAttempts is queue.MaxPolicyAttempts: the largest MaxAttempts a
// policy may have.
const MaxPolicyAttempts = queue.MaxPolicyAttempts

// DefaultPolicy is queue.DefaultPolicy: the contract's default policy:
// Lease 5, MaxAttempts 3, BackoffBase 2, BackoffCap 8, no jitter,
// FairMinServed. The constants Lease, MaxAttempts, BackoffBase and
// BackoffCap are its values.
func DefaultPolicy() Policy { return queue.DefaultPolicy() }

const (
	qPolicyRead = `SELECT lease, max_attempts, backoff_base, backoff_cap, jitter, fairness, schedule, retry_after_cap, retention
FROM meta WHERE id = 1`

	qPolicyWrite = `UPDATE meta SET lease = ?1, max_attempts = ?2, backoff_base = ?3, backoff_cap = ?4,
    jitter = ?5, fairness = ?6, schedule = ?7, retry_after_cap = ?8, retention = ?9, policy_rev = policy_rev + 1 WHERE id = 1`

	qInsertAuditKind = `INSERT INTO audit (kind, event_id, generation, reason, detail, at) VALUES (?1, NULL, NULL, ?2, ?3, ?4)`
)

func readPolicy(ctx context.Context, tx *txn) (Policy, error) {
	p, err := policyFromRow(tx.QueryRowContext(ctx, qPolicyRead))
	if err != nil {
		return Policy{}, fmt.Errorf("read policy: %w", err)
	}
	return p, nil
}

func writePolicy(ctx context.Context, tx execer, p Policy) error {
	if _, err := tx.ExecContext(ctx, qPolicyWrite, policyArgs(p)...); err != nil {
		return fmt.Errorf("record policy: %w", err)
	}
	return nil
}

// execer runs a write statement: a write transaction (*txn), or the
// migration's connection.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// policyArgs are qPolicyWrite's arguments for p: the schedule as a JSON
// array of waits ("[]" for none).
func policyArgs(p Policy) []any {
	p = p.Normal()
	sched := []byte("[]")
	if len(p.Schedule) > 0 {
		sched, _ = json.Marshal(p.Schedule) // []clock.Tick always encodes
	}
	return []any{int64(p.Lease), p.MaxAttempts, int64(p.BackoffBase), int64(p.BackoffCap), boolInt(p.Jitter),
		string(p.Fairness), string(sched), int64(p.RetryAfterCap), int64(p.Retention)}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Policy returns the policy recorded in the file.
func (s *Store) Policy(ctx context.Context) (Policy, error) {
	var p Policy
	err := s.withReadTx(ctx, func(tx *txn) error {
		var err error
		p, err = readPolicy(ctx, tx)
		return err
	})
	if err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	return p, nil
}

// SetPolicy records p as the queue's policy, on an operator's word, and
// writes a 'policy' audit row with the reason, now and the old and new
// policy (PolicyChange as JSON in the row's detail). Setting the policy
// already recorded is not an error and still writes the audit row.
//
// Checks, in this order: p (ErrInvalid), the reason (as Redrive's), the tick
// (ErrTickOverflow under the new and the old policy, then the clock as every
// write). On any error nothing changes.
//
// The new policy applies to every write after it, in every process that has
// the file open (each write transaction reads the policy's revision with
// the clock mark, and the policy itself when the revision moved). Events keep what earlier writes gave them: a lease already handed
// out, a retry already scheduled. An event in flight whose attempts already
// reach a lowered MaxAttempts is quarantined by its next failure (or by the
// claim that finds its lease expired), never claimed again in this round.
//
// A change of Fairness from FairMinServed to FairRotation joins every flow
// that has a head at the rotation's tail, in flow ID order, in the same
// transaction: one pass over the flows table, at switch time (an operator
// action, not a hot path). Back to FairMinServed, the rotation's state is
// kept as it is and no longer maintained; a later switch to FairRotation
// joins the flows again. See docs/contract.md §7.6.
func (s *Store) SetPolicy(ctx context.Context, p Policy, reason string, now clock.Tick) error {
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
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		detail, err := json.Marshal(PolicyChange{Old: a.pol, New: p})
		if err != nil {
			return fmt.Errorf("encode policy change: %w", err)
		}
		if err := switchFairness(ctx, tx, a.pol.Fairness, p.Fairness); err != nil {
			return err
		}
		if err := writePolicy(ctx, tx, p); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qInsertAuditKind, AuditPolicy, reason, string(detail), int64(a.now)); err != nil {
			return fmt.Errorf("insert audit: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set policy: %w", err)
	}
	return nil
}

// policyFromRow scans qPolicyRead's row.
func policyFromRow(r rowScanner) (Policy, error) {
	var lease, base, bcap, jitter, raCap, ret int64
	var attempts int
	var fair, sched string
	err := r.Scan(&lease, &attempts, &base, &bcap, &jitter, &fair, &sched, &raCap, &ret)
	if errors.Is(err, sql.ErrNoRows) {
		return Policy{}, fmt.Errorf("%w: no meta row", ErrCorrupt)
	}
	if err != nil {
		return Policy{}, err
	}
	p := Policy{Lease: clock.Tick(lease), MaxAttempts: attempts, BackoffBase: clock.Tick(base),
		BackoffCap: clock.Tick(bcap), Jitter: jitter != 0, Fairness: Fairness(fair), RetryAfterCap: clock.Tick(raCap),
		Retention: clock.Tick(ret)}
	if sched != "[]" {
		if err := json.Unmarshal([]byte(sched), &p.Schedule); err != nil {
			return Policy{}, fmt.Errorf("%w: meta.schedule %q: %w", ErrCorrupt, sched, err)
		}
	}
	return p, nil
}
