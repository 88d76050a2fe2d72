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
	// event's available_at and enqueue tick (NULL when absent).
	qSettleRead = `SELECT e.flow, e.seq, e.state, e.generation, e.attempts, e.lease_until,
    f.last_seq, n.available_at, n.enqueued_at
FROM {s}.events AS e
LEFT JOIN {s}.flows AS f ON f.flow = e.flow
LEFT JOIN {s}.events AS n ON n.flow = e.flow AND n.seq = e.seq + 1
WHERE e.id = $1`

	// qSettleReadMany is qSettleRead for every ID of the array $1 at
	// once (no row for an ID that is not stored), with the next event's
	// ID so that a batch can see its own retries of it, and its enqueue
	// tick (the flow's head_enqueued_at once it is the head).
	// Index-driven: one primary key probe per ID (TestPlans_IndexDriven).
	qSettleReadMany = `SELECT k.id, e.flow, e.seq, e.state, e.generation, e.attempts, e.lease_until, e.available_at,
    f.last_seq, n.id, n.available_at, n.enqueued_at
FROM unnest($1::text[]) AS k(id)
JOIN {s}.events AS e ON e.id = k.id
LEFT JOIN {s}.flows AS f ON f.flow = e.flow
LEFT JOIN {s}.events AS n ON n.flow = e.flow AND n.seq = e.seq + 1`

	qAck = `UPDATE {s}.events SET state = 'acked', lease_until = 0, acked_at = $2 WHERE id = $1`

	qRetry = `UPDATE {s}.events SET state = 'pending', lease_until = 0, available_at = $2, reason = $3 WHERE id = $1`

	qQuarantine = `UPDATE {s}.events SET state = 'quarantined', lease_until = 0, reason = $2 WHERE id = $1`

	// qSetHead moves the flow's head; ready at once when the head is
	// already dispatchable at now ($4, the clock mark in this transaction);
	// $5 is the new head's enqueue tick (NULL with no head), which
	// OldestWaiting reads (flows_head_enqueued).
	qSetHead = `UPDATE {s}.flows SET head_seq = $2::bigint, ready_at = $3::bigint, ready = coalesce($3::bigint <= $4::bigint, false) AND paused IS NULL,
    head_enqueued_at = $5::bigint WHERE flow = $1`

	qWaitFlow = `UPDATE {s}.flows SET ready_at = $2, ready = false WHERE flow = $1`

	// The set forms of qAck, qSetHead (and qRotSetHead), qRetry,
	// qWaitFlow, qQuarantine and qBlockFlow, for a batch whose writes touch
	// each flow once: arrays in $1.., the clock mark in $4 for the heads.
	qAckMany = `UPDATE {s}.events SET state = 'acked', lease_until = 0, acked_at = $2 WHERE id = ANY($1::text[])`

	// qRecordAcks records the acks of the events of the array $1 at $2 in
	// acked, the table Prune deletes through (an index on events.acked_at
	// would keep every ack from being a heap-only update).
	qRecordAcks = `INSERT INTO {s}.acked (at, event_id) SELECT $2, unnest($1::text[])`
	qSetHeads   = `UPDATE {s}.flows AS f SET head_seq = u.head, ready_at = u.at, ready = coalesce(u.at <= $4::bigint, false) AND f.paused IS NULL,
    head_enqueued_at = u.enq
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $5::bigint[]) AS u(flow, head, at, enq)
WHERE f.flow = u.flow`
	qRotSetHeads = `UPDATE {s}.flows AS f SET head_seq = u.head, ready_at = u.at, ready = coalesce(u.at <= $4::bigint, false) AND f.paused IS NULL,
    pass = CASE WHEN u.at <= $4::bigint THEN greatest(f.pass, (SELECT vnow FROM {s}.meta WHERE id = 1)) ELSE f.pass END,
    head_enqueued_at = u.enq
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $5::bigint[]) AS u(flow, head, at, enq)
WHERE f.flow = u.flow`
	qRetryMany = `UPDATE {s}.events AS e SET state = 'pending', lease_until = 0, available_at = u.at, reason = u.reason
FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(id, at, reason)
WHERE e.id = u.id`
	qWaitFlows = `UPDATE {s}.flows AS f SET ready_at = u.at, ready = false
FROM unnest($1::text[], $2::bigint[]) AS u(flow, at)
WHERE f.flow = u.flow`
	qQuarantineMany = `UPDATE {s}.events AS e SET state = 'quarantined', lease_until = 0, reason = u.reason
FROM unnest($1::text[], $2::text[]) AS u(id, reason)
WHERE e.id = u.id`
	qBlockFlows = `UPDATE {s}.flows SET ready_at = NULL, ready = false WHERE flow = ANY($1::text[])`

	qExtend = `UPDATE {s}.events SET lease_until = $2 WHERE id = $1`

	// qInsertHistory writes the attempt history rows of the arrays $1..$6
	// (docs/contract.md §7.8), all at $7, the admitted tick: one
	// statement for every failure of a transaction.
	qInsertHistory = `INSERT INTO {s}.attempts (event_id, generation, attempt, at, outcome, reason, error)
SELECT u.id, u.gen, u.attempt, $7, u.outcome, u.reason, u.error
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[])
    AS u(id, gen, attempt, outcome, reason, error)`

	// qTrimHistory keeps the latest $2 history rows of each event of the
	// array $1: the $2-th row from the newest, read backwards on the
	// primary key (event_id, generation), bounds what is deleted, through
	// the same key. No scan of attempts.
	qTrimHistory = `DELETE FROM {s}.attempts AS a
USING (SELECT u.id, (SELECT h.generation FROM {s}.attempts AS h WHERE h.event_id = u.id
        ORDER BY h.generation DESC OFFSET $2::bigint - 1 LIMIT 1) AS keep
    FROM unnest($1::text[]) AS u(id)) AS k
WHERE a.event_id = k.id AND a.generation < k.keep`
)

// Settle records the result of the claim of eventID with the given
// generation, with the checks and outcomes of queuestore.Store.Settle
// (docs/contract.md §2.4, §7.8): a generation that is not the event's, or
// an event not in flight, is Stale; now >= lease_until is Expired; then
// success is Acked; a permanent failure (Result.Permanent) is Quarantined
// at once; a failure with attempts left is RetryScheduled, pending again
// after Policy.RetryDelay (the schedule's or the formula's wait, at least
// the capped Result.RetryAfter); a failure on the round's last attempt is
// Quarantined. Every failure writes one row of the event's attempt
// history (Event's History), with Result.Error, and keeps the latest
// queue.MaxHistory. Stale and Expired change nothing but the clock mark.
func (s *Store) Settle(ctx context.Context, eventID string, generation int64, r queue.Result, now clock.Tick) (queue.Outcome, error) {
	it := queue.SettleItem{EventID: eventID, Generation: generation, Result: r}
	if err := it.Validate(); err != nil {
		return "", fmt.Errorf("settle: %w", err)
	}
	if s.oneCallable(ctx, []queue.SettleItem{it}, now) {
		out, _, ok, err := s.oneCall(ctx, []queue.SettleItem{it}, now, 0)
		if err != nil {
			return "", fmt.Errorf("settle %q: %w", eventID, err)
		}
		if ok {
			return out[0].Outcome, nil
		}
	}
	var o queue.Outcome
	st := s.newSettles([]queue.SettleItem{it}, true)
	err := s.withTxRead(ctx, nil, st.reads(), func(tx pgx.Tx, a admission, stale bool, pp *pipe) error {
		now, m, err := s.admitPipe(ctx, tx, a, now, pp)
		if err != nil {
			return err
		}
		rs, wrote, err := st.settle(ctx, tx, pp, now, m.policy, stale)
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
	out, _, err := s.settleClaim(ctx, items, now, 0)
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
	nextEnq     *int64 // the next event's enqueue tick
}

// readSettle reads the event for a settle or an extend and applies the
// first three checks: it returns Stale or Expired, or "" when the claim is
// live.
func (s *Store) readSettle(ctx context.Context, tx pgx.Tx, id string, generation int64, now clock.Tick) (settleRow, queue.Outcome, error) {
	var r settleRow
	err := tx.QueryRow(ctx, s.q(qSettleRead), id).Scan(&r.flow, &r.seq, &r.state, &r.gen, &r.attempts, &r.leaseUntil, &r.last, &r.next, &r.nextEnq)
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

// settles is one transaction's settle of items on the general path
// (onecall.go), in two round trips at most, with the outcomes, Errs and
// writes of settling them one after the
// other (settleOne of earlier versions,
// docs/decisions/postgres-batch-round-trips.md): one qSettleReadMany
// reads every item's event, its flow's last seq and its next event (sent
// with BEGIN, reads, unless the turn promoted arrivals: then again, after
// the promotion); the checks then run in Go, item by item, on those rows
// as the earlier items' writes leave them (an ack, a retry or a
// quarantine changes the event's state, lease and available_at, nothing
// else a later check reads; a settle never changes a flow's last seq);
// and the writes of every item go to the server in one pipe
// (queueSettles: one set statement per kind of write, or item by item),
// with the claim's first statements when a claim follows
// (docs/decisions/postgres-per-event-cost.md). With single, a missing
// event fails the call (Settle); without, it is the item's Err, as is a
// bad item (SettleBatch).
type settles struct {
	s      *Store
	items  []queue.SettleItem
	single bool
	bad    []error
	ids    []string
	evs    map[string]*settleEvent
}

// newSettles validates items; the events of the valid ones are to be
// read.
func (s *Store) newSettles(items []queue.SettleItem, single bool) *settles {
	st := &settles{s: s, items: items, single: single, bad: make([]error, len(items)), ids: make([]string, 0, len(items))}
	for i, it := range items {
		if st.bad[i] = it.Validate(); st.bad[i] == nil {
			st.ids = append(st.ids, it.EventID)
		}
	}
	st.evs = make(map[string]*settleEvent, len(st.ids))
	return st
}

// reads is the read of the items' events, as a step for withTxRead (none
// when no item is valid).
func (st *settles) reads() []step {
	if len(st.ids) == 0 {
		return nil
	}
	return []step{{what: "read events", sql: st.s.q(qSettleReadMany), args: []any{st.ids}, rows: st.scan}}
}

// scan reads one row of qSettleReadMany into evs.
func (st *settles) scan(r pgx.Rows) error {
	var (
		id string
		e  settleEvent
	)
	if err := r.Scan(&id, &e.flow, &e.seq, &e.state, &e.gen, &e.attempts, &e.leaseUntil, &e.availAt,
		&e.last, &e.nextID, &e.next, &e.nextEnq); err != nil {
		return err
	}
	st.evs[id] = &e
	return nil
}

// settle settles the items inside tx (after admit). stale says the events
// read with BEGIN may have changed since (withTxRead): they are read
// again. The writes stay queued on pp, for the caller to send: with a
// claim's first statements, or with COMMIT. wrote reports whether any
// item wrote.
func (st *settles) settle(ctx context.Context, tx pgx.Tx, pp *pipe, now clock.Tick, p queue.Policy, stale bool) ([]queue.SettleResult, bool, error) {
	s, items, single := st.s, st.items, st.single
	out := make([]queue.SettleResult, len(items))
	if stale && len(st.ids) > 0 {
		clear(st.evs)
		pp.query("read events", st.scan, s.q(qSettleReadMany), st.ids)
		if err := pp.send(ctx, tx); err != nil {
			return nil, false, err
		}
	}
	evs := st.evs
	wrote := false
	var ops []*settleOp
	for i, it := range items {
		if st.bad[i] != nil {
			out[i].Err = fmt.Errorf("settle %q: %w", it.EventID, st.bad[i])
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
		o, op, err := checkSettle(pre, it, e, evs, now, p)
		if err != nil {
			return nil, false, err
		}
		if op != nil {
			ops = append(ops, op)
		}
		out[i].Outcome = o
		wrote = wrote || o.Wrote()
	}
	s.queueSettles(pp, ops, now, p)
	return out, wrote, nil
}

// settleOp is the write one item makes: an ack (with the head it moves
// to, nil when none, when that head is ready and when it was enqueued), a
// retry at at, or a quarantine, with the item's error prefix; a failure
// also writes a history row (the claim's generation and attempt, the
// result's error text).
type settleOp struct {
	outcome       queue.Outcome
	pre, id, flow string
	reason, err   string
	head, readyAt *int64
	headEnq       *int64
	at, gen       int64
	attempt       int
}

// checkSettle checks one item against e (its event as the earlier items
// left it) and returns its outcome and write (nil when it writes
// nothing), updating e (and reading the next event's available_at in
// evs) as the write will leave it.
func checkSettle(pre string, it queue.SettleItem, e *settleEvent, evs map[string]*settleEvent, now clock.Tick, p queue.Policy) (queue.Outcome, *settleOp, error) {
	switch {
	case it.Generation != e.gen, e.state != queue.StateInflight:
		return queue.Stale, nil, nil
	case now >= clock.Tick(e.leaseUntil):
		return queue.Expired, nil, nil
	}
	op := &settleOp{pre: pre, id: it.EventID, flow: e.flow, reason: it.Result.Reason, err: it.Result.Error,
		gen: e.gen, attempt: e.attempts}
	switch {
	case it.Result.OK:
		op.outcome = queue.Acked
		e.state, e.leaseUntil = queue.StateAcked, 0
		if e.last == nil {
			return "", nil, fmt.Errorf("%sread flow %q: %w", pre, e.flow, pgx.ErrNoRows)
		}
		if e.seq < *e.last {
			if e.nextID == nil {
				return "", nil, fmt.Errorf("%sread next event of flow %q: %w", pre, e.flow, pgx.ErrNoRows)
			}
			h, at := e.seq+1, *e.next
			if n := evs[*e.nextID]; n != nil {
				at = n.availAt
			}
			op.head, op.readyAt, op.headEnq = &h, &at, e.nextEnq
		}
	case !it.Result.Permanent && e.attempts < p.MaxAttempts:
		op.outcome = queue.RetryScheduled
		op.at = int64(now + p.RetryDelay(it.EventID, e.gen, e.attempts, it.Result.RetryAfter))
		e.state, e.leaseUntil, e.availAt = queue.StatePending, 0, op.at
	default:
		op.outcome = queue.Quarantined
		e.state, e.leaseUntil = queue.StateQuarantined, 0
	}
	return op.outcome, op, nil
}

// queueSettles queues the writes of ops on pp. When no two of them write
// the same flow (so no two the same event), each table's rows of a kind
// of write are written by one set statement: rows written once each end
// as the item-by-item statements leave them, whatever the order. Else
// (a batch that settles two events of one flow) they are queued item by
// item, statement for statement as Settle runs them. The history rows of
// the failures are written set-based either way (queueHistory): one
// insert, and a trim only for an event that may hold more than
// queue.MaxHistory.
func (s *Store) queueSettles(pp *pipe, ops []*settleOp, now clock.Tick, p queue.Policy) {
	setHead := qSetHead
	if rotation(p) {
		setHead = qRotSetHead // a head ready at once returns: pass = max(pass, vnow)
	}
	var hist history
	seen := make(map[string]bool, len(ops))
	distinct := true
	for _, op := range ops {
		distinct = distinct && !seen[op.flow]
		seen[op.flow] = true
		if op.outcome != queue.Acked {
			hist.add(op.id, op.gen, op.attempt, op.outcome, op.reason, op.err)
		}
	}
	if !distinct {
		for _, op := range ops {
			switch op.outcome {
			case queue.Acked:
				pp.exec(op.pre+"ack", s.q(qAck), op.id, int64(now))
				pp.exec(op.pre+"record ack", s.q(qRecordAcks), []string{op.id}, int64(now))
				pp.exec(fmt.Sprintf("%smove head of flow %q", op.pre, op.flow), s.q(setHead), op.flow, op.head, op.readyAt, int64(now), op.headEnq)
				if op.head != nil {
					// The flow's next event is its head now: work for a claimant.
					s.wakePipe(pp, op.pre)
				}
			case queue.RetryScheduled:
				pp.exec(op.pre+"schedule retry", s.q(qRetry), op.id, op.at, op.reason)
				pp.exec(fmt.Sprintf("%supdate flow %q", op.pre, op.flow), s.q(qWaitFlow), op.flow, op.at)
			default:
				pp.exec(op.pre+"quarantine", s.q(qQuarantine), op.id, op.reason)
				pp.exec(fmt.Sprintf("%sblock flow %q", op.pre, op.flow), s.q(qBlockFlow), op.flow)
			}
		}
		s.queueHistory(pp, &hist, now)
		return
	}
	var (
		acked, headFlows, retried, retryReasons, waitFlows, quarantined, qReasons, blocked []string
		heads, readyAts, headEnqs                                                          []*int64
		retryAts                                                                           []int64
		wake                                                                               bool
	)
	for _, op := range ops {
		switch op.outcome {
		case queue.Acked:
			acked, headFlows = append(acked, op.id), append(headFlows, op.flow)
			heads, readyAts, headEnqs = append(heads, op.head), append(readyAts, op.readyAt), append(headEnqs, op.headEnq)
			wake = wake || op.head != nil
		case queue.RetryScheduled:
			retried, retryReasons, retryAts = append(retried, op.id), append(retryReasons, op.reason), append(retryAts, op.at)
			waitFlows = append(waitFlows, op.flow)
		default:
			quarantined, qReasons, blocked = append(quarantined, op.id), append(qReasons, op.reason), append(blocked, op.flow)
		}
	}
	if len(acked) > 0 {
		pp.exec("ack", s.q(qAckMany), acked, int64(now))
		pp.exec("record acks", s.q(qRecordAcks), acked, int64(now))
		setHeads := qSetHeads
		if rotation(p) {
			setHeads = qRotSetHeads
		}
		pp.exec("move heads", s.q(setHeads), headFlows, heads, readyAts, int64(now), headEnqs)
	}
	if len(retried) > 0 {
		pp.exec("schedule retries", s.q(qRetryMany), retried, retryAts, retryReasons)
		pp.exec("update flows", s.q(qWaitFlows), waitFlows, retryAts)
	}
	if len(quarantined) > 0 {
		pp.exec("quarantine", s.q(qQuarantineMany), quarantined, qReasons)
		pp.exec("block flows", s.q(qBlockFlows), blocked)
	}
	s.queueHistory(pp, &hist, now)
	if wake {
		// Some flow's next event is its head now: work for a claimant.
		s.wakePipe(pp, "")
	}
}

// history gathers the attempt history rows of one transaction's failures
// (settles, and the claim's quarantine of a used-up take-over), as the
// arrays of qInsertHistory, and the events whose history may need a trim.
type history struct {
	ids                     []string
	gens, attempts          []int64
	outcomes, reasons, errs []string
	trim                    []string
}

// add records the history row of a failure of event id's claim at gen
// (its attempt-th of the round).
func (h *history) add(id string, gen int64, attempt int, o queue.Outcome, reason, errText string) {
	h.ids, h.gens, h.attempts = append(h.ids, id), append(h.gens, gen), append(h.attempts, int64(attempt))
	h.outcomes, h.reasons, h.errs = append(h.outcomes, string(o)), append(h.reasons, reason), append(h.errs, errText)
	// An event holds at most one row per generation, generations from 1:
	// one at generation MaxHistory or below cannot hold more than
	// MaxHistory rows, so most never need the trim.
	if gen > queue.MaxHistory {
		h.trim = append(h.trim, id)
	}
}

// queueHistory queues h's rows on pp, at now, and the trim of the events
// that may now hold more than queue.MaxHistory rows; nothing when h is
// empty.
func (s *Store) queueHistory(pp *pipe, h *history, now clock.Tick) {
	if len(h.ids) == 0 {
		return
	}
	pp.exec("record attempt history", s.q(qInsertHistory), h.ids, h.gens, h.attempts, h.outcomes, h.reasons, h.errs, int64(now))
	if len(h.trim) > 0 {
		pp.exec("trim attempt history", s.q(qTrimHistory), h.trim, int64(queue.MaxHistory))
	}
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
	err := s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, m, err := s.admit(ctx, tx, a, now)
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
			out[i].LeaseUntil = lease
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
