package pgqueuestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

const (
	// qSettleRead reads the claimed event and, in the same statement, what
	// an ack needs to move the head: the flow's last seq and the next
	// event's available_at (NULL when absent).
	qSettleRead = `SELECT e.flow, e.seq, e.state, e.generation, e.attempts, e.lease_until,
    f.last_seq, n.available_at
FROM {s}.events AS e
LEFT JOIN {s}.flows AS f ON f.flow = e.flow
LEFT JOIN {s}.events AS n ON n.flow = e.flow AND n.seq = e.seq + 1
WHERE e.id = $1`

	qAck = `UPDATE {s}.events SET state = 'acked', lease_until = 0 WHERE id = $1`

	qRetry = `UPDATE {s}.events SET state = 'pending', lease_until = 0, available_at = $2, reason = $3 WHERE id = $1`

	qQuarantine = `UPDATE {s}.events SET state = 'quarantined', lease_until = 0, reason = $2 WHERE id = $1`

	// qSetHead moves the flow's head; ready at once when the head is
	// already dispatchable at now ($4, the clock mark in this transaction).
	qSetHead = `UPDATE {s}.flows SET head_seq = $2::bigint, ready_at = $3::bigint, ready = coalesce($3::bigint <= $4::bigint, false) WHERE flow = $1`

	qWaitFlow = `UPDATE {s}.flows SET ready_at = $2, ready = false WHERE flow = $1`

	qExtend = `UPDATE {s}.events SET lease_until = $2 WHERE id = $1`
)

// Settle records the result of the claim of eventID with the given
// generation, with the checks and outcomes of queuestore.Store.Settle
// (docs/contract.md §2.4): a generation that is not the event's, or an
// event not in flight, is Stale; now >= lease_until is Expired; then
// success is Acked, failure with attempts left RetryScheduled (pending
// again after the policy's delay), failure on the last attempt
// Quarantined. Stale and Expired change nothing but the clock mark.
func (s *Store) Settle(ctx context.Context, eventID string, generation int64, r queue.Result, now clock.Tick) (queue.Outcome, error) {
	it := queue.SettleItem{EventID: eventID, Generation: generation, Result: r}
	if err := it.Validate(); err != nil {
		return "", fmt.Errorf("settle: %w", err)
	}
	var o queue.Outcome
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, m, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		if o, err = s.settleOne(ctx, tx, it, now, m.policy); err != nil {
			return err
		}
		if o.Wrote() {
			s.call(queue.HookSettleBeforeCommit)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("settle %q: %w", eventID, err)
	}
	return o, nil
}

// SettleBatch settles several claims in one transaction, each item exactly
// as Settle would if they were settled one after the other at the same
// now. A bad item (queue.ErrInvalid, queue.ErrNotFound) gets its own Err
// and changes nothing; the others go on. A time regression, a canceled
// context or an SQL error refuses the whole batch.
func (s *Store) SettleBatch(ctx context.Context, items []queue.SettleItem, now clock.Tick) ([]queue.SettleResult, error) {
	out := make([]queue.SettleResult, len(items))
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, m, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		wrote := false
		for i, it := range items {
			out[i] = queue.SettleResult{}
			if err := it.Validate(); err != nil {
				out[i].Err = fmt.Errorf("settle %q: %w", it.EventID, err)
				continue
			}
			o, err := s.settleOne(ctx, tx, it, now, m.policy)
			if errors.Is(err, queue.ErrNotFound) {
				out[i].Err = fmt.Errorf("settle %q: %w", it.EventID, err)
				continue
			}
			if err != nil {
				return fmt.Errorf("item %d (%q): %w", i, it.EventID, err)
			}
			out[i].Outcome = o
			wrote = wrote || o.Wrote()
		}
		if wrote {
			s.call(queue.HookSettleBeforeCommit)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("settle batch: %w", err)
	}
	return out, nil
}

// settleRow is what qSettleRead read.
type settleRow struct {
	flow, state string
	seq, gen    int64
	attempts    int
	leaseUntil  int64
	last, next  *int64
}

// readSettle reads the event for a settle or an extend and applies the
// first three checks: it returns Stale or Expired, or "" when the claim is
// live.
func (s *Store) readSettle(ctx context.Context, tx pgx.Tx, id string, generation int64, now clock.Tick) (settleRow, queue.Outcome, error) {
	var r settleRow
	err := tx.QueryRow(ctx, s.q(qSettleRead), id).Scan(&r.flow, &r.seq, &r.state, &r.gen, &r.attempts, &r.leaseUntil, &r.last, &r.next)
	if isNoRows(err) {
		return r, "", fmt.Errorf("%w: event %q", queue.ErrNotFound, id)
	}
	if err != nil {
		return r, "", fmt.Errorf("read event: %w", err)
	}
	switch {
	case generation != r.gen, r.state != queue.StateInflight:
		return r, queue.Stale, nil
	case now >= clock.Tick(r.leaseUntil):
		return r, queue.Expired, nil
	}
	return r, "", nil
}

// settleOne does the work of one settle inside tx (after admit).
func (s *Store) settleOne(ctx context.Context, tx pgx.Tx, it queue.SettleItem, now clock.Tick, p queue.Policy) (queue.Outcome, error) {
	r, o, err := s.readSettle(ctx, tx, it.EventID, it.Generation, now)
	if err != nil || o != "" {
		return o, err
	}
	if it.Result.OK {
		if _, err := tx.Exec(ctx, s.q(qAck), it.EventID); err != nil {
			return "", fmt.Errorf("ack: %w", err)
		}
		if r.last == nil {
			return "", fmt.Errorf("read flow %q: %w", r.flow, pgx.ErrNoRows)
		}
		var head, readyAt *int64
		if r.seq < *r.last {
			if r.next == nil {
				return "", fmt.Errorf("read next event of flow %q: %w", r.flow, pgx.ErrNoRows)
			}
			h := r.seq + 1
			head, readyAt = &h, r.next
		}
		q := qSetHead
		if rotation(p) {
			q = qRotSetHead // a head ready at once returns: pass = max(pass, vnow)
		}
		if _, err := tx.Exec(ctx, s.q(q), r.flow, head, readyAt, int64(now)); err != nil {
			return "", fmt.Errorf("move head of flow %q: %w", r.flow, err)
		}
		if head != nil {
			// The flow's next event is its head now: work for a claimant.
			if err := s.wake(ctx, tx); err != nil {
				return "", err
			}
		}
		return queue.Acked, nil
	}
	if r.attempts < p.MaxAttempts {
		at := now + p.Delay(it.EventID, r.gen, r.attempts)
		if _, err := tx.Exec(ctx, s.q(qRetry), it.EventID, int64(at), it.Result.Reason); err != nil {
			return "", fmt.Errorf("schedule retry: %w", err)
		}
		if _, err := tx.Exec(ctx, s.q(qWaitFlow), r.flow, int64(at)); err != nil {
			return "", fmt.Errorf("update flow %q: %w", r.flow, err)
		}
		return queue.RetryScheduled, nil
	}
	if _, err := tx.Exec(ctx, s.q(qQuarantine), it.EventID, it.Result.Reason); err != nil {
		return "", fmt.Errorf("quarantine: %w", err)
	}
	if _, err := tx.Exec(ctx, s.q(qBlockFlow), r.flow); err != nil {
		return "", fmt.Errorf("block flow %q: %w", r.flow, err)
	}
	return queue.Quarantined, nil
}

// Extend moves the lease of a live claim to now + Lease
// (docs/contract.md §7.2): the checks of Settle 1-3 first (Stale, Stale,
// Expired), then Extended. It changes no attempt, served count, ticket or
// generation, and records the clock mark like any write.
func (s *Store) Extend(ctx context.Context, eventID string, generation int64, now clock.Tick) (queue.Outcome, error) {
	it := queue.ExtendItem{EventID: eventID, Generation: generation}
	if err := it.Validate(); err != nil {
		return "", fmt.Errorf("extend: %w", err)
	}
	rs, err := s.extend(ctx, []queue.ExtendItem{it}, now, true)
	if err != nil {
		return "", fmt.Errorf("extend %q: %w", eventID, err)
	}
	return rs[0].Outcome, nil
}

// ExtendBatch extends several claims in one transaction, each item as
// Extend would; a bad item (queue.ErrInvalid, queue.ErrNotFound) gets its
// own Err and changes nothing.
func (s *Store) ExtendBatch(ctx context.Context, items []queue.ExtendItem, now clock.Tick) ([]queue.SettleResult, error) {
	rs, err := s.extend(ctx, items, now, false)
	if err != nil {
		return nil, fmt.Errorf("extend batch: %w", err)
	}
	return rs, nil
}

// extend extends items in one transaction. With single, an item's own
// error fails the transaction (Extend: nothing changes, not even the clock
// mark); without, it is the item's Err (ExtendBatch).
func (s *Store) extend(ctx context.Context, items []queue.ExtendItem, now clock.Tick, single bool) ([]queue.SettleResult, error) {
	out := make([]queue.SettleResult, len(items))
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, m, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		for i, it := range items {
			out[i] = queue.SettleResult{}
			if err := it.Validate(); err != nil {
				out[i].Err = fmt.Errorf("extend %q: %w", it.EventID, err)
				continue
			}
			r, o, err := s.readSettle(ctx, tx, it.EventID, it.Generation, now)
			if errors.Is(err, queue.ErrNotFound) && !single {
				out[i].Err = fmt.Errorf("extend %q: %w", it.EventID, err)
				continue
			}
			if err != nil {
				return fmt.Errorf("item %d (%q): %w", i, it.EventID, err)
			}
			if o != "" {
				out[i].Outcome = o
				continue
			}
			lease := now + m.policy.Lease
			if _, err := tx.Exec(ctx, s.q(qExtend), it.EventID, int64(lease)); err != nil {
				return fmt.Errorf("extend: %w", err)
			}
			if _, err := tx.Exec(ctx, s.q(qWaitFlow), r.flow, int64(lease)); err != nil {
				return fmt.Errorf("update flow %q: %w", r.flow, err)
			}
			out[i].Outcome = queue.Extended
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
