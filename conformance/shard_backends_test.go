package conformance

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

// Shards (docs/contract.md §7.10): every rule of §2–§3 holds inside a
// shard. These tests run the whole queue suite against each shard k of a
// labeled 2-shard set, on each backend: the store under test is labeled
// {k, 2, 0} before the suite's first use of it, its sibling {1-k, 2, 0}
// (SetShardLabel) beside it, and each store the suite opens must open
// with its sibling as one set (shard.Open). The label of the store under
// test is written into its meta row directly, as SetShardLabel writes it
// but without SetShardLabel's audit row: the suite's clauses read the
// audit exactly (a new store has none), and the label's row is the one
// difference a shard shows. SetShardLabel is tested by the clause
// Shard_7_10_Label of the unsharded suites (skipped here: Labeled).

// shardSuites runs the whole suite once more per shard and backend
// (measured: SQLite 100 s under the race detector with a quarter of the
// model sequences, PostgreSQL 460 s with FAIRRELAY_CONFORMANCE_SEQUENCES=20,
// for one shard). With them the conformance module took 18 of a CI run's
// 30 minutes, so they are behind a flag (go test -run Shard
// -conformance.shards), which .ci/run sets in a run without the race
// detector.
var shardSuites = flag.Bool("conformance.shards", false, "run the queue suite against each shard of a labeled 2-shard set on each backend")

func TestQueueSQLiteShards(t *testing.T) {
	if !*shardSuites {
		t.Skip("-conformance.shards runs the suite against each shard of a set of 2")
	}
	for k := range 2 {
		t.Run(fmt.Sprintf("shard%dof2", k), func(t *testing.T) {
			// A quarter of the unsharded run's model sequences: the store's
			// code is the same, what differs is the label, which every
			// clause sees.
			b := sqliteQueue()
			b.Sequences, b.RaceSequences = b.Sequences/4, b.RaceSequences/4
			RunQueue(t, shardOf(t, b, k, func(t testing.TB, loc string, l queue.ShardLabel) {
				db, err := sql.Open("sqlite", loc)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if _, err := db.Exec(`PRAGMA busy_timeout = 10000`); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(qLabel, l.Index, l.Count, l.Epoch); err != nil {
					t.Fatalf("label: %v", err)
				}
			}))
		})
	}
}

func TestQueuePostgresShards(t *testing.T) {
	if !*shardSuites {
		t.Skip("-conformance.shards runs the suite against each shard of a set of 2")
	}
	pgtest.Require(t)
	for k := range 2 {
		t.Run(fmt.Sprintf("shard%dof2", k), func(t *testing.T) {
			RunQueue(t, shardOf(t, pgQueue(), k, func(t testing.TB, loc string, l queue.ShardLabel) {
				q := strings.Replace(qLabel, "meta", pgx.Identifier{loc}.Sanitize()+".meta", 1)
				q = strings.NewReplacer("?1", "$1", "?2", "$2", "?3", "$3").Replace(q)
				if _, err := pgtest.Pool(t).Exec(context.Background(), q, l.Index, l.Count, l.Epoch); err != nil {
					t.Fatalf("label: %v", err)
				}
			}))
		})
	}
}

// qLabel records a shard label in a store's meta row, where
// SetShardLabel records it (both stores' migrations name the columns so).
const qLabel = `UPDATE meta SET shard_index = ?1, shard_count = ?2, shard_epoch = ?3 WHERE id = 1 AND shard_count IS NULL`

// shardOf wraps b: each store it opens is shard k of a labeled 2-shard set.
func shardOf(t *testing.T, b QueueBackend, k int, label func(t testing.TB, loc string, l queue.ShardLabel)) QueueBackend {
	// One sibling serves every store of the run: shard.Open reads labels
	// only, and a schema or file per store would double what the suite
	// creates.
	inner := b
	sib, err := inner.Open(t, inner.NewLoc(t), QueueOptions{})
	if err != nil {
		t.Fatalf("open the sibling shard: %v", err)
	}
	if err := sib.(queue.ShardMember).SetShardLabel(context.Background(), queue.ShardLabel{Index: 1 - k, Count: 2}, "conformance: sibling", 0); err != nil {
		t.Fatalf("label the sibling shard: %v", err)
	}
	b.Open = func(t testing.TB, loc string, o QueueOptions) (Queue, error) {
		s, err := inner.Open(t, loc, o)
		if err != nil {
			return nil, err
		}
		ctx := context.Background()
		m := s.(queue.ShardMember)
		if _, ok, err := m.ShardLabel(ctx); err != nil {
			return nil, err
		} else if !ok {
			label(t, loc, queue.ShardLabel{Index: k, Count: 2})
			if l, ok, err := m.ShardLabel(ctx); err != nil || !ok || l != (queue.ShardLabel{Index: k, Count: 2}) {
				return nil, fmt.Errorf("label shard %d: the store reads %+v, %v, %v", k, l, ok, err)
			}
		}
		set := []queue.Store{s, sib}
		if k == 1 {
			set = []queue.Store{sib, s}
		}
		if _, err := shard.Open(ctx, set, shard.Options{}); err != nil {
			t.Errorf("shard %d and its sibling do not open as one set: %v", k, err)
		}
		return s, nil
	}
	// The model's random sequences run at a tenth of the unsharded count,
	// and the twin clauses' seeds at a tenth or a third (4 each, from 40
	// and 12; they took 78 of PostgreSQL's 97 s a shard): the shard is the
	// same store, and the CI budget is shared.
	b.Labeled = true
	b.Sequences = max(b.Sequences/10, 20)
	b.RaceSequences = max(b.RaceSequences/10, 10)
	b.TwinSeeds = 4
	return b
}
