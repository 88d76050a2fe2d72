package pgreceiverstore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
)

// Total returns the flow's running total: the sum of the deltas of its
// accepted messages, 0 for an unknown flow. A flow name that could never be
// received is receiver.ErrInvalid.
func (s *Store) Total(ctx context.Context, flow string) (int64, error) {
	if err := receiver.ValidName("Flow", flow); err != nil {
		return 0, fmt.Errorf("total: %w", err)
	}
	var t int64
	err := s.pool.QueryRow(ctx, s.q(`SELECT total FROM {s}.flows WHERE flow = $1`), flow).Scan(&t)
	switch {
	case isNoRows(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("total: %w", err)
	}
	return t, nil
}

// NextExpected returns the sequence number the flow accepts next: 1 plus
// the number of its accepted messages, 1 for an unknown flow. A flow name
// that could never be received is receiver.ErrInvalid.
func (s *Store) NextExpected(ctx context.Context, flow string) (int64, error) {
	if err := receiver.ValidName("Flow", flow); err != nil {
		return 0, fmt.Errorf("next expected: %w", err)
	}
	var n int64
	err := s.pool.QueryRow(ctx, s.q(`SELECT next_expected FROM {s}.flows WHERE flow = $1`), flow).Scan(&n)
	switch {
	case isNoRows(err):
		return 1, nil
	case err != nil:
		return 0, fmt.Errorf("next expected: %w", err)
	}
	return n, nil
}

const (
	qSnapFlows     = `SELECT flow, next_expected, total, pruned_through FROM {s}.flows ORDER BY flow`
	qSnapReceipts  = `SELECT id, flow, seq, body, delta FROM {s}.receipts ORDER BY flow, seq`
	qSnapConflicts = `SELECT id, flow, seq, body, rule, with_id, with_flow, with_seq, next_expected
FROM {s}.conflicts ORDER BY flow, seq, id, body`
)

// Flows lists every flow that has accepted a message, ordered by flow (byte
// order).
func (s *Store) Flows(ctx context.Context) ([]receiver.FlowState, error) {
	fs, err := s.readFlows(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("flows: %w", err)
	}
	return fs, nil
}

// Conflicts lists every recorded conflict, ordered by flow, seq, ID and
// body.
func (s *Store) Conflicts(ctx context.Context) ([]receiver.ConflictRecord, error) {
	cs, err := s.readConflicts(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("conflicts: %w", err)
	}
	return cs, nil
}

// Snapshot reads every table in one read-only REPEATABLE READ transaction.
// Slices are never nil. SchemaVersion is receiver.SnapshotFormat, the
// snapshot's layout (not the schema's migration version).
func (s *Store) Snapshot(ctx context.Context) (receiver.Snapshot, error) {
	var snap receiver.Snapshot
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		snap.SchemaVersion = receiver.SnapshotFormat
		var err error
		if snap.Flows, err = s.readFlows(ctx, tx); err != nil {
			return err
		}
		if snap.Receipts, err = s.readReceipts(ctx, tx); err != nil {
			return err
		}
		snap.Conflicts, err = s.readConflicts(ctx, tx)
		return err
	})
	if err != nil {
		return receiver.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	return snap, nil
}

// querier is what *pgxpool.Pool and pgx.Tx share.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *Store) readFlows(ctx context.Context, q querier) ([]receiver.FlowState, error) {
	out := []receiver.FlowState{}
	rows, _ := q.Query(ctx, s.q(qSnapFlows))
	var f receiver.FlowState
	_, err := pgx.ForEachRow(rows, []any{&f.Flow, &f.NextExpected, &f.Total, &f.PrunedThrough}, func() error {
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read flows: %w", err)
	}
	return out, nil
}

func (s *Store) readReceipts(ctx context.Context, q querier) ([]receiver.Receipt, error) {
	out := []receiver.Receipt{}
	rows, _ := q.Query(ctx, s.q(qSnapReceipts))
	var r receiver.Receipt
	var body []byte
	_, err := pgx.ForEachRow(rows, []any{&r.ID, &r.Flow, &r.Seq, &body, &r.Delta}, func() error {
		r.Body = string(body)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read receipts: %w", err)
	}
	return out, nil
}

func (s *Store) readConflicts(ctx context.Context, q querier) ([]receiver.ConflictRecord, error) {
	out := []receiver.ConflictRecord{}
	rows, _ := q.Query(ctx, s.q(qSnapConflicts))
	var c receiver.ConflictRecord
	var body []byte
	_, err := pgx.ForEachRow(rows, []any{&c.ID, &c.Flow, &c.Seq, &body, &c.Rule, &c.WithID, &c.WithFlow, &c.WithSeq, &c.NextExpected}, func() error {
		c.Body = string(body)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read conflicts: %w", err)
	}
	return out, nil
}
