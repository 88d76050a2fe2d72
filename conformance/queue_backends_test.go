package conformance

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queuestore"
)

func TestQueueSQLite(t *testing.T) {
	RunQueue(t, QueueBackend{
		NewLoc: func(t testing.TB) string { return filepath.Join(t.TempDir(), "queue.db") },
		Open: func(t testing.TB, loc string, o QueueOptions) (Queue, error) {
			var opts []queuestore.Option
			if o.Policy != nil {
				opts = append(opts, queuestore.WithPolicy(sqlitePolicy(*o.Policy)))
			}
			if o.RealTime {
				opts = append(opts, queuestore.WithRealTime(o.Source, o.Skew))
			}
			s, err := queuestore.Open(loc, opts...)
			if err != nil {
				return nil, qerr(err)
			}
			t.Cleanup(func() { s.Close() })
			return sqliteQueue{s}, nil
		},
		SchemaVersion: queuestore.SchemaVersion,
		Sequences:     150,
	})
}

func TestQueuePostgres(t *testing.T) {
	pgtest.Require(t)
	RunQueue(t, QueueBackend{
		NewLoc: func(t testing.TB) string {
			_, schema := pgtest.Schema(t)
			return schema
		},
		Open: func(t testing.TB, loc string, o QueueOptions) (Queue, error) {
			opts := []pgqueuestore.Option{pgqueuestore.WithSchema(loc)}
			if o.Policy != nil {
				opts = append(opts, pgqueuestore.WithPolicy(*o.Policy))
			}
			if o.RealTime {
				opts = append(opts, pgqueuestore.WithRealTime(o.Source, o.Skew))
			}
			s, err := pgqueuestore.OpenPool(context.Background(), pgtest.Pool(t), opts...)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { s.Close() })
			return s, nil
		},
		SchemaVersion: pgqueuestore.SchemaVersion,
		Sequences:     200,
	})
}
