package queuestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Shard labels (docs/contract.md §7.10): meta.shard_index, shard_count and
// shard_epoch (migration 7), NULL for a store never labeled.

var _ queue.ShardMember = (*Store)(nil)

const (
	qShardLabelRead  = `SELECT shard_index, shard_count, shard_epoch FROM meta WHERE id = 1`
	qShardLabelWrite = `UPDATE meta SET shard_index = ?1, shard_count = ?2, shard_epoch = ?3 WHERE id = 1`
)

// checkShardLabel checks a label's ranges (ErrInvalid).
func checkShardLabel(l queue.ShardLabel) error {
	if l.Count < 1 || l.Count > queue.MaxShards {
		return fmt.Errorf("%w: shard count %d, want 1..%d", ErrInvalid, l.Count, queue.MaxShards)
	}
	if l.Index < 0 || l.Index >= l.Count {
		return fmt.Errorf("%w: shard index %d, want 0..%d", ErrInvalid, l.Index, l.Count-1)
	}
	if l.Epoch < 0 {
		return fmt.Errorf("%w: shard epoch %d is negative", ErrInvalid, l.Epoch)
	}
	return nil
}

// readShardLabel reads the label in tx; ok is false when there is none.
func readShardLabel(ctx context.Context, tx *txn) (queue.ShardLabel, bool, error) {
	var i, n, e sql.NullInt64
	if err := tx.QueryRowContext(ctx, qShardLabelRead).Scan(&i, &n, &e); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return queue.ShardLabel{}, false, fmt.Errorf("%w: no meta row", ErrCorrupt)
		}
		return queue.ShardLabel{}, false, fmt.Errorf("read shard label: %w", err)
	}
	if !i.Valid && !n.Valid && !e.Valid {
		return queue.ShardLabel{}, false, nil
	}
	if !i.Valid || !n.Valid || !e.Valid {
		return queue.ShardLabel{}, false, fmt.Errorf("%w: shard label partly recorded", ErrCorrupt)
	}
	return queue.ShardLabel{Index: int(i.Int64), Count: int(n.Int64), Epoch: e.Int64}, true, nil
}

// ShardLabel reads the store's shard label; ok is false for a store never
// labeled.
func (s *Store) ShardLabel(ctx context.Context) (l queue.ShardLabel, ok bool, err error) {
	err = s.withReadTx(ctx, func(tx *txn) error {
		var err error
		l, ok, err = readShardLabel(ctx, tx)
		return err
	})
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
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		old, ok, err := readShardLabel(ctx, tx)
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
		if _, err := tx.ExecContext(ctx, qShardLabelWrite, l.Index, l.Count, l.Epoch); err != nil {
			return fmt.Errorf("write shard label: %w", err)
		}
		detail, err := json.Marshal(queue.ShardLabelChange{New: l})
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qInsertAuditKind, string(queue.AuditShard), reason, string(detail), int64(a.now)); err != nil {
			return fmt.Errorf("insert audit: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set shard label: %w", err)
	}
	return nil
}
