package pgreceiverstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5/pgconn"
)

// The one-call path (docs/decisions/postgres-server-side-transitions.md,
// "The receiver"): a batch whose every message is accepted runs as one
// call of receive_accepted (migration 3), one round trip and one commit,
// with the general path's locks, read and writes. The function checks
// what only the database knows (the receipts, the flows' next expected
// seqs and pruned marks) and raises fallbackCode before anything commits
// when any message would get another answer; the batch then runs as the
// statements sent from Go (the general path, receive), which decide every
// answer. Both leave the same rows (TestOneCall_SameAsTheGeneralPath).

// fallbackCode is the SQLSTATE receive_accepted raises when a batch needs
// the general path.
const fallbackCode = "FR001"

// qReceiveAccepted is the call, sent alone through the pool, outside any
// transaction: it commits when the statement ends.
const qReceiveAccepted = `SELECT {s}.receive_accepted($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::bigint[], $6::timestamptz[], $7::bigint, $8::bigint[])`

// receiveAny applies validated messages (ms, with their deltas) as
// receive does: on the one-call path when it may and receive_accepted
// takes the batch, on the general path otherwise.
func (s *Store) receiveAny(ctx context.Context, ms []receiver.Message, deltas []int64) ([]receiver.Outcome, error) {
	if s.oneCallable(ms, deltas) {
		ok, err := s.oneCall(ctx, s.pool, ms, deltas)
		if err != nil {
			return nil, err
		}
		if ok {
			outs := make([]receiver.Outcome, len(ms))
			for i := range outs {
				outs[i] = receiver.Accepted
			}
			return outs, nil
		}
	}
	return s.receive(ctx, ms, deltas)
}

// oneCallable reports whether a batch ms with deltas may take the
// one-call path as far as Go can tell: no hook to call inside the
// transaction before its commit, no delta above the store's maximum (rule
// 5, which the function leaves to the general path), and no seq so large
// that receive_accepted's check (a flow's first seq plus its count in the
// batch) would overflow a bigint: such a message is a gap, which the
// general path answers. receive_accepted checks the rest.
func (s *Store) oneCallable(ms []receiver.Message, deltas []int64) bool {
	if s.general || s.hook != nil {
		return false
	}
	for _, d := range deltas {
		if d > s.maxDelta {
			return false
		}
	}
	for _, m := range ms {
		if m.Seq > math.MaxInt64-int64(len(ms)) {
			return false
		}
	}
	return true
}

// execer runs a statement: the store's pool (a test's connection).
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// oneCall accepts every message of ms in one call of receive_accepted
// through db, exactly as receive would. ok is false when receive_accepted
// sent the batch to the general path: then nothing was written. An SQL
// error is returned, never retried: whether it committed is the caller's
// question, as on the general path.
func (s *Store) oneCall(ctx context.Context, db execer, ms []receiver.Message, deltas []int64) (ok bool, err error) {
	ids := make([]string, len(ms))
	flows := make([]string, len(ms))
	seqs := make([]int64, len(ms))
	bodies := make([][]byte, len(ms))
	ats := make([]time.Time, len(ms))
	for i, m := range ms {
		ids[i], flows[i], seqs[i], bodies[i], ats[i] = m.ID, m.Flow, m.Seq, m.Body, s.now()
	}
	var keys any // NULL: the write key exclusive alone
	if ks := s.keyLocks(ms); ks != nil {
		keys = ks
	}
	_, err = db.Exec(ctx, s.q(qReceiveAccepted), ids, flows, seqs, bodies, deltas, ats, s.writeKey(), keys)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == fallbackCode {
			return false, nil
		}
		return false, fmt.Errorf("receive_accepted: %w", err)
	}
	return true, nil
}
