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
		Open: func(t testing.TB, loc string, o ReceiverOptions) (Receiver, string) {
			if loc == "" {
				loc = filepath.Join(t.TempDir(), "receiver.db")
			}
			s, err := receiverstore.Open(loc, receiverstore.WithMaxDelta(o.MaxDelta), receiverstore.WithNow(o.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close() error = %v", err)
				}
			})
			return s, loc
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
		Open: func(t testing.TB, loc string, o ReceiverOptions) (Receiver, string) {
			if loc == "" {
				_, loc = pgtest.Schema(t)
			}
			s, err := pgreceiverstore.OpenPool(context.Background(), pgtest.Pool(t),
				pgreceiverstore.WithSchema(loc), pgreceiverstore.WithMaxDelta(o.MaxDelta), pgreceiverstore.WithNow(o.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close() error = %v", err)
				}
			})
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

// receiverstore.Store is a Receiver as it is: its types and sentinel
// errors are the receiver module's. Both backends are Pruners.
var (
	_ Receiver        = (*receiverstore.Store)(nil)
	_ receiver.Pruner = (*receiverstore.Store)(nil)
	_ receiver.Pruner = (*pgreceiverstore.Store)(nil)
)
