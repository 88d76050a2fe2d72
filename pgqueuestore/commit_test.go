package pgqueuestore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A write's last statements go with COMMIT (pipe.commit), and the server
// runs COMMIT before Go reads any of their results. So a check of those
// results must still stop COMMIT: a step Go checks is sent before it
// (commit), and a row count the claim must see is checked by the server
// (checkedRows). Either failing leaves the store as it was: here the
// clock mark the transaction moved, and the event it would have claimed.
func TestCommit_ChecksOfTheLastStatementsStopCommit(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	if _, err := s.Enqueue(ctx, queue.Event{ID: "e1", Flow: "f", Body: []byte("x")}, 1); err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		if m, err := s.ClockMark(ctx); err != nil || m != 1 {
			t.Fatalf("%s: clock mark = %d, %v; want 1 (rolled back)", what, m, err)
		}
		if e, err := s.Event(ctx, "e1"); err != nil || e.State != queue.StatePending || e.Generation != 0 {
			t.Fatalf("%s: e1 = %+v, %v; want pending, generation 0", what, e, err)
		}
	}
	errCheck := errors.New("the check says no")
	err := s.withTxRead(ctx, nil, nil, func(tx pgx.Tx, a admission, _ bool, last *pipe) error {
		if _, _, err := s.admitPipe(ctx, tx, a, clock.Tick(5), last); err != nil {
			return err
		}
		last.execCheck("checked in Go", func(pgconn.CommandTag) error { return errCheck }, `SELECT 1`)
		return nil
	})
	if !errors.Is(err, errCheck) {
		t.Fatalf("a failing Go check: error = %v, want %v", err, errCheck)
	}
	unchanged("a failing Go check")

	err = s.withTxRead(ctx, nil, nil, func(tx pgx.Tx, a admission, _ bool, last *pipe) error {
		if _, _, err := s.admitPipe(ctx, tx, a, clock.Tick(5), last); err != nil {
			return err
		}
		last.exec("claim events", checkedRows(s.q(qClaimEvents)), []string{"e1", "missing"}, int64(10), int64(1))
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "1 rows changed, want 2") {
		t.Fatalf("a claim of a missing event: error = %v, want the server's row count check", err)
	}
	unchanged("a failed row count check")

	// The same statements with the right rows commit.
	err = s.withTxRead(ctx, nil, nil, func(tx pgx.Tx, a admission, _ bool, last *pipe) error {
		if _, _, err := s.admitPipe(ctx, tx, a, clock.Tick(5), last); err != nil {
			return err
		}
		last.exec("claim events", checkedRows(s.q(qClaimEvents)), []string{"e1"}, int64(10), int64(1))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Event(ctx, "e1"); err != nil || e.State != queue.StateInflight || e.Generation != 1 {
		t.Fatalf("e1 = %+v, %v; want in flight at generation 1", e, err)
	}
}
