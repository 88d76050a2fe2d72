package queuestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// RedriveChunk is the number of events RedriveAll redrives per transaction
// (docs/decisions/redrive-all.md).
const RedriveChunk = queue.RedriveChunk

// quarantinedQuery is the query of the quarantined events matching f, in (flow, seq)
// order, with its arguments; limit > 0 adds a LIMIT. Each form is driven
// by an index: events_quarantined without a reason, and
// events_quarantined_reason with one (plan_test.go). It returns one JSON
// array of objects with QuarantinedEvent's keys.
func quarantinedQuery(f RedriveFilter, limit int) (string, []any) {
	return selectFrom(f, `SELECT json_group_array(json_object('event_id', id, 'flow', flow, 'seq', seq,
    'generation', generation, 'lifetime_attempts', lifetime_attempts, 'reason', reason, 'error', error))
FROM (SELECT id, flow, seq, generation, lifetime_attempts, reason, `+qEventError+` AS error FROM events`, limit)
}

// chunkQuery is quarantinedQuery(f, RedriveChunk) in the form RedriveAll's chunk reads:
// one JSON array of [event rowid, flow rowid, event ID, flow, seq,
// generation] rows in (flow, seq) order, for its set statements
// (qRedriveEvents, qRedriveFlows, qRedriveAudit), so that a chunk is one
// read and three writes whatever its size. The same indexes drive it as
// query's, and each event's flow is found by its primary key
// (plan_test.go).
func chunkQuery(f RedriveFilter) (string, []any) {
	return selectFrom(f, `SELECT json_group_array(json_array(er, fr, id, flow, seq, generation))
FROM (SELECT rowid AS er, (SELECT rowid FROM flows WHERE flows.flow = events.flow) AS fr,
        id, flow, seq, generation FROM events`, RedriveChunk)
}

// redriveChunkQueries is chunkQuery's SQL for each form of filter, to
// prepare at Open (the filter values are its arguments).
func redriveChunkQueries() []string {
	var qs []string
	for _, f := range []RedriveFilter{{}, {Flow: "f"}, {Reason: "r"}, {Flow: "f", Reason: "r"}} {
		q, _ := chunkQuery(f)
		qs = append(qs, q)
	}
	return qs
}

// selectFrom completes head, an outer select over a subquery that selects
// from events, with the subquery's filter, order and limit and the closing
// parenthesis.
func selectFrom(f RedriveFilter, head string, limit int) (string, []any) {
	q := head + `
    WHERE state = 'quarantined'`
	var args []any
	if f.Flow != "" {
		args = append(args, f.Flow)
		q += fmt.Sprintf(" AND flow = ?%d", len(args))
	}
	if f.Reason != "" {
		args = append(args, f.Reason)
		q += fmt.Sprintf(" AND reason = ?%d", len(args))
	}
	q += " ORDER BY flow, seq"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	return q + ")", args
}

// QuarantinedMatching returns the quarantined events that f selects,
// ordered by flow and sequence number: what RedriveAll with f would
// redrive now (its dry run). A quarantined event is always its flow's head.
func (s *Store) QuarantinedMatching(ctx context.Context, f RedriveFilter) ([]QuarantinedEvent, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("quarantined matching: %w", err)
	}
	q, args := quarantinedQuery(f, 0)
	var js []byte
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&js); err != nil {
		return nil, fmt.Errorf("quarantined matching: %w", err)
	}
	var out []QuarantinedEvent
	if err := json.Unmarshal(js, &out); err != nil {
		return nil, fmt.Errorf("quarantined matching: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// RedriveAll's set statements, each over the whole chunk at once, at now
// ?2: each is what Redrive's statement of the same role does to one event.
// Every event of a chunk is a quarantined head, so no two name the same
// flow. Their ?1 is a JSON array that redriveChunk builds from the chunk's
// read: event rowids, or flow rowids.
const (
	// qRedriveEvents is qRedrive for the events whose rowids are the JSON
	// array ?1. The list is materialized so that the plan is always "scan
	// the list, look each event up by rowid" (as qAckEvents). It does not
	// test the state again: the chunk was read as quarantined in the same
	// transaction. (A "state = 'quarantined'" term here makes the planner
	// walk the whole events_quarantined index for every chunk.)
	qRedriveEvents = `WITH j (r) AS MATERIALIZED (SELECT value FROM json_each(?1))
UPDATE OR FAIL events SET generation = generation + 1, attempts = 0, state = 'pending',
    available_at = ?2, reason = '', lease_until = 0
FROM j WHERE events.rowid = j.r`

	// qRedriveFlows is qSetReadyNow for the flows whose rowids are the
	// JSON array ?1.
	qRedriveFlows = `WITH j (r) AS MATERIALIZED (SELECT value FROM json_each(?1))
UPDATE OR FAIL flows SET ready_at = ?2, ready = 1
FROM j WHERE flows.rowid = j.r`

	// qRotRedriveFlows is qRotSetReadyNow for the chunk: qRedriveFlows that
	// also clamps each flow's pass to vnow (a redrive does not move vnow,
	// so every flow of the chunk is clamped to the same value, as a
	// sequence of Redrive calls would).
	qRotRedriveFlows = `WITH j (r) AS MATERIALIZED (SELECT value FROM json_each(?1))
UPDATE OR FAIL flows SET ready_at = ?2, ready = 1, pass = max(pass, (SELECT vnow FROM meta WHERE id = 1))
FROM j WHERE flows.rowid = j.r`

	// qRedriveAudit is qInsertAudit for the events whose rowids are the
	// JSON array ?1, after qRedriveEvents: each event's ID and its new
	// generation (as qRedrive's RETURNING), the reason ?3 and now ?2. The
	// array is the outer loop, read in its order, so the audit rows get
	// their ids in the chunk's (flow, seq) order, as successive Redrive
	// calls would give them.
	qRedriveAudit = `INSERT INTO audit (event_id, generation, reason, at)
SELECT e.id, e.generation, ?3, ?2 FROM json_each(?1) AS j CROSS JOIN events AS e ON e.rowid = j.value`
)

// redriveFlows is qRedriveFlows, or under FairRotation qRotRedriveFlows.
func redriveFlows(p Policy) string {
	if isRotation(p) {
		return qRotRedriveFlows
	}
	return qRedriveFlows
}

// RedriveAll redrives every quarantined event that f selects, on one
// operator reason, each exactly as Redrive would (generation + 1, attempts
// 0, pending and available at now, reason cleared, its flow dispatchable at
// once), with one audit row per event (its new generation, the reason,
// now). It returns the events redriven, in (flow, seq) order per chunk.
//
// It works in chunks of RedriveChunk events, one transaction each, until no
// quarantined event matches. A crash or an error between chunks leaves the
// earlier chunks done and the rest quarantined: running it again redrives
// the rest and never an event twice (a redriven event is no longer
// quarantined). On an error RedriveAll returns the events of the chunks
// already committed with the error. A chunk is one read and three set
// statements (events, flows, audit), each over the whole chunk; the result
// is the same as Redrive calls on the chunk's events in (flow, seq) order
// at now, audit row ids included.
//
// Checks, before anything is written: the reason (as Redrive's), the
// filter (ErrInvalid), then per chunk the tick errors of every write.
// Nothing matching is not an error: the result is empty (and now is
// recorded as the clock mark).
func (s *Store) RedriveAll(ctx context.Context, f RedriveFilter, reason string, now clock.Tick) ([]Redriven, error) {
	if err := queue.CheckReason(reason); err != nil {
		return nil, fmt.Errorf("redrive all: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("redrive all: %w", err)
	}
	q, args := chunkQuery(f)
	var (
		done []Redriven
		rows []chunkRow
	)
	for {
		var chunk []Redriven
		err := s.withTx(ctx, func(tx *txn) error {
			chunk, rows = chunk[:0], rows[:0]
			a, err := s.admit(ctx, tx, now)
			if err != nil {
				return err
			}
			var js []byte
			if err := tx.QueryRowContext(ctx, q, args...).Scan(&js); err != nil {
				return fmt.Errorf("read quarantined events: %w", err)
			}
			if chunk, rows, err = readRedriveChunk(js, chunk, rows); err != nil {
				return fmt.Errorf("read quarantined events: %w", err)
			}
			if len(chunk) == 0 {
				return nil
			}
			return s.redriveChunk(ctx, tx, a, chunk, rows, reason)
		})
		if err != nil {
			return done, fmt.Errorf("redrive all: %w", err)
		}
		done = append(done, chunk...)
		if len(chunk) < RedriveChunk {
			return done, nil
		}
	}
}

// redriveChunk writes the redrive of chunk with the set statements; rows
// holds each event's rowid and its flow's rowid, in chunk order. Each
// statement must touch exactly one row per event.
func (s *Store) redriveChunk(ctx context.Context, tx *txn, a admission, chunk []Redriven, rows []chunkRow, reason string) error {
	n := int64(len(chunk))
	at := int64(a.now)
	evRows, flowRows := make([]byte, 0, 16*len(rows)), make([]byte, 0, 16*len(rows))
	for _, r := range rows {
		evRows = appendRowid(evRows, r.event)
		flowRows = appendRowid(flowRows, r.flow)
	}
	evRows, flowRows = append(evRows, ']'), append(flowRows, ']')
	res, err := tx.ExecContext(ctx, qRedriveEvents, string(evRows), at)
	if err != nil {
		return fmt.Errorf("update events: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != n {
		return fmt.Errorf("%w: update events: updated %d rows (%v), want %d", ErrCorrupt, k, err, n)
	}
	// A quarantined event is its flow's head: make each flow ready now.
	res, err = tx.ExecContext(ctx, redriveFlows(a.pol), string(flowRows), at)
	if err != nil {
		return fmt.Errorf("update flows: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != n {
		return fmt.Errorf("%w: update flows: updated %d rows (%v), want %d", ErrCorrupt, k, err, n)
	}
	// The hook runs once per event, as in a sequence of Redrive calls:
	// every event is updated, no audit row is written yet.
	for range chunk {
		s.call(HookRedriveBeforeAudit)
	}
	res, err = tx.ExecContext(ctx, qRedriveAudit, string(evRows), at, reason)
	if err != nil {
		return fmt.Errorf("insert audit: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != n {
		return fmt.Errorf("%w: insert audit: inserted %d rows (%v), want %d", ErrCorrupt, k, err, n)
	}
	return nil
}

// chunkRow is where one event of a chunk is: its rowid and its flow's.
type chunkRow struct{ event, flow int64 }

// readRedriveChunk appends to out the rows of chunkQuery's JSON, each with
// its new generation (the read one + 1), and to rows their rowids. A flow
// that is missing (null) is ErrCorrupt.
func readRedriveChunk(js []byte, out []Redriven, rows []chunkRow) ([]Redriven, []chunkRow, error) {
	r := jsonRows{b: js}
	r.open()
	for first := true; r.next(first); first = false {
		var (
			row     chunkRow
			flowOK  bool
			id, flw string
			seq     int64
			gen     int64
		)
		r.open()
		row.event, _ = r.int()
		r.element(false)
		row.flow, flowOK = r.int()
		r.element(false)
		id, _ = r.str()
		r.element(false)
		flw, _ = r.str()
		r.element(false)
		seq, _ = r.int()
		r.element(false)
		gen, _ = r.int()
		r.end()
		if r.err != nil {
			break
		}
		if !flowOK {
			return nil, nil, fmt.Errorf("%w: event %q has no flow %q", ErrCorrupt, id, flw)
		}
		out = append(out, Redriven{EventID: id, Flow: flw, Seq: seq, Generation: gen + 1})
		rows = append(rows, row)
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	return out, rows, nil
}
