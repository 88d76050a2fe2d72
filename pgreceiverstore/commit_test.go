package pgreceiverstore

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A receive's writes go with COMMIT (begin), and the server runs COMMIT
// before Go reads any of their results. So a check of those results must
// still stop COMMIT: a step Go checks is sent before it, and the flows'
// advance, the check that a receive raced no other writer of its flows,
// is checked by the server (qAdvanceFlows). Either failing commits none of
// the transaction's writes: here a receipt inserted before the check.
func TestCommit_ChecksOfTheLastStatementsStopCommit(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	if o, err := s.Receive(ctx, receiver.Message{ID: "m1", Flow: "f", Seq: 1, Body: []byte(`{"delta": 1}`)}); err != nil || o != receiver.Accepted {
		t.Fatalf("Receive = %s, %v", o, err)
	}
	before, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	receipt := batchStep{what: "insert receipts", sql: s.q(qInsertReceipts), args: []any{[]string{"m2"}, []string{"f"}, []int64{2}, [][]byte{[]byte(`{"delta": 1}`)}, []int64{1}, []time.Time{time.Now()}}}
	unchanged := func(what string) {
		t.Helper()
		after, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(after, before) {
			t.Fatalf("%s changed the store:\n%+v\nwant\n%+v", what, after, before)
		}
	}
	errCheck := errors.New("the check says no")
	err = s.begin(ctx, pgx.TxOptions{}, qKeyPlans, func(pgx.Tx) ([]batchStep, error) {
		return []batchStep{receipt, {what: "checked in Go", sql: `SELECT 1`, tag: func(pgconn.CommandTag) error { return errCheck }}}, nil
	})
	if !errors.Is(err, errCheck) {
		t.Fatalf("a failing Go check: error = %v, want %v", err, errCheck)
	}
	unchanged("a failing Go check")

	// Flow f expects seq 2; an advance from 5, as a receive that raced
	// another writer would send, moves no row.
	advance := batchStep{what: "update totals", sql: s.q(qAdvanceFlows), args: []any{[]string{"f"}, []int64{5}, []int64{6}, []int64{1}}}
	err = s.begin(ctx, pgx.TxOptions{}, qKeyPlans, func(pgx.Tx) ([]batchStep, error) {
		return []batchStep{receipt, advance}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "0 rows changed, want 1") {
		t.Fatalf("a raced advance: error = %v, want the server's row count check", err)
	}
	unchanged("a raced advance")
}
