package receiverstore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"

	"github.com/fairrelay/fairrelay/receiver"
)

// MaxNameLen is receiver.MaxNameLen: the longest Message.ID or
// Message.Flow, in bytes.
const MaxNameLen = receiver.MaxNameLen

// The outcomes of Receive, in the order of docs/contract.md §3: receiver's
// constants, shared by every backend.
const (
	// Accepted: the effect is applied. The receipt, total += delta and
	// next-expected += 1 were committed in one transaction.
	Accepted = receiver.Accepted
	// Duplicate: this exact message (ID, Flow, Seq, Body) was accepted
	// before. Nothing changes.
	Duplicate = receiver.Duplicate
	// Conflict: the message clashes with a receipt or with the flow's order.
	// It is recorded once for an operator (see [Store.Conflicts]); totals do
	// not change.
	Conflict = receiver.Conflict
	// Gap: Seq is above the flow's next expected number. Nothing changes;
	// nothing is skipped.
	Gap = receiver.Gap
	// UnsupportedDelta: delta is above the store's MaxDelta. Nothing changes;
	// the same message is accepted once the store is opened with a cap that
	// allows it.
	UnsupportedDelta = receiver.UnsupportedDelta
	// Pruned: Seq is at or below the flow's pruned mark and has no receipt:
	// the event was applied and its receipt deleted by Prune. Nothing
	// changes; a sender counts it as delivered.
	Pruned = receiver.Pruned
)

// Conflict rules recorded in [ConflictRecord.Rule] (receiver's).
const (
	RuleIDReused  = receiver.RuleIDReused  // docs/contract.md §3 rule 1: the ID has a receipt with another flow, seq or body
	RuleSeqTaken  = receiver.RuleSeqTaken  // rule 2: (flow, seq) has a receipt under another ID
	RuleSeqBehind = receiver.RuleSeqBehind // rule 4: seq is below next-expected and has no receipt
)

// Receive applies m at most once and reports what it did.
//
// The body must be {"delta": N} with an integer N in 1..1000, else
// [ErrInvalidBody]; ID and Flow must be 1..200 bytes of printable UTF-8, not
// blank and without leading or trailing whitespace, and
// Seq at least 1, else [ErrInvalid]. Both errors change nothing. A valid
// message is then checked, in one IMMEDIATE transaction, in the order of
// docs/contract.md §3: a receipt with this ID ([Duplicate] or [Conflict]); a receipt for
// (Flow, Seq) under another ID ([Conflict]); Seq at or below the flow's
// pruned mark ([Pruned], docs/contract.md §7.9); Seq above next-expected
// ([Gap]); Seq below it ([Conflict]); delta above MaxDelta
// ([UnsupportedDelta]); otherwise [Accepted]. SQL errors are returned
// wrapped and the transaction is rolled back.
//
// A store opened [WithEffect] takes any body of 1..[MaxEffectBodyLen] bytes,
// never answers UnsupportedDelta, and runs the effect inside the accept
// transaction; an effect's error rolls the accept back and is returned
// wrapping [ErrEffect].
func (s *Store) Receive(ctx context.Context, m Message) (Outcome, error) {
	delta, err := s.validateFor(m)
	if err != nil {
		return "", fmt.Errorf("receive: %w", err)
	}
	var out Outcome
	err = s.withWriteTx(ctx, func(tx writeTx) error {
		var err error
		out, err = s.receiveTx(ctx, tx, m, delta)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("receive: %w", err)
	}
	return out, nil
}

// ReceiveBatch receives ms in one IMMEDIATE transaction. Each message gets
// the result that len(ms) successive Receive calls, in slice order, would
// give: later messages see the effects of earlier ones in the same batch. A
// message that fails validation gets its own Err and changes nothing; the
// others go on. The returned error is for the batch as a whole (an SQL
// error, or an [Effect]'s error wrapping [ErrEffect]): then the transaction
// is rolled back, nothing changes, and the results are nil. The effect runs
// right after each accepted message's receipt insert (the flows' totals are
// written at the end of the batch); the hook, when set, is called after each
// accepted message's writes, all inside the one transaction.
func (s *Store) ReceiveBatch(ctx context.Context, ms []Message) ([]BatchResult, error) {
	res := make([]BatchResult, len(ms))
	deltas := make([]int64, len(ms))
	valid := 0
	for i, m := range ms {
		d, err := s.validateFor(m)
		if err != nil {
			res[i].Err = fmt.Errorf("receive batch item %d: %w", i, err)
			continue
		}
		deltas[i] = d
		valid++
	}
	if valid == 0 {
		return res, nil
	}
	err := s.withWriteTx(ctx, func(tx writeTx) error {
		var b flowBatch
		for i, m := range ms {
			if res[i].Err != nil {
				continue
			}
			out, err := s.receiveInBatch(ctx, tx, &b, m, deltas[i])
			if err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
			res[i].Outcome = out
		}
		return s.writeFlows(ctx, tx, &b)
	})
	if err != nil {
		return nil, fmt.Errorf("receive batch: %w", err)
	}
	return res, nil
}

const (
	qReceiptByID  = `SELECT flow, seq, body FROM receipts WHERE id = ?`
	qReceiptBySeq = `SELECT id FROM receipts WHERE flow = ? AND seq = ?`
	qNextExpected = `SELECT next_expected FROM flows WHERE flow = ?`
	// qCheck reads what rules 1 to 4 need in one statement: the receipt with
	// the message's ID, the ID of a receipt for its (flow, seq), and the
	// flow's next expected seq (NULL columns for what does not exist).
	qCheck = `SELECT r.flow, r.seq, r.body, o.id, f.next_expected, f.pruned_through
		FROM (SELECT ?1 AS id, ?2 AS flow, ?3 AS seq) AS k
		LEFT JOIN receipts AS r ON r.id = k.id
		LEFT JOIN receipts AS o ON o.flow = k.flow AND o.seq = k.seq
		LEFT JOIN flows AS f ON f.flow = k.flow`
	qInsertReceipt = `INSERT INTO receipts (id, flow, seq, body, delta, accepted_at) VALUES (?, ?, ?, ?, ?, ?)`
	qInsertFlow    = `INSERT INTO flows (flow, next_expected, total) VALUES (?, 2, ?)`
	qAdvanceFlow   = `UPDATE flows SET total = total + ?, next_expected = next_expected + 1
		WHERE flow = ? AND next_expected = ?`
	qInsertConflict = `INSERT INTO conflicts
		(id, flow, seq, body, rule, with_id, with_flow, with_seq, next_expected)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id, flow, seq, body) DO NOTHING`
)

// writeQueries are the accept path's statements, prepared once per Store
// on its write connection (drivertx), so SQLite parses each query once.
var writeQueries = []string{qCheck,
	qInsertReceipt, qInsertFlow, qAdvanceFlow, qInsertConflict,
	qCheckRows, qInsertFlowAt, qAdvanceFlows}

// checkRow is what a check query reads for a message: the receipt with its
// ID, another receipt's ID for its (flow, seq), the flow's next expected
// number and its pruned mark.
type checkRow struct {
	rFlow, otherID        sql.NullString
	rSeq, nextCol, pruned sql.NullInt64
	rBody                 []byte
}

// decide applies docs/contract.md §3's rules 1 to 5, in order, to m against chk, with
// next the flow's next expected number, and records a conflict where a rule
// says so. accept reports that none applied: rule 6, the caller accepts.
// Receive and ReceiveBatch both decide here, so the order lives in one place.
func (s *Store) decide(ctx context.Context, tx writeTx, m Message, delta int64, chk *checkRow, next int64) (out Outcome, accept bool, err error) {
	// Rule 1: a receipt with this ID.
	if chk.rFlow.Valid {
		if chk.rFlow.String == m.Flow && chk.rSeq.Int64 == m.Seq && bytes.Equal(chk.rBody, m.Body) {
			return Duplicate, false, nil
		}
		return Conflict, false, recordConflict(ctx, tx, m, RuleIDReused, m.ID, chk.rFlow.String, chk.rSeq.Int64, 0)
	}
	// Rule 2: a receipt for (flow, seq) under another ID.
	if chk.otherID.Valid {
		return Conflict, false, recordConflict(ctx, tx, m, RuleSeqTaken, chk.otherID.String, m.Flow, m.Seq, 0)
	}
	// Retention (docs/contract.md §7.9): no receipt, and seq at or below
	// the flow's pruned mark: applied once, its receipt since deleted.
	if chk.pruned.Valid && m.Seq <= chk.pruned.Int64 {
		return Pruned, false, nil
	}
	// Rule 3: a gap; rule 4: behind, with no receipt.
	if m.Seq > next {
		return Gap, false, nil
	}
	if m.Seq < next {
		return Conflict, false, recordConflict(ctx, tx, m, RuleSeqBehind, "", "", 0, next)
	}
	// Rule 5: beyond this receiver's capability.
	if delta > s.maxDelta {
		return UnsupportedDelta, false, nil
	}
	return "", true, nil
}

// receiveTx runs the docs/contract.md §3 checks for a validated message inside the
// write transaction tx.
func (s *Store) receiveTx(ctx context.Context, tx writeTx, m Message, delta int64) (Outcome, error) {
	var chk checkRow
	if err := tx.queryRow(ctx, qCheck, m.ID, m.Flow, m.Seq).Scan(&chk.rFlow, &chk.rSeq, &chk.rBody, &chk.otherID, &chk.nextCol, &chk.pruned); err != nil {
		return "", fmt.Errorf("read receipts and flow: %w", err)
	}
	next, known := int64(1), false
	if chk.nextCol.Valid {
		next, known = chk.nextCol.Int64, true
	}
	if out, accept, err := s.decide(ctx, tx, m, delta, &chk, next); !accept {
		return out, err
	}

	// Rule 6: accept. Receipt first, then the total (the built-in effect),
	// then the user's effect (WithEffect), then the hook.
	if _, err := tx.exec(ctx, qInsertReceipt, m.ID, m.Flow, m.Seq, m.Body, delta, s.now().UnixMicro()); err != nil {
		return "", fmt.Errorf("insert receipt: %w", err)
	}
	if known {
		r, err := tx.exec(ctx, qAdvanceFlow, delta, m.Flow, next)
		if err != nil {
			return "", fmt.Errorf("update total: %w", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return "", fmt.Errorf("update total: %w", err)
		}
		if n != 1 {
			return "", fmt.Errorf("update total: %d rows changed, want 1", n)
		}
	} else if _, err := tx.exec(ctx, qInsertFlow, m.Flow, delta); err != nil {
		return "", fmt.Errorf("insert flow total: %w", err)
	}
	if err := s.runEffect(ctx, tx, m); err != nil {
		return "", err
	}
	if s.hook != nil {
		s.hook(HookAcceptBeforeCommit)
	}
	return Accepted, nil
}

// recordConflict keeps one row per distinct conflicting message.
func recordConflict(ctx context.Context, tx writeTx, m Message, rule, withID, withFlow string, withSeq, next int64) error {
	if _, err := tx.exec(ctx, qInsertConflict,
		m.ID, m.Flow, m.Seq, m.Body, rule, withID, withFlow, withSeq, next); err != nil {
		return fmt.Errorf("record conflict: %w", err)
	}
	return nil
}
