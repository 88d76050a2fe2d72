package receiverstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/receiver"
)

// Total returns the flow's running total: the sum of the deltas of its
// accepted messages, 0 for an unknown flow. A flow name that could never be
// received (empty, too long, unprintable) is [ErrInvalid].
func (s *Store) Total(ctx context.Context, flow string) (int64, error) {
	if err := receiver.ValidName("Flow", flow); err != nil {
		return 0, fmt.Errorf("total: %w", err)
	}
	var t int64
	err := s.db.QueryRowContext(ctx, `SELECT total FROM flows WHERE flow = ?`, flow).Scan(&t)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("total: %w", err)
	}
	return t, nil
}

// NextExpected returns the sequence number the flow accepts next: 1 plus the
// number of its accepted messages, 1 for an unknown flow. A flow name that
// could never be received is [ErrInvalid].
func (s *Store) NextExpected(ctx context.Context, flow string) (int64, error) {
	if err := receiver.ValidName("Flow", flow); err != nil {
		return 0, fmt.Errorf("next expected: %w", err)
	}
	var n int64
	err := s.db.QueryRowContext(ctx, qNextExpected, flow).Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 1, nil
	case err != nil:
		return 0, fmt.Errorf("next expected: %w", err)
	}
	return n, nil
}

const (
	qSnapFlows     = `SELECT flow, next_expected, total, pruned_through FROM flows ORDER BY flow`
	qSnapReceipts  = `SELECT id, flow, seq, body, delta FROM receipts ORDER BY flow, seq`
	qSnapConflicts = `SELECT id, flow, seq, body, rule, with_id, with_flow, with_seq, next_expected
		FROM conflicts ORDER BY flow, seq, id, body`
)

// Flows lists every flow that has accepted a message, with its running total
// and next expected sequence number, ordered by flow. A flow that has
// accepted nothing has no row (its total is 0 and it expects seq 1).
func (s *Store) Flows(ctx context.Context) ([]FlowState, error) {
	fs, err := readFlows(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("flows: %w", err)
	}
	return fs, nil
}

// Conflicts lists every recorded conflict, ordered by flow, seq, ID and body.
func (s *Store) Conflicts(ctx context.Context) ([]ConflictRecord, error) {
	cs, err := readConflicts(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("conflicts: %w", err)
	}
	return cs, nil
}

// Snapshot reads every table in one read transaction. Slices are never nil.
// Its SchemaVersion is receiver.SnapshotFormat, the layout of the
// snapshot, not the file's user_version.
func (s *Store) Snapshot(ctx context.Context) (Snapshot, error) {
	var snap Snapshot
	err := withTx(ctx, s.db, s.writer, &sql.TxOptions{ReadOnly: true}, func(tx *sql.Tx) error {
		snap.SchemaVersion = receiver.SnapshotFormat
		var err error
		if snap.Flows, err = readFlows(ctx, tx); err != nil {
			return err
		}
		if snap.Receipts, err = readReceipts(ctx, tx); err != nil {
			return err
		}
		snap.Conflicts, err = readConflicts(ctx, tx)
		return err
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return snap, nil
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func readFlows(ctx context.Context, q querier) ([]FlowState, error) {
	rows, err := q.QueryContext(ctx, qSnapFlows)
	if err != nil {
		return nil, fmt.Errorf("read flows: %w", err)
	}
	defer rows.Close()
	out := []FlowState{}
	for rows.Next() {
		var f FlowState
		if err := rows.Scan(&f.Flow, &f.NextExpected, &f.Total, &f.PrunedThrough); err != nil {
			return nil, fmt.Errorf("read flows: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read flows: %w", err)
	}
	return out, nil
}

func readReceipts(ctx context.Context, q querier) ([]Receipt, error) {
	rows, err := q.QueryContext(ctx, qSnapReceipts)
	if err != nil {
		return nil, fmt.Errorf("read receipts: %w", err)
	}
	defer rows.Close()
	out := []Receipt{}
	for rows.Next() {
		var r Receipt
		var body []byte
		if err := rows.Scan(&r.ID, &r.Flow, &r.Seq, &body, &r.Delta); err != nil {
			return nil, fmt.Errorf("read receipts: %w", err)
		}
		r.Body = string(body)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read receipts: %w", err)
	}
	return out, nil
}

func readConflicts(ctx context.Context, q querier) ([]ConflictRecord, error) {
	rows, err := q.QueryContext(ctx, qSnapConflicts)
	if err != nil {
		return nil, fmt.Errorf("read conflicts: %w", err)
	}
	defer rows.Close()
	out := []ConflictRecord{}
	for rows.Next() {
		var c ConflictRecord
		var body []byte
		if err := rows.Scan(&c.ID, &c.Flow, &c.Seq, &body, &c.Rule, &c.WithID, &c.WithFlow, &c.WithSeq, &c.NextExpected); err != nil {
			return nil, fmt.Errorf("read conflicts: %w", err)
		}
		c.Body = string(body)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read conflicts: %w", err)
	}
	return out, nil
}
