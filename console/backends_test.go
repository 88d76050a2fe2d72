package console

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/console/internal/demo"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// testQueue is a queue a test can both serve (Queue) and seed and check
// (the whole contract, with weights): both backends' stores are one.
type testQueue interface {
	queue.Store
	queue.Weighter
	Queue
}

// backend opens a new, empty queue and receiver of one engine for a test;
// both are closed when the test ends.
type backend struct {
	name string
	open func(t testing.TB) (testQueue, receiver.Store)
}

var (
	sqliteBackend   = backend{"sqlite", openSQLite}
	postgresBackend = backend{"postgres", openPostgres}
)

// forEachBackend runs the test once per backend, as subtests named after
// them. Without a reachable PostgreSQL the postgres subtest skips, saying
// how to run it (with FAIRRELAY_REQUIRE_POSTGRES=1 it fails instead).
func forEachBackend(t *testing.T, run func(t *testing.T, b backend)) {
	for _, b := range []backend{sqliteBackend, postgresBackend} {
		t.Run(b.name, func(t *testing.T) { run(t, b) })
	}
}

func openSQLite(t testing.TB) (testQueue, receiver.Store) {
	t.Helper()
	dir := t.TempDir()
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatalf("queuestore.Open() error = %v", err)
	}
	t.Cleanup(func() { q.Close() })
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"), receiverstore.WithMaxDelta(demo.MaxDelta))
	if err != nil {
		t.Fatalf("receiverstore.Open() error = %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return q, r
}

func openPostgres(t testing.TB) (testQueue, receiver.Store) {
	t.Helper()
	pgtest.Require(t)
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, qs := pgtest.Schema(t)
	q, err := pgqueuestore.OpenPool(ctx, pool, pgqueuestore.WithSchema(qs))
	if err != nil {
		t.Fatalf("pgqueuestore.OpenPool() error = %v", err)
	}
	t.Cleanup(func() { q.Close() })
	_, rs := pgtest.Schema(t)
	r, err := pgreceiverstore.OpenPool(ctx, pool, pgreceiverstore.WithSchema(rs), pgreceiverstore.WithMaxDelta(demo.MaxDelta))
	if err != nil {
		t.Fatalf("pgreceiverstore.OpenPool() error = %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return q, r
}
