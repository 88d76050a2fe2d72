package pgreceiverstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
)

// On the general path a batch of messages is received in two round trips
// whatever its size (docs/decisions/postgres-per-event-cost.md): BEGIN,
// the locks and the read (qRead) in one; then, with the rules applied in
// Go in the batch's order, every write of the batch as one set statement
// per table (qInsertReceipts, qInsertFlows, qAdvanceFlows,
// qInsertConflicts) with COMMIT in the other. The reads run after the
// locks of every ID and flow of the batch are held, so nothing they read
// changes before the commit but by the batch itself, which the Go side
// carries from one message to the next. A batch whose every message is
// accepted is one round trip instead: the same locks, read and writes run
// by the server in one call of receive_accepted (onecall.go).
const (
	// qRead reads, for each message of the arrays (ID, flow, seq), what
	// rules 1 to 4 need, in one statement: the receipt with its ID, the ID
	// of a receipt for its (flow, seq), and its flow's next expected seq
	// and pruned mark (NULL columns for what does not exist).
	// Index-driven: a key probe each (TestPlans_RetentionIndexDriven),
	// also on tables never analyzed (TestPlans_ReceiveWithoutStatistics):
	// each LATERAL probe (LIMIT 1 keeps the planner from flattening it
	// into a join) is a nested loop's inner side, where a plain join over
	// the arrays let the planner pick a hash join over a sequential scan
	// of receipts while its statistics say it is small.
	qRead = `SELECT k.id, k.flow, k.seq, r.flow, r.seq, r.body, o.id, f.next_expected, f.pruned_through
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k (id, flow, seq)
LEFT JOIN LATERAL (SELECT x.flow, x.seq, x.body FROM {s}.receipts AS x WHERE x.id = k.id LIMIT 1) AS r ON true
LEFT JOIN LATERAL (SELECT x.id FROM {s}.receipts AS x WHERE x.flow = k.flow AND x.seq = k.seq LIMIT 1) AS o ON true
LEFT JOIN LATERAL (SELECT x.next_expected, x.pruned_through FROM {s}.flows AS x WHERE x.flow = k.flow LIMIT 1) AS f ON true`

	qInsertReceipts = `INSERT INTO {s}.receipts (id, flow, seq, body, delta, accepted_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::bigint[], $6::timestamptz[])`
	// qInsertFlows writes the flows that had no row, with what the batch
	// accepted of them.
	qInsertFlows = `INSERT INTO {s}.flows (flow, next_expected, total)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])`
	// qAdvanceFlows moves the flows that had a row by what the batch
	// accepted of them, each only from the next expected seq the batch
	// read (the flow's lock is held: every row matches). Each element of
	// the arrays finds its row through the key (a nested loop of key
	// probes under qKeyPlans, statistics or not:
	// TestPlans_ReceiveWithoutStatistics), so the
	// statement's cost grows with the batch, not with its square as a
	// search of the arrays for each row would
	// (docs/decisions/postgres-server-side-transitions.md, "Large
	// batches"). The server checks that every flow moved, and fails the
	// statement otherwise (the cast of "N rows changed, want M" to an
	// integer): the statement goes with COMMIT, which a check of the
	// command tag in Go would come after
	// (docs/decisions/postgres-commit-in-the-last-batch.md).
	qAdvanceFlows = `WITH a AS (UPDATE {s}.flows AS f
SET total = f.total + u.add, next_expected = u.next
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS u(flow, was, next, add)
WHERE f.flow = u.flow AND f.next_expected = u.was
RETURNING 1)
SELECT CASE WHEN count(*) = cardinality($1::text[]) THEN 0
    ELSE (count(*) || ' rows changed, want ' || cardinality($1::text[]))::integer END FROM a`
	qInsertConflicts = `INSERT INTO {s}.conflicts
    (id, flow, seq, body, rule, with_id, with_flow, with_seq, next_expected)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[])
ON CONFLICT (id, flow, seq, body) DO NOTHING`
)

// Receive applies m at most once and reports what it did, by the rules of
// docs/contract.md §3 in their order (see the package doc). A bad body is
// receiver.ErrInvalidBody, a bad ID, flow or seq receiver.ErrInvalid; both
// change nothing. SQL errors are returned wrapped, the transaction rolled
// back. An accepted message costs one round trip to the server, another
// answer three: the call that finds it, then the general path's two (see
// ReceiveBatch).
func (s *Store) Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error) {
	delta, err := receiver.Validate(m)
	if err != nil {
		return "", fmt.Errorf("receive: %w", err)
	}
	outs, err := s.receiveAny(ctx, []receiver.Message{m}, []int64{delta})
	if err != nil {
		return "", fmt.Errorf("receive: %w", err)
	}
	return outs[0], nil
}

// ReceiveBatch receives ms in one transaction. Each message gets the result
// that len(ms) successive Receive calls, in slice order, would give. A
// message that fails validation gets its own Err and changes nothing; the
// others go on. The returned error is for the batch as a whole (an SQL
// error): then nothing changes and the results are nil.
//
// The batch costs one round trip to the server, however many messages it
// holds, when every valid message is accepted: one call of a function on
// the server that locks, reads, checks and writes, and commits as one
// statement (docs/decisions/postgres-server-side-transitions.md). When
// the server finds that any message would get another answer, the call
// writes nothing and the batch runs as statements sent from Go, in two
// more round trips: BEGIN with the locks and one read, then the writes
// with COMMIT. A batch with a delta above WithMaxDelta's, and every batch
// of a store opened WithHook (whose hook runs inside the transaction),
// takes those two round trips alone.
func (s *Store) ReceiveBatch(ctx context.Context, ms []receiver.Message) ([]receiver.BatchResult, error) {
	res := make([]receiver.BatchResult, len(ms))
	var (
		valid  []receiver.Message
		deltas []int64
		at     []int
	)
	for i, m := range ms {
		d, err := receiver.Validate(m)
		if err != nil {
			res[i].Err = fmt.Errorf("receive batch item %d: %w", i, err)
			continue
		}
		valid, deltas, at = append(valid, m), append(deltas, d), append(at, i)
	}
	if len(valid) == 0 {
		return res, nil
	}
	outs, err := s.receiveAny(ctx, valid, deltas)
	if err != nil {
		return nil, fmt.Errorf("receive batch: %w", err)
	}
	for k, o := range outs {
		res[at[k]].Outcome = o
	}
	return res, nil
}

// seqKey is a receipt's (flow, seq).
type seqKey struct {
	flow string
	seq  int64
}

// heldReceipt is what rule 1 compares: a receipt's flow, seq and body.
type heldReceipt struct {
	flow string
	seq  int64
	body []byte
}

// flowState is a flow as the batch sees it: the row read (had), the next
// expected seq and pruned mark, and what the batch accepted of it.
type flowState struct {
	had      bool
	was      int64 // next_expected as read (had)
	next     int64
	pruned   int64
	add      int64 // the accepted deltas' sum
	accepted bool
}

// receive applies validated messages (ms, with their deltas) in one
// transaction, in order, each by the rules of docs/contract.md §3 as if
// alone, later ones seeing earlier ones: the general path. The hook runs
// once per accepted message, after the batch's writes, before the commit.
func (s *Store) receive(ctx context.Context, ms []receiver.Message, deltas []int64) ([]receiver.Outcome, error) {
	ids := make([]string, len(ms))
	flows := make([]string, len(ms))
	seqs := make([]int64, len(ms))
	for i, m := range ms {
		ids[i], flows[i], seqs[i] = m.ID, m.Flow, m.Seq
	}
	byID := make(map[string]heldReceipt, len(ms))
	bySeq := make(map[seqKey]string, len(ms))
	state := make(map[string]*flowState, len(ms))
	reads := []batchStep{{what: "read receipts and flows", sql: s.q(qRead), args: []any{ids, flows, seqs}, rows: func(r pgx.Rows) error {
		var (
			k              seqKey
			id             string
			rFlow, otherID *string
			rSeq, next     *int64
			pruned         *int64
			rBody          []byte
		)
		if err := r.Scan(&id, &k.flow, &k.seq, &rFlow, &rSeq, &rBody, &otherID, &next, &pruned); err != nil {
			return err
		}
		if rFlow != nil {
			byID[id] = heldReceipt{flow: *rFlow, seq: *rSeq, body: rBody}
		}
		if otherID != nil {
			bySeq[k] = *otherID
		}
		if next != nil {
			state[k.flow] = &flowState{had: true, was: *next, next: *next, pruned: *pruned}
		}
		return nil
	}}}
	outs := make([]receiver.Outcome, len(ms))
	err := s.withWriteTx(ctx, ms, func(pgx.Tx) ([]batchStep, error) {
		var w writes
		for i, m := range ms {
			outs[i] = s.apply(m, deltas[i], byID, bySeq, state, &w)
		}
		if s.hook != nil {
			for range w.ids {
				s.hook(receiver.HookAcceptBeforeCommit)
			}
		}
		return s.writeSteps(&w, state), nil
	}, reads...)
	if err != nil {
		return nil, err
	}
	return outs, nil
}

// writes are a batch's rows to write: the accepted receipts and the
// conflicts, as the arrays of qInsertReceipts and qInsertConflicts.
type writes struct {
	ids, flows     []string
	seqs, deltas   []int64
	bodies         [][]byte
	at             []time.Time
	cIDs, cFlows   []string
	cSeqs          []int64
	cBodies        [][]byte
	cRules, cWIDs  []string
	cWFlows        []string
	cWSeqs, cNexts []int64
}

// apply answers m by the rules, in their order, against what the batch
// read and what it did before m, and records m's writes in w.
func (s *Store) apply(m receiver.Message, delta int64, byID map[string]heldReceipt, bySeq map[seqKey]string, state map[string]*flowState, w *writes) receiver.Outcome {
	conflict := func(rule, withID, withFlow string, withSeq, next int64) receiver.Outcome {
		w.cIDs, w.cFlows, w.cSeqs, w.cBodies = append(w.cIDs, m.ID), append(w.cFlows, m.Flow), append(w.cSeqs, m.Seq), append(w.cBodies, m.Body)
		w.cRules, w.cWIDs, w.cWFlows = append(w.cRules, rule), append(w.cWIDs, withID), append(w.cWFlows, withFlow)
		w.cWSeqs, w.cNexts = append(w.cWSeqs, withSeq), append(w.cNexts, next)
		return receiver.Conflict
	}
	// Rule 1: a receipt with this ID.
	if r, ok := byID[m.ID]; ok {
		if r.flow == m.Flow && r.seq == m.Seq && bytes.Equal(r.body, m.Body) {
			return receiver.Duplicate
		}
		return conflict(receiver.RuleIDReused, m.ID, r.flow, r.seq, 0)
	}
	// Rule 2: a receipt for (flow, seq) under another ID.
	if other, ok := bySeq[seqKey{m.Flow, m.Seq}]; ok {
		return conflict(receiver.RuleSeqTaken, other, m.Flow, m.Seq, 0)
	}
	st := state[m.Flow]
	if st == nil {
		st = &flowState{next: 1}
		state[m.Flow] = st
	}
	// Retention (docs/contract.md §7.9): no receipt, and seq at or below
	// the flow's pruned mark: applied once, its receipt since deleted.
	if st.had && m.Seq <= st.pruned {
		return receiver.Pruned
	}
	// Rule 3: a gap; rule 4: behind, with no receipt.
	if m.Seq > st.next {
		return receiver.Gap
	}
	if m.Seq < st.next {
		return conflict(receiver.RuleSeqBehind, "", "", 0, st.next)
	}
	// Rule 5: beyond this receiver's capability.
	if delta > s.maxDelta {
		return receiver.UnsupportedDelta
	}
	// Rule 6: accept.
	w.ids, w.flows, w.seqs, w.bodies = append(w.ids, m.ID), append(w.flows, m.Flow), append(w.seqs, m.Seq), append(w.bodies, m.Body)
	w.deltas, w.at = append(w.deltas, delta), append(w.at, s.now())
	byID[m.ID] = heldReceipt{flow: m.Flow, seq: m.Seq, body: m.Body}
	bySeq[seqKey{m.Flow, m.Seq}] = m.ID
	st.next++
	st.add += delta
	st.accepted = true
	return receiver.Accepted
}

// writeSteps are the statements that write w's rows and the moves of the
// flows it accepted messages of, one set statement per table, to go with
// COMMIT (begin).
func (s *Store) writeSteps(w *writes, state map[string]*flowState) []batchStep {
	var steps []batchStep
	if len(w.ids) > 0 {
		steps = append(steps, batchStep{what: "insert receipts", sql: s.q(qInsertReceipts), args: []any{w.ids, w.flows, w.seqs, w.bodies, w.deltas, w.at}})
		var nf, af []string
		var nNext, nTotal, aWas, aNext, aAdd []int64
		for f, st := range state {
			switch {
			case !st.accepted:
			case st.had:
				af, aWas, aNext, aAdd = append(af, f), append(aWas, st.was), append(aNext, st.next), append(aAdd, st.add)
			default:
				nf, nNext, nTotal = append(nf, f), append(nNext, st.next), append(nTotal, st.add)
			}
		}
		if len(nf) > 0 {
			steps = append(steps, batchStep{what: "insert flow totals", sql: s.q(qInsertFlows), args: []any{nf, nNext, nTotal}})
		}
		if len(af) > 0 {
			steps = append(steps, batchStep{what: "update totals", sql: s.q(qAdvanceFlows), args: []any{af, aWas, aNext, aAdd}})
		}
	}
	if len(w.cIDs) > 0 {
		steps = append(steps, batchStep{what: "record conflicts", sql: s.q(qInsertConflicts), args: []any{w.cIDs, w.cFlows, w.cSeqs, w.cBodies, w.cRules, w.cWIDs, w.cWFlows, w.cWSeqs, w.cNexts}})
	}
	return steps
}
