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

// The outcomes of Settle (docs/contract.md §2.4); Extend answers Stale,
// Expired or Extended.
//
// After Expired (or Stale) the caller stops working on that claim and does
// not settle or extend it again: the event is, or will be, claimed again
// with a higher generation, and only that claim's settle counts. A handler
// that needs longer than Lease extends its claim (Extend) before the lease
// runs out.
//
// They are queue's constants (queue.Acked, …), shared by every backend.
const (
	Acked          = queue.Acked          // success: the flow's next event becomes its head
	RetryScheduled = queue.RetryScheduled // failure with attempts left: pending again after the policy's Delay
	Quarantined    = queue.Quarantined    // failure on the round's last attempt
	Stale          = queue.Stale          // wrong generation, or the event is not in flight: nothing changed
	Expired        = queue.Expired        // the lease had run out (now >= lease_until): nothing changed
)

const (
	// qSettleRead reads the claimed event and, in the same statement, what
	// an ack needs to move the head: the flow's last seq and the next
	// event's available_at and enqueued_at (NULL columns when absent), and
	// the event's and the flow's rowids, by which the ack's two writes find
	// their rows without a second look in the id and flow indexes.
	qSettleRead = `SELECT e.flow, e.seq, e.state, e.generation, e.attempts, e.lease_until,
    f.last_seq, n.available_at, n.enqueued_at, e.rowid, f.rowid
FROM events AS e
LEFT JOIN flows AS f ON f.flow = e.flow
LEFT JOIN events AS n ON n.flow = e.flow AND n.seq = e.seq + 1
WHERE e.id = ?1`

	// qAck acks the event whose rowid is ?1 (read by qSettleRead).
	qAck = `UPDATE events SET state = 'acked', lease_until = 0, acked_at = ?2 WHERE rowid = ?1`

	qRetry = `UPDATE events SET state = 'pending', lease_until = 0, available_at = ?2, reason = ?3 WHERE id = ?1`

	qQuarantine = `UPDATE events SET state = 'quarantined', lease_until = 0, reason = ?2 WHERE id = ?1`

	// qSetHead moves the flow's head; ready is set at once when the head is
	// already dispatchable at now (now is the clock mark in this
	// transaction, so the flag stays true for every later tick). ?5 is the
	// new head's enqueue tick (NULL with no head). ?1 is the flow's rowid
	// (read by qSettleRead).
	qSetHead = `UPDATE flows SET head_seq = ?2, ready_at = ?3, ready = coalesce(?3 <= ?4, 0), head_enqueued_at = ?5
WHERE rowid = ?1`

	qWaitFlow = `UPDATE flows SET ready_at = ?2, ready = 0 WHERE flow = ?1`
)

// Settle records the result of the claim of eventID with the given
// generation. It checks, in this order: a generation that is not the
// event's is Stale; an event not in flight is Stale; now >= lease_until is
// Expired (even if nobody took the event over); then success is Acked; a
// permanent failure (Result.Permanent) is Quarantined whatever attempts
// remain; a failure with attempts left is RetryScheduled (pending again at
// now + queue.Policy.RetryDelay(eventID, generation, attempts,
// Result.RetryAfter): the policy's Delay, or the retry-after capped by its
// RetryAfterLimit when that is longer); a failure on the last attempt
// (attempts >= the policy's MaxAttempts) is Quarantined. A failure keeps
// its reason on the event and writes one history row (tick, generation,
// attempt, outcome, reason, Result.Error), keeping the event's latest
// queue.MaxHistory rows (docs/contract.md §7.8). Stale and Expired change
// nothing but the clock mark.
//
// Errors: ErrInvalid for a bad ID, a negative generation, or a failure
// without a valid reason (an empty one is also ErrEmptyReason), with a
// negative RetryAfter or an Error that queue.CheckErrorText refuses;
// ErrNotFound for an unknown event; ErrTimeRegression.
func (s *Store) Settle(ctx context.Context, eventID string, generation int64, r Result, now clock.Tick) (Outcome, error) {
	it := SettleItem{EventID: eventID, Generation: generation, Result: r}
	if err := it.Validate(); err != nil {
		return "", fmt.Errorf("settle: %w", err)
	}
	var o Outcome
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		if o, err = settleOne(ctx, tx, a.pol, it, a.now); err != nil {
			return err
		}
		if o.Wrote() {
			s.call(HookSettleBeforeCommit)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("settle %q: %w", eventID, err)
	}
	return o, nil
}

// SettleBatch settles several claims in one transaction. Each item gets its
// own result, exactly as Settle would give it if the items were settled one
// after the other at the same now (an event named twice sees the first
// item's effect). A bad item (ErrInvalid, ErrNotFound) gets its own Err and
// does not fail the others.
//
// All or nothing: ErrTimeRegression, a canceled context or an SQL error
// refuses the whole batch, and then nothing changes. An empty batch only
// checks and records now.
func (s *Store) SettleBatch(ctx context.Context, items []SettleItem, now clock.Tick) ([]SettleResult, error) {
	out := make([]SettleResult, len(items))
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		return s.settleIn(ctx, tx, a, items, out)
	})
	if err != nil {
		return nil, fmt.Errorf("settle batch: %w", err)
	}
	return out, nil
}

// settleIn settles items inside tx, after admit (a), writing each item's
// result to out (len(items)); it calls HookSettleBeforeCommit when an item
// changed its event. It is the body of SettleBatch and SettleClaimBatch.
func (s *Store) settleIn(ctx context.Context, tx *txn, a admission, items []SettleItem, out []SettleResult) error {
	now := a.now
	wrote := false
	var acks ackBatch
	rows, err := readSettleRows(ctx, tx, items, out)
	if err != nil {
		return err
	}
	for i, it := range items {
		if out[i].Err != nil {
			continue
		}
		o, err := acks.settle(ctx, tx, a.pol, it, &rows[i], now)
		if errors.Is(err, ErrNotFound) {
			out[i].Err = fmt.Errorf("settle %q: %w", it.EventID, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("item %d (%q): %w", i, it.EventID, err)
		}
		out[i].Outcome = o
		wrote = wrote || o.Wrote()
	}
	if err := acks.write(ctx, tx, a.pol, now); err != nil {
		return err
	}
	if wrote {
		s.call(HookSettleBeforeCommit)
	}
	return nil
}

// settleOne does the work of one settle inside tx (after admit).
func settleOne(ctx context.Context, tx *txn, pol Policy, it SettleItem, now clock.Tick) (Outcome, error) {
	var (
		flow       string
		seq, gen   int64
		state      string
		attempts   int
		leaseUntil int64
		last, next sql.NullInt64
		nextEnq    sql.NullInt64
		eRowid     int64
		fRowid     sql.NullInt64
	)
	err := tx.QueryRowContext(ctx, qSettleRead, it.EventID).Scan(&flow, &seq, &state, &gen, &attempts, &leaseUntil, &last, &next, &nextEnq, &eRowid, &fRowid)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: event %q", ErrNotFound, it.EventID)
	}
	if err != nil {
		return "", fmt.Errorf("read event: %w", err)
	}
	switch {
	case it.Generation != gen, state != queue.StateInflight:
		return Stale, nil
	case now >= clock.Tick(leaseUntil):
		return Expired, nil
	case it.Result.OK:
		if _, err := tx.ExecContext(ctx, qAck, eRowid, int64(now)); err != nil {
			return "", fmt.Errorf("ack: %w", err)
		}
		if err := advanceHead(ctx, tx, pol, flow, fRowid.Int64, seq, last, next, nextEnq, now); err != nil {
			return "", err
		}
		return Acked, nil
	default:
		return failHead(ctx, tx, pol, it, flow, gen, attempts, now)
	}
}

// failHead writes a failed result for the flow's head it (claimed at
// generation gen, its attempts-th attempt of the round): a permanent
// failure, or one on the round's last attempt, is a quarantine that blocks
// the flow; any other a retry after pol.RetryDelay (the policy's Delay, or
// the failure's retry-after up to the policy's limit). Either way one
// history row records it (recordFailure). Settle and SettleBatch both fail
// a head here.
func failHead(ctx context.Context, tx *txn, pol Policy, it SettleItem, flow string, gen int64, attempts int, now clock.Tick) (Outcome, error) {
	if attempts < pol.MaxAttempts && !it.Result.Permanent {
		at := now + pol.RetryDelay(it.EventID, gen, attempts, it.Result.RetryAfter)
		if _, err := tx.ExecContext(ctx, qRetry, it.EventID, int64(at), it.Result.Reason); err != nil {
			return "", fmt.Errorf("schedule retry: %w", err)
		}
		if _, err := tx.ExecContext(ctx, qWaitFlow, flow, int64(at)); err != nil {
			return "", fmt.Errorf("update flow %q: %w", flow, err)
		}
		return RetryScheduled, recordFailure(ctx, tx, it.EventID, gen, attempts, RetryScheduled, it.Result.Reason, it.Result.Error, now)
	}
	if _, err := tx.ExecContext(ctx, qQuarantine, it.EventID, it.Result.Reason); err != nil {
		return "", fmt.Errorf("quarantine: %w", err)
	}
	if _, err := tx.ExecContext(ctx, qBlockFlow, flow); err != nil {
		return "", fmt.Errorf("block flow %q: %w", flow, err)
	}
	return Quarantined, recordFailure(ctx, tx, it.EventID, gen, attempts, Quarantined, it.Result.Reason, it.Result.Error, now)
}

const (
	// qInsertHistory records one failed attempt (docs/contract.md §7.8).
	qInsertHistory = `INSERT INTO history (event_id, generation, attempt, at, outcome, reason, error)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`

	// qTrimHistory deletes the rows of event ?1 older than its latest ?2:
	// the generation of the (?2+1)-th newest row bounds them. Both the
	// subquery and the delete walk the event's range of the primary key
	// (at most ?2+1 rows), never the table.
	qTrimHistory = `DELETE FROM history WHERE event_id = ?1 AND generation <= (SELECT generation FROM history
    WHERE event_id = ?1 ORDER BY generation DESC LIMIT 1 OFFSET ?2)`
)

// recordFailure writes the history row of a failed attempt of eventID,
// claimed at generation gen as its round's attempt-th attempt, recorded at
// now, and keeps only the event's latest queue.MaxHistory rows. Rows have
// distinct generations of at least 1, all at most gen, so an event has
// more than MaxHistory rows only when gen > MaxHistory: below that no
// delete runs.
func recordFailure(ctx context.Context, tx *txn, eventID string, gen int64, attempt int, o Outcome, reason, errText string, now clock.Tick) error {
	if _, err := tx.ExecContext(ctx, qInsertHistory, eventID, gen, attempt, int64(now), string(o), reason, errText); err != nil {
		return fmt.Errorf("record attempt: %w", err)
	}
	if gen > queue.MaxHistory {
		if _, err := tx.ExecContext(ctx, qTrimHistory, eventID, queue.MaxHistory); err != nil {
			return fmt.Errorf("trim history: %w", err)
		}
	}
	return nil
}

// advanceHead makes the event after seq the flow's head, or leaves the flow
// without a head when seq was its last event. fRowid is the flow's rowid,
// last its last seq, and next and nextEnq the available_at and enqueued_at
// of the event after seq, all read by qSettleRead in this transaction.
func advanceHead(ctx context.Context, tx *txn, pol Policy, flow string, fRowid, seq int64, last, next, nextEnq sql.NullInt64, now clock.Tick) error {
	if !last.Valid {
		return fmt.Errorf("read flow %q: %w", flow, sql.ErrNoRows)
	}
	var head, readyAt, enq sql.NullInt64
	if seq < last.Int64 {
		if !next.Valid || !nextEnq.Valid {
			return fmt.Errorf("read next event of flow %q: %w", flow, sql.ErrNoRows)
		}
		head = sql.NullInt64{Int64: seq + 1, Valid: true}
		readyAt, enq = next, nextEnq
	}
	q, key := qSetHead, any(fRowid)
	if isRotation(pol) {
		q, key = qRotSetHead, flow // a head ready at once returns: pass = max(pass, vnow)
	}
	if _, err := tx.ExecContext(ctx, q, key, head, readyAt, int64(now), enq); err != nil {
		return fmt.Errorf("move head of flow %q: %w", flow, err)
	}
	return nil
}

// The batch settle path (SettleBatch): one read per item, and the acks'
// writes as two statements for the whole batch.
const (
	// qSettleReadRows is qSettleRead for every event named in the JSON
	// array ?1, as one JSON array of rows [position in ?1, then qSettleRead's
	// columns, the event's rowid, the flow's rowid, the next event's
	// enqueued_at] (nulls for an unknown event): one statement for the
	// batch. The list is the LEFT JOIN's
	// outer loop, each row found through the same indexes as qSettleRead.
	qSettleReadRows = `SELECT json_group_array(json_array(j.key, e.flow, e.seq, e.state, e.generation,
    e.attempts, e.lease_until, f.last_seq, n.available_at, e.rowid, f.rowid, n.enqueued_at))
FROM json_each(?1) AS j
LEFT JOIN events AS e ON e.id = j.value
LEFT JOIN flows AS f ON f.flow = e.flow
LEFT JOIN events AS n ON n.flow = e.flow AND n.seq = e.seq + 1`

	// qAckEvents is qAck for the events whose rowids are the JSON array ?1.
	// The list is materialized so that the plan is always "scan the list,
	// find each row by rowid"; OR FAIL needs no statement journal (any
	// failure rolls back the whole transaction).
	qAckEvents = `WITH j (r) AS MATERIALIZED (SELECT value FROM json_each(?1))
UPDATE OR FAIL events SET state = 'acked', lease_until = 0, acked_at = ?2
FROM j WHERE events.rowid = j.r`

	// qSetHeads is qSetHead for the JSON array ?1 of [flow rowid, head_seq,
	// ready_at, head_enqueued_at] (null for NULL); ?2 is now.
	qSetHeads = `WITH j (r, h, a, q) AS MATERIALIZED (SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?1))
UPDATE OR FAIL flows SET head_seq = j.h, ready_at = j.a, ready = coalesce(j.a <= ?2, 0), head_enqueued_at = j.q
FROM j WHERE flows.rowid = j.r`
)

// ackBatch collects the acks of a SettleBatch, written at its end by
// write. An event is settled at most once with a write in a batch: after
// it, it is not in flight, so every later item naming it is Stale; and a
// flow has at most one event in flight (its head), so no two acks, and no
// ack and a retry or quarantine (written at once, as settleOne does),
// touch the same event or flow. Deferring the acks therefore changes no
// item's outcome.
type ackBatch struct {
	n          int
	events     []byte // JSON array of event rowids
	heads      []byte // JSON array of [flow rowid, head_seq, ready_at, head_enqueued_at]
	settledIDs map[string]struct{}
}

// settle is settleOne for one item of a batch, on the row that
// readSettleRows read for it: the same checks in the same order; an ack is
// collected for write, a retry or quarantine is written at once.
func (b *ackBatch) settle(ctx context.Context, tx *txn, pol Policy, it SettleItem, row *settleRow, now clock.Tick) (Outcome, error) {
	if !row.found {
		return "", fmt.Errorf("%w: event %q", ErrNotFound, it.EventID)
	}
	flow, seq, gen, state, attempts, leaseUntil := row.flow, row.seq, row.gen, row.state, row.attempts, row.leaseUntil
	last, next, eRowid, fRowid := row.last, row.next, row.eRowid, row.fRowid
	if _, done := b.settledIDs[it.EventID]; done {
		// Written by an earlier item of this batch: no longer in flight.
		return Stale, nil
	}
	var o Outcome
	switch {
	case it.Generation != gen, state != queue.StateInflight:
		return Stale, nil
	case now >= clock.Tick(leaseUntil):
		return Expired, nil
	case it.Result.OK:
		if !last.Valid {
			return "", fmt.Errorf("read flow %q: %w", flow, sql.ErrNoRows)
		}
		b.events = appendRowid(b.events, eRowid)
		if len(b.heads) == 0 {
			b.heads = append(b.heads, '[')
		} else {
			b.heads = append(b.heads, ',')
		}
		b.heads = append(b.heads, '[')
		b.heads = strconv.AppendInt(b.heads, fRowid, 10)
		if seq < last.Int64 {
			if !next.Valid || !row.nextEnq.Valid {
				return "", fmt.Errorf("read next event of flow %q: %w", flow, sql.ErrNoRows)
			}
			b.heads = append(b.heads, ',')
			b.heads = strconv.AppendInt(b.heads, seq+1, 10)
			b.heads = append(b.heads, ',')
			b.heads = strconv.AppendInt(b.heads, next.Int64, 10)
			b.heads = append(b.heads, ',')
			b.heads = strconv.AppendInt(b.heads, row.nextEnq.Int64, 10)
			b.heads = append(b.heads, ']')
		} else {
			b.heads = append(b.heads, ",null,null,null]"...)
		}
		b.n++
		o = Acked
	default:
		var err error
		if o, err = failHead(ctx, tx, pol, it, flow, gen, attempts, now); err != nil {
			return "", err
		}
	}
	if b.settledIDs == nil {
		b.settledIDs = make(map[string]struct{})
	}
	b.settledIDs[it.EventID] = struct{}{}
	return o, nil
}

// write makes the collected acks: the events acked, the flows' heads moved.
func (b *ackBatch) write(ctx context.Context, tx *txn, pol Policy, now clock.Tick) error {
	if b.n == 0 {
		return nil
	}
	res, err := tx.ExecContext(ctx, qAckEvents, string(append(b.events, ']')), int64(now))
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != int64(b.n) {
		return fmt.Errorf("ack: updated %d rows (%v), want %d", k, err, b.n)
	}
	q := qSetHeads
	if isRotation(pol) {
		q = qRotSetHeads
	}
	res, err = tx.ExecContext(ctx, q, string(append(b.heads, ']')), int64(now))
	if err != nil {
		return fmt.Errorf("move heads: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != int64(b.n) {
		return fmt.Errorf("move heads: updated %d rows (%v), want %d", k, err, b.n)
	}
	return nil
}

// settleRow is what qSettleReadRows read for one item.
type settleRow struct {
	found          bool // the event exists
	flow, state    string
	seq, gen       int64
	attempts       int
	leaseUntil     int64
	last, next     sql.NullInt64
	eRowid, fRowid int64
	nextEnq        sql.NullInt64
}

// readSettleRows validates the items (an invalid one gets its Err in out)
// and reads the events of the valid ones in one statement, as the batch
// begins. Reading them all first gives each item what reading it just
// before settling it would: the batch writes only events in flight (and
// their flows), and an event written by an earlier item is Stale anyway
// (ackBatch.settle); the next event and the last seq that an ack reads
// are never written by a settle.
func readSettleRows(ctx context.Context, tx *txn, items []SettleItem, out []SettleResult) ([]settleRow, error) {
	rows := make([]settleRow, len(items))
	var (
		list []byte
		pos  []int // pos[k]: the item at position k of list
	)
	for i, it := range items {
		out[i] = SettleResult{}
		if err := it.Validate(); err != nil {
			out[i].Err = fmt.Errorf("settle %q: %w", it.EventID, err)
			continue
		}
		if len(list) == 0 {
			list = append(list, '[')
		} else {
			list = append(list, ',')
		}
		list = appendJSONString(list, it.EventID)
		pos = append(pos, i)
	}
	if len(pos) == 0 {
		return rows, nil
	}
	list = append(list, ']')
	var js []byte
	if err := tx.QueryRowContext(ctx, qSettleReadRows, string(list)).Scan(&js); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	r := jsonRows{b: js}
	r.open()
	n := 0
	for first := true; r.next(first); first = false {
		r.open()
		k, _ := r.int()
		if k < 0 || k >= int64(len(pos)) {
			r.fail("row position out of range")
			break
		}
		row := &rows[pos[k]]
		r.element(false)
		row.flow, row.found = r.str()
		r.element(false)
		row.seq, _ = r.int()
		r.element(false)
		row.state, _ = r.str()
		r.element(false)
		row.gen, _ = r.int()
		r.element(false)
		a, _ := r.int()
		row.attempts = int(a)
		r.element(false)
		row.leaseUntil, _ = r.int()
		r.element(false)
		row.last.Int64, row.last.Valid = r.int()
		r.element(false)
		row.next.Int64, row.next.Valid = r.int()
		r.element(false)
		row.eRowid, _ = r.int()
		r.element(false)
		row.fRowid, _ = r.int()
		r.element(false)
		row.nextEnq.Int64, row.nextEnq.Valid = r.int()
		r.end()
		n++
	}
	if r.err == nil && n != len(pos) {
		r.fail(fmt.Sprintf("%d rows for %d events", n, len(pos)))
	}
	if r.err != nil {
		return nil, r.err
	}
	return rows, nil
}
