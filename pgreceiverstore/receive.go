package pgreceiverstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
)

const (
	// qCheck reads what rules 1 to 4 need in one statement: the receipt with
	// the message's ID, the ID of a receipt for its (flow, seq), and the
	// flow's next expected seq (NULL columns for what does not exist).
	qCheck = `SELECT r.flow, r.seq, r.body, o.id, f.next_expected, f.pruned_through
FROM (SELECT $1::text AS id, $2::text AS flow, $3::bigint AS seq) AS k
LEFT JOIN {s}.receipts AS r ON r.id = k.id
LEFT JOIN {s}.receipts AS o ON o.flow = k.flow AND o.seq = k.seq
LEFT JOIN {s}.flows AS f ON f.flow = k.flow`
	qInsertReceipt = `INSERT INTO {s}.receipts (id, flow, seq, body, delta, accepted_at) VALUES ($1, $2, $3, $4, $5, $6)`
	qInsertFlow    = `INSERT INTO {s}.flows (flow, next_expected, total) VALUES ($1, 2, $2)`
	qAdvanceFlow   = `UPDATE {s}.flows SET total = total + $1, next_expected = next_expected + 1
WHERE flow = $2 AND next_expected = $3`
	qInsertConflict = `INSERT INTO {s}.conflicts
    (id, flow, seq, body, rule, with_id, with_flow, with_seq, next_expected)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (id, flow, seq, body) DO NOTHING`
)

// Receive applies m at most once and reports what it did, by the rules of
// docs/contract.md §3 in their order (see the package doc). A bad body is
// receiver.ErrInvalidBody, a bad ID, flow or seq receiver.ErrInvalid; both
// change nothing. SQL errors are returned wrapped, the transaction rolled
// back.
func (s *Store) Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error) {
	delta, err := receiver.Validate(m)
	if err != nil {
		return "", fmt.Errorf("receive: %w", err)
	}
	var out receiver.Outcome
	err = s.withWriteTx(ctx, []receiver.Message{m}, func(tx pgx.Tx) error {
		var err error
		out, err = s.receiveTx(ctx, tx, m, delta)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("receive: %w", err)
	}
	return out, nil
}

// ReceiveBatch receives ms in one transaction. Each message gets the result
// that len(ms) successive Receive calls, in slice order, would give. A
// message that fails validation gets its own Err and changes nothing; the
// others go on. The returned error is for the batch as a whole (an SQL
// error): then nothing changes and the results are nil.
func (s *Store) ReceiveBatch(ctx context.Context, ms []receiver.Message) ([]receiver.BatchResult, error) {
	res := make([]receiver.BatchResult, len(ms))
	deltas := make([]int64, len(ms))
	var valid []receiver.Message
	for i, m := range ms {
		d, err := receiver.Validate(m)
		if err != nil {
			res[i].Err = fmt.Errorf("receive batch item %d: %w", i, err)
			continue
		}
		deltas[i] = d
		valid = append(valid, m)
	}
	if len(valid) == 0 {
		return res, nil
	}
	err := s.withWriteTx(ctx, valid, func(tx pgx.Tx) error {
		for i, m := range ms {
			if res[i].Err != nil {
				continue
			}
			out, err := s.receiveTx(ctx, tx, m, deltas[i])
			if err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
			res[i].Outcome = out
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("receive batch: %w", err)
	}
	return res, nil
}

// receiveTx applies the rules to a validated message inside tx, which
// holds the locks of its ID and flow.
func (s *Store) receiveTx(ctx context.Context, tx pgx.Tx, m receiver.Message, delta int64) (receiver.Outcome, error) {
	var (
		rFlow, otherID *string
		rSeq, nextCol  *int64
		pruned         *int64
		rBody          []byte
	)
	if err := tx.QueryRow(ctx, s.q(qCheck), m.ID, m.Flow, m.Seq).Scan(&rFlow, &rSeq, &rBody, &otherID, &nextCol, &pruned); err != nil {
		return "", fmt.Errorf("read receipts and flow: %w", err)
	}
	next := int64(1)
	if nextCol != nil {
		next = *nextCol
	}
	// Rule 1: a receipt with this ID.
	if rFlow != nil {
		if *rFlow == m.Flow && *rSeq == m.Seq && bytes.Equal(rBody, m.Body) {
			return receiver.Duplicate, nil
		}
		return receiver.Conflict, s.recordConflict(ctx, tx, m, receiver.RuleIDReused, m.ID, *rFlow, *rSeq, 0)
	}
	// Rule 2: a receipt for (flow, seq) under another ID.
	if otherID != nil {
		return receiver.Conflict, s.recordConflict(ctx, tx, m, receiver.RuleSeqTaken, *otherID, m.Flow, m.Seq, 0)
	}
	// Retention (docs/contract.md §7.9): no receipt, and seq at or below
	// the flow's pruned mark: applied once, its receipt since deleted.
	if pruned != nil && m.Seq <= *pruned {
		return receiver.Pruned, nil
	}
	// Rule 3: a gap; rule 4: behind, with no receipt.
	if m.Seq > next {
		return receiver.Gap, nil
	}
	if m.Seq < next {
		return receiver.Conflict, s.recordConflict(ctx, tx, m, receiver.RuleSeqBehind, "", "", 0, next)
	}
	// Rule 5: beyond this receiver's capability.
	if delta > s.maxDelta {
		return receiver.UnsupportedDelta, nil
	}
	// Rule 6: accept. Receipt first, then the effect, then the hook.
	if _, err := tx.Exec(ctx, s.q(qInsertReceipt), m.ID, m.Flow, m.Seq, m.Body, delta, s.now()); err != nil {
		return "", fmt.Errorf("insert receipt: %w", err)
	}
	if nextCol != nil {
		tag, err := tx.Exec(ctx, s.q(qAdvanceFlow), delta, m.Flow, next)
		if err != nil {
			return "", fmt.Errorf("update total: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return "", fmt.Errorf("update total: %d rows changed, want 1", tag.RowsAffected())
		}
	} else if _, err := tx.Exec(ctx, s.q(qInsertFlow), m.Flow, delta); err != nil {
		return "", fmt.Errorf("insert flow total: %w", err)
	}
	if s.hook != nil {
		s.hook(receiver.HookAcceptBeforeCommit)
	}
	return receiver.Accepted, nil
}

// recordConflict keeps one row per distinct conflicting message.
func (s *Store) recordConflict(ctx context.Context, tx pgx.Tx, m receiver.Message, rule, withID, withFlow string, withSeq, next int64) error {
	if _, err := tx.Exec(ctx, s.q(qInsertConflict),
		m.ID, m.Flow, m.Seq, m.Body, rule, withID, withFlow, withSeq, next); err != nil {
		return fmt.Errorf("record conflict: %w", err)
	}
	return nil
}
