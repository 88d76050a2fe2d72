package conformance

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/pgreceiverstore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/jackc/pgx/v5"

	"database/sql"

	_ "modernc.org/sqlite"
)

func TestReceiverSQLite(t *testing.T) {
	RunReceiver(t, ReceiverBackend{
		Open: func(t testing.TB, loc string, maxDelta int) (Receiver, string) {
			if loc == "" {
				loc = filepath.Join(t.TempDir(), "receiver.db")
			}
			s, err := receiverstore.Open(loc, receiverstore.WithMaxDelta(maxDelta))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return sqliteReceiver{s}, loc
		},
		Exec: func(t testing.TB, loc, q string) {
			db, err := sql.Open("sqlite", loc)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestReceiverPostgres(t *testing.T) {
	pgtest.Require(t)
	RunReceiver(t, ReceiverBackend{
		Open: func(t testing.TB, loc string, maxDelta int) (Receiver, string) {
			if loc == "" {
				_, loc = pgtest.Schema(t)
			}
			s, err := pgreceiverstore.OpenPool(context.Background(), pgtest.Pool(t),
				pgreceiverstore.WithSchema(loc), pgreceiverstore.WithMaxDelta(maxDelta))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, loc
		},
		Exec: func(t testing.TB, loc, q string) {
			ctx := context.Background()
			err := pgx.BeginFunc(ctx, pgtest.Pool(t), func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{loc}.Sanitize()); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, q)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		},
	})
}

// sqliteReceiver presents a receiverstore.Store with the receiver
// vocabulary until receiverstore aliases it.
type sqliteReceiver struct{ s *receiverstore.Store }

var recvErrPairs = []struct{ from, to error }{
	{receiverstore.ErrInvalidBody, receiver.ErrInvalidBody},
	{receiverstore.ErrInvalid, receiver.ErrInvalid},
}

func rerr(err error) error { return wrapSentinels(err, recvErrPairs) }

func (r sqliteReceiver) Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error) {
	o, err := r.s.Receive(ctx, receiverstore.Message(m))
	return receiver.Outcome(o), rerr(err)
}

func (r sqliteReceiver) ReceiveBatch(ctx context.Context, ms []receiver.Message) ([]receiver.BatchResult, error) {
	in := make([]receiverstore.Message, len(ms))
	for i, m := range ms {
		in[i] = receiverstore.Message(m)
	}
	rs, err := r.s.ReceiveBatch(ctx, in)
	if rs == nil {
		return nil, rerr(err)
	}
	out := make([]receiver.BatchResult, len(rs))
	for i, x := range rs {
		out[i] = receiver.BatchResult{Outcome: receiver.Outcome(x.Outcome), Err: rerr(x.Err)}
	}
	return out, rerr(err)
}

func (r sqliteReceiver) Total(ctx context.Context, flow string) (int64, error) {
	n, err := r.s.Total(ctx, flow)
	return n, rerr(err)
}

func (r sqliteReceiver) NextExpected(ctx context.Context, flow string) (int64, error) {
	n, err := r.s.NextExpected(ctx, flow)
	return n, rerr(err)
}

func (r sqliteReceiver) Flows(ctx context.Context) ([]receiver.FlowState, error) {
	fs, err := r.s.Flows(ctx)
	if err != nil {
		return nil, err
	}
	return via[[]receiver.FlowState](fs), nil
}

func (r sqliteReceiver) Conflicts(ctx context.Context) ([]receiver.ConflictRecord, error) {
	cs, err := r.s.Conflicts(ctx)
	if err != nil {
		return nil, err
	}
	return via[[]receiver.ConflictRecord](cs), nil
}

func (r sqliteReceiver) Snapshot(ctx context.Context) (receiver.Snapshot, error) {
	sn, err := r.s.Snapshot(ctx)
	if err != nil {
		return receiver.Snapshot{}, err
	}
	return via[receiver.Snapshot](sn), nil
}

func (r sqliteReceiver) Close() error { return r.s.Close() }
