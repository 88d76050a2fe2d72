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
		New: func(t testing.TB) Queue {
			s, err := queuestore.Open(filepath.Join(t.TempDir(), "queue.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return sqliteQueue{s}
		},
		SchemaVersion: queuestore.SchemaVersion,
		Sequences:     150,
	})
}

func TestQueuePostgres(t *testing.T) {
	pgtest.Require(t)
	RunQueue(t, QueueBackend{
		New: func(t testing.TB) Queue {
			_, schema := pgtest.Schema(t)
			s, err := pgqueuestore.OpenPool(context.Background(), pgtest.Pool(t), pgqueuestore.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		SchemaVersion: pgqueuestore.SnapshotVersion,
		Sequences:     200,
	})
}
