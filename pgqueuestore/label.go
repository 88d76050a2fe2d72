package pgqueuestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// Shard labels (docs/contract.md §7.10): meta.shard_index, shard_count and
// shard_epoch (migration 9), NULL for a store never labeled.

var _ queue.ShardMember = (*Store)(nil)

const (
	qShardLabelRead  = `SELECT shard_index, shard_count, shard_epoch FROM {s}.meta WHERE id = 1`
	qShardLabelWrite = `UPDATE {s}.meta SET shard_index = $1, shard_count = $2, shard_epoch = $3 WHERE id = 1`
)

func checkShardLabel(l queue.ShardLabel) error {
	if l.Count < 1 || l.Count > queue.MaxShards {
		return fmt.Errorf("%w: shard count %d, want 1..%d", queue.ErrInvalid, l.Count, queue.MaxShards)
	}
	if l.Index < 0 || l.Index >= l.Count {
		return fmt.Errorf("%w: shard index %d, want 0..%d", queue.ErrInvalid, l.Index, l.Count-1)
	}
	if l.Epoch < 0 {
		return fmt.Errorf("%w: shard epoch %d is negative", queue.ErrInvalid, l.Epoch)
	}
	return nil
}

func (s *Store) readShardLabel(ctx context.Context, q querier) (queue.ShardLabel, bool, error) {
	var i, n *int
	var e *int64
	if err := q.QueryRow(ctx, s.q(qShardLabelRead)).Scan(&i, &n, &e); err != nil {
		return queue.ShardLabel{}, false, fmt.Errorf("read shard label: %w", err)
	}
	if i == nil || n == nil || e == nil {
		return queue.ShardLabel{}, false, nil
	}
	return queue.ShardLabel{Index: *i, Count: *n, Epoch: *e}, true, nil
}

// ShardLabel reads the store's shard label; ok is false for a store never
// labeled.
func (s *Store) ShardLabel(ctx context.Context) (l queue.ShardLabel, ok bool, err error) {
	l, ok, err = s.readShardLabel(ctx, s.pool)
	if err != nil {
		return queue.ShardLabel{}, false, fmt.Errorf("shard label: %w", err)
	}
	return l, ok, nil
}

// SetShardLabel records l with an AuditShard row carrying reason, by the
// rules of queue.ShardMember (docs/contract.md §7.10).
func (s *Store) SetShardLabel(ctx context.Context, l queue.ShardLabel, reason string, now clock.Tick) error {
	if err := checkShardLabel(l); err != nil {
		return err
	}
	if err := queue.CheckReason(reason); err != nil {
		return err
	}
	err := s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, _, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		old, ok, err := s.readShardLabel(ctx, tx)
		if err != nil {
			return err
		}
		if ok {
			if old == l {
				return nil
			}
			return fmt.Errorf("%w: the store is shard %d of %d (epoch %d), not shard %d of %d (epoch %d)",
				queue.ErrShardLabel, old.Index, old.Count, old.Epoch, l.Index, l.Count, l.Epoch)
		}
		if _, err := tx.Exec(ctx, s.q(qShardLabelWrite), l.Index, l.Count, l.Epoch); err != nil {
			return fmt.Errorf("write shard label: %w", err)
		}
		detail, err := json.Marshal(queue.ShardLabelChange{New: l})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q(qInsertAuditKind), string(queue.AuditShard), reason, string(detail), int64(now)); err != nil {
			return fmt.Errorf("insert audit: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set shard label: %w", err)
	}
	return nil
}
