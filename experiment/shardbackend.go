package experiment

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

// BackendSQLiteShard1 is the value of [BackendEnv] that runs every queue
// of a scenario as a one-shard sharded queue (docs/contract.md §7.10): the
// SQLite file labeled shard 0 of 1, used through shard.Store. The
// scenarios and their golden files are the same: a sharded queue of one
// shard is the queue.
const BackendSQLiteShard1 = "sqlite-shard1"

// shard1Backend is sqliteBackend with each queue wrapped in a one-shard
// shard.Store.
type shard1Backend struct{ sqliteBackend }

// SQLiteShard1 is the SQLite backend whose queues are one-shard
// shard.Stores.
func SQLiteShard1() Backend { return shard1Backend{} }

// Name implements Backend.
func (shard1Backend) Name() string { return BackendSQLiteShard1 }

// String implements Backend.
func (shard1Backend) String() string {
	return "sqlite, each queue one shard of a sharded queue, files in each scenario's temporary folder"
}

// openQueue opens the file, labels it shard 0 of 1 the first time and
// opens it as a set. The label is written into the meta row directly, as
// SetShardLabel writes it but without its audit row: the scenarios read
// the audit exactly (row IDs included), and the label's row is the one
// thing a shard holds that the queue it stands for does not.
// SetShardLabel and shard.Create are tested in their own modules.
func (b shard1Backend) openQueue(ctx context.Context, l *Lab, file string, o queueOptions) (QueueStore, error) {
	q, err := b.sqliteBackend.openQueue(ctx, l, file, o)
	if err != nil {
		return nil, err
	}
	if _, ok, err := shard.Label(ctx, q); err != nil {
		q.Close()
		return nil, err
	} else if !ok {
		if err := labelOneShard(ctx, filepath.Join(l.Dir, file)); err != nil {
			q.Close()
			return nil, fmt.Errorf("label %s as shard 0 of 1: %w", file, err)
		}
	}
	s, err := shard.Open(ctx, []queue.Store{q}, shard.Options{CloseShards: true})
	if err != nil {
		q.Close()
		return nil, err
	}
	return s, nil
}

// labelOneShard records the label {0, 1, 0} in the file's meta row.
func labelOneShard(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `UPDATE meta SET shard_index = 0, shard_count = 1, shard_epoch = 0 WHERE id = 1 AND shard_count IS NULL`)
	return err
}
