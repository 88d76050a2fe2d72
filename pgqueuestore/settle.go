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

	// qSettleReadMany is qSettleRead for every ID of the array $1 at
	// once (no row for an ID that is not stored), with the next event's
	// ID so that a batch can see its own retries of it. Index-driven: one
	// primary key probe per ID (TestPlans_IndexDriven).
	qSettleReadMany = `SELECT k.id, e.flow, e.seq, e.state, e.generation, e.attempts, e.lease_until, e.available_at,
    f.last_seq, n.id, n.available_at
FROM unnest($1::text[]) AS k(id)
JOIN {s}.events AS e ON e.id = k.id
LEFT JOIN {s}.flows AS f ON f.flow = e.flow
LEFT JOIN {s}.events AS n ON n.flow = e.flow AND n.seq = e.seq + 1`

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
		rs, wrote, err := s.settleItems(ctx, tx, []queue.SettleItem{it}, now, m.policy, true)
		if err != nil {
			return err
		}
		o = rs[0].Outcome
		if wrote {
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
	var out []queue.SettleResult
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, m, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		rs, wrote, err := s.settleItems(ctx, tx, items, now, m.policy, false)
		if err != nil {
			return err
		}
		out = rs
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

// settleEvent is what qSettleReadMany read of one event, then what the
// items settled before it in the same batch made of it.
type settleEvent struct {
	settleRow
	availAt int64
	nextID  *string
}

// settleItems settles items inside tx (after admit) in two round trips,
// with the outcomes, Errs and writes of settling them one after the other
// (settleOne of earlier versions, DECISIONS.md "Batch operations in few
// round trips"): one qSettleReadMany reads every item's event, its flow's
// last seq and its next event; the checks then run in Go, item by item,
// on those rows as the earlier items' writes leave them (an ack, a retry
// or a quarantine changes the event's state, lease and available_at,
// nothing else a later check reads; a settle never changes a flow's last
// seq); and the writes of every item go to the server in one pipe, in
// item order. With single, a missing event fails the call (Settle);
// without, it is the item's Err, as is a bad item (SettleBatch). wrote
// reports whether any item wrote.
func (s *Store) settleItems(ctx context.Context, tx pgx.Tx, items []queue.SettleItem, now clock.Tick, p queue.Policy, single bool) ([]queue.SettleResult, bool, error) {
	out := make([]queue.SettleResult, len(items))
	bad := make([]error, len(items))
	ids := make([]string, 0, len(items))
	for i, it := range items {
		if bad[i] = it.Validate(); bad[i] == nil {
			ids = append(ids, it.EventID)
		}
	}
	evs := make(map[string]*settleEvent, len(ids))
	var pp pipe
	if len(ids) > 0 {
		pp.query("read events", func(r pgx.Rows) error {
			var (
				id string
				e  settleEvent
			)
			if err := r.Scan(&id, &e.flow, &e.seq, &e.state, &e.gen, &e.attempts, &e.leaseUntil, &e.availAt,
				&e.last, &e.nextID, &e.next); err != nil {
				return err
			}
			evs[id] = &e
			return nil
		}, s.q(qSettleReadMany), ids)
		if err := pp.send(ctx, tx); err != nil {
			return nil, false, err
		}
	}
	wrote := false
	for i, it := range items {
		if bad[i] != nil {
			out[i].Err = fmt.Errorf("settle %q: %w", it.EventID, bad[i])
			continue
		}
		pre := ""
		if !single {
			pre = fmt.Sprintf("item %d (%q): ", i, it.EventID)
		}
		e := evs[it.EventID]
		if e == nil {
			err := fmt.Errorf("%w: event %q", queue.ErrNotFound, it.EventID)
			if single {
				return nil, false, err
			}
			out[i].Err = fmt.Errorf("settle %q: %w", it.EventID, err)
			continue
		}
		o, err := s.settleEvent(&pp, pre, it, e, evs, now, p)
		if err != nil {
			return nil, false, err
		}
		out[i].Outcome = o
		wrote = wrote || o.Wrote()
	}
	if err := pp.send(ctx, tx); err != nil {
		return nil, false, err
	}
	return out, wrote, nil
}

// settleEvent checks one item against e (its event as the earlier items
// left it), queues its writes on pp (pre prefixes their errors), and
// updates e (and finds the next event's available_at in evs) as the
// writes will leave it.
func (s *Store) settleEvent(pp *pipe, pre string, it queue.SettleItem, e *settleEvent, evs map[string]*settleEvent, now clock.Tick, p queue.Policy) (queue.Outcome, error) {
	switch {
	case it.Generation != e.gen, e.state != queue.StateInflight:
		return queue.Stale, nil
	case now >= clock.Tick(e.leaseUntil):
		return queue.Expired, nil
	}
	if it.Result.OK {
		pp.exec(pre+"ack", s.q(qAck), it.EventID)
		e.state, e.leaseUntil = queue.StateAcked, 0
		if e.last == nil {
			return "", fmt.Errorf("%sread flow %q: %w", pre, e.flow, pgx.ErrNoRows)
		}
		var head, readyAt *int64
		if e.seq < *e.last {
			if e.nextID == nil {
				return "", fmt.Errorf("%sread next event of flow %q: %w", pre, e.flow, pgx.ErrNoRows)
			}
			h, at := e.seq+1, *e.next
			if n := evs[*e.nextID]; n != nil {
				at = n.availAt
			}
			head, readyAt = &h, &at
		}
		q := qSetHead
		if rotation(p) {
			q = qRotSetHead // a head ready at once returns: pass = max(pass, vnow)
		}
		pp.exec(fmt.Sprintf("%smove head of flow %q", pre, e.flow), s.q(q), e.flow, head, readyAt, int64(now))
		if head != nil {
			// The flow's next event is its head now: work for a claimant.
			s.wakePipe(pp, pre)
		}
		return queue.Acked, nil
	}
	if e.attempts < p.MaxAttempts {
		at := now + p.Delay(it.EventID, e.gen, e.attempts)
		pp.exec(pre+"schedule retry", s.q(qRetry), it.EventID, int64(at), it.Result.Reason)
		pp.exec(fmt.Sprintf("%supdate flow %q", pre, e.flow), s.q(qWaitFlow), e.flow, int64(at))
		e.state, e.leaseUntil, e.availAt = queue.StatePending, 0, int64(at)
		return queue.RetryScheduled, nil
	}
	pp.exec(pre+"quarantine", s.q(qQuarantine), it.EventID, it.Result.Reason)
	pp.exec(fmt.Sprintf("%sblock flow %q", pre, e.flow), s.q(qBlockFlow), e.flow)
	e.state, e.leaseUntil = queue.StateQuarantined, 0
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
