package console

import (
	"context"
	"fmt"
	"html"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/console/internal/demo"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/shard"
)

// The console on a sharded queue (docs/contract.md §7.10): a *shard.Store
// is a Queue like any store, so the console needs nothing of its own for
// it. These backends serve the demo over three SQLite shards and over two
// PostgreSQL shard schemas.
var (
	sqliteShardedBackend   = backend{"sqlite-3-shards", openSQLiteSharded}
	postgresShardedBackend = backend{"postgres-2-shards", openPostgresSharded}
)

// shardedOver labels the fresh stores as one set and opens it; the stores
// are closed with it when the test ends.
func shardedOver(t testing.TB, shards []queue.Store) testQueue {
	t.Helper()
	ctx := context.Background()
	if err := shard.Create(ctx, shards, "console test", clock.Tick(0)); err != nil {
		t.Fatalf("shard.Create() error = %v", err)
	}
	s, err := shard.Open(ctx, shards, shard.Options{CloseShards: true})
	if err != nil {
		t.Fatalf("shard.Open() error = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openSQLiteSharded(t testing.TB) (testQueue, receiver.Store) {
	t.Helper()
	dir := t.TempDir()
	var shards []queue.Store
	for i := range 3 {
		q, err := queuestore.Open(filepath.Join(dir, fmt.Sprintf("shard-%03d.db", i)))
		if err != nil {
			t.Fatalf("queuestore.Open() error = %v", err)
		}
		shards = append(shards, q)
	}
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"), receiverstore.WithMaxDelta(demo.MaxDelta))
	if err != nil {
		t.Fatalf("receiverstore.Open() error = %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return shardedOver(t, shards), r
}

func openPostgresSharded(t testing.TB) (testQueue, receiver.Store) {
	t.Helper()
	pgtest.Require(t)
	ctx := context.Background()
	pool := pgtest.Pool(t)
	var shards []queue.Store
	for range 2 {
		_, qs := pgtest.Schema(t)
		q, err := pgqueuestore.OpenPool(ctx, pool, pgqueuestore.WithSchema(qs))
		if err != nil {
			t.Fatalf("pgqueuestore.OpenPool() error = %v", err)
		}
		shards = append(shards, q)
	}
	_, rs := pgtest.Schema(t)
	r, err := pgreceiverstore.OpenPool(ctx, pool, pgreceiverstore.WithSchema(rs), pgreceiverstore.WithMaxDelta(demo.MaxDelta))
	if err != nil {
		t.Fatalf("pgreceiverstore.OpenPool() error = %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return shardedOver(t, shards), r
}

// In a browser, on a sharded queue of each backend: a quarantined event
// found on the quarantined page (merged across the shards) is redriven
// through its form, in the shard that holds it, and the audit page shows
// the row.
func TestBrowser_ShardedQueue(t *testing.T) {
	for _, b := range []backend{sqliteShardedBackend, postgresShardedBackend} {
		t.Run(b.name, func(t *testing.T) { browserRedriveThroughTheFormShowsTheAuditRow(t, b) })
	}
}

// The pages read the sharded queue as one: the seeded flows of every
// shard are on the flows page. The merge is the shard store's, the same
// over either backend, so SQLite alone (the browser test above runs both).
func TestPages_ShardedQueue(t *testing.T) {
	for _, b := range []backend{sqliteShardedBackend} {
		t.Run(b.name, func(t *testing.T) {
			f := newFixtureOn(t, b, Options{Token: testToken, PageSize: 500})
			fs, err := f.q.Flows(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int]bool{}
			for _, fl := range fs {
				seen[shard.Of(fl.Flow, len(f.q.(*shard.Store).Shards()))] = true
			}
			if len(seen) < 2 {
				t.Fatalf("the demo's flows are in %d shard(s): the test would not read across shards", len(seen))
			}
			_, body := f.get(t, f.client(t), "/flows")
			for _, fl := range fs {
				if !strings.Contains(body, html.EscapeString(fl.Flow)) {
					t.Errorf("/flows does not show flow %s", fl.Flow)
				}
			}
		})
	}
}
