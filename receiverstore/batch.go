package receiverstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
)

// The batch accept path (ReceiveBatch): each accepted message inserts its
// receipt at once, as Receive does, but the flows' totals and next-expected
// numbers are written once per flow at the end of the batch.
const (
	// qCheckRows is qCheck with the flow's rowid, which the batch's flow
	// update goes by.
	qCheckRows = `SELECT r.flow, r.seq, r.body, o.id, f.next_expected, f.pruned_through, f.rowid
		FROM (SELECT ?1 AS id, ?2 AS flow, ?3 AS seq) AS k
		LEFT JOIN receipts AS r ON r.id = k.id
		LEFT JOIN receipts AS o ON o.flow = k.flow AND o.seq = k.seq
		LEFT JOIN flows AS f ON f.flow = k.flow`
	// qInsertFlowAt creates a flow with the batch's accepted messages.
	qInsertFlowAt = `INSERT INTO flows (flow, next_expected, total) VALUES (?, ?, ?)`
	// qAdvanceFlows is qAdvanceFlow for the JSON array ?1 of [flow rowid,
	// delta sum, next_expected before, next_expected after]. The list is
	// materialized so that the plan is always "scan the list, find each row
	// by rowid"; OR FAIL needs no statement journal (a failure rolls back
	// the whole transaction).
	qAdvanceFlows = `WITH j (r, d, b, a) AS MATERIALIZED
		(SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(?1))
		UPDATE OR FAIL flows SET total = total + j.d, next_expected = j.a
		FROM j WHERE flows.rowid = j.r AND flows.next_expected = j.b`
)

// batchFlow is what a batch has accepted in one flow so far.
type batchFlow struct {
	flow   string
	known  bool // the flow has a row (at rowid)
	rowid  int64
	before int64 // next expected before the batch
	next   int64 // next expected after the messages accepted so far
	sum    int64 // their deltas
}

// flowBatch holds the flows a batch accepted messages in, in the order of
// their first accepted message, and the number of hook calls owed.
type flowBatch struct {
	flows    []batchFlow
	index    map[string]int // flow -> position in flows
	accepted int
}

// receiveInBatch is receiveTx for one message of a batch: the same checks
// in the same order. Receipts and conflicts are written at once, so later
// messages see them in the database; the flow's next expected number is
// taken from b once the batch has accepted a message in the flow.
func (s *Store) receiveInBatch(ctx context.Context, tx writeTx, b *flowBatch, m Message, delta int64) (Outcome, error) {
	var (
		chk    checkRow
		fRowid sql.NullInt64
	)
	if err := tx.queryRow(ctx, qCheckRows, m.ID, m.Flow, m.Seq).Scan(&chk.rFlow, &chk.rSeq, &chk.rBody, &chk.otherID, &chk.nextCol, &chk.pruned, &fRowid); err != nil {
		return "", fmt.Errorf("read receipts and flow: %w", err)
	}
	pos, inBatch := b.index[m.Flow]
	next := int64(1)
	switch {
	case inBatch:
		next = b.flows[pos].next
	case chk.nextCol.Valid:
		next = chk.nextCol.Int64
	}
	if out, accept, err := s.decide(ctx, tx, m, delta, &chk, next); !accept {
		return out, err
	}

	// Rule 6: accept. The receipt now; the flow's total and next expected
	// number at the end of the batch (writeFlows).
	if _, err := tx.exec(ctx, qInsertReceipt, m.ID, m.Flow, m.Seq, m.Body, delta, s.now().UnixMicro()); err != nil {
		return "", fmt.Errorf("insert receipt: %w", err)
	}
	if err := s.runEffect(ctx, tx, m); err != nil {
		return "", err
	}
	if inBatch {
		b.flows[pos].next++
		b.flows[pos].sum += delta
	} else {
		if b.index == nil {
			b.index = make(map[string]int)
		}
		b.index[m.Flow] = len(b.flows)
		b.flows = append(b.flows, batchFlow{flow: m.Flow, known: fRowid.Valid, rowid: fRowid.Int64, before: next, next: next + 1, sum: delta})
	}
	b.accepted++
	return Accepted, nil
}

// writeFlows writes the totals and next expected numbers of the flows the
// batch accepted messages in (existing flows in one statement, new flows
// one insert each), then calls the hook once per accepted message: each
// call comes after that message's receipt and its flow's update, before
// commit.
func (s *Store) writeFlows(ctx context.Context, tx writeTx, b *flowBatch) error {
	var (
		list []byte
		n    int64
	)
	for _, f := range b.flows {
		if !f.known {
			if _, err := tx.exec(ctx, qInsertFlowAt, f.flow, f.next, f.sum); err != nil {
				return fmt.Errorf("insert flow total: %w", err)
			}
			continue
		}
		if len(list) == 0 {
			list = append(list, '[')
		} else {
			list = append(list, ',')
		}
		list = append(list, '[')
		list = strconv.AppendInt(list, f.rowid, 10)
		list = append(list, ',')
		list = strconv.AppendInt(list, f.sum, 10)
		list = append(list, ',')
		list = strconv.AppendInt(list, f.before, 10)
		list = append(list, ',')
		list = strconv.AppendInt(list, f.next, 10)
		list = append(list, ']')
		n++
	}
	if n > 0 {
		r, err := tx.exec(ctx, qAdvanceFlows, string(append(list, ']')))
		if err != nil {
			return fmt.Errorf("update totals: %w", err)
		}
		k, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("update totals: %w", err)
		}
		if k != n {
			return fmt.Errorf("update totals: %d rows changed, want %d", k, n)
		}
	}
	if s.hook != nil {
		for range b.accepted {
			s.hook(HookAcceptBeforeCommit)
		}
	}
	return nil
}
