package receiverstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/fairrelay/fairrelay/dbfile"
	"github.com/fairrelay/fairrelay/receiver"
)

// The store is a receiver.Pruner (docs/contract.md §7.9).
var _ receiver.Pruner = (*Store)(nil)

const (
	// qPruneBatch finds the oldest receipts accepted before ?1, at most ?2
	// of them, those accepted at the same time in order of flow, then seq
	// (docs/contract.md §7.9), by reading receipts_accepted_at (accepted_at,
	// flow, seq) in order: no sort.
	qPruneBatch = `SELECT rowid, flow, seq FROM receipts
		WHERE accepted_at < ?1 ORDER BY accepted_at, flow, seq LIMIT ?2`
	// qPruneDelete deletes the receipts of the JSON array ?1 of rowids.
	qPruneDelete = `DELETE FROM receipts WHERE rowid IN (SELECT value FROM json_each(?1))`
	// qPruneMark raises the pruned mark of each flow of the JSON array ?1
	// of [flow, highest seq deleted], found by its primary key.
	qPruneMark = `WITH j (f, s) AS MATERIALIZED
		(SELECT value ->> 0, value ->> 1 FROM json_each(?1))
		UPDATE flows SET pruned_through = max(pruned_through, j.s)
		FROM j WHERE flows.flow = j.f`
	// qPrunable counts the receipts accepted before ?1 on the index alone.
	qPrunable = `SELECT count(*) FROM receipts WHERE accepted_at < ?1`
)

// Prune deletes, in one IMMEDIATE transaction, at most limit receipts
// accepted before before (the oldest first, those accepted at the same
// time in byte order of their flow, then by seq, as pgreceiverstore's:
// docs/contract.md §7.9), and raises each touched flow's PrunedThrough to
// the highest seq deleted in it (never lowers it). Totals, next expected
// numbers and conflicts are kept. More is set when limit receipts were
// deleted: there may be more. A limit outside 1..receiver.MaxPruneBatch is
// [ErrInvalidOption] and changes nothing; a read-only store is
// [ErrReadOnly].
//
// After a batch that deleted receipts, the pages it freed, and up to limit
// more of the file's free pages, are given back to the file system (PRAGMA
// incremental_vacuum(N), on a file made with auto_vacuum=INCREMENTAL,
// every file this version creates): a receiver that prunes as fast as it
// receives keeps a steady size, and a long free list drains batch by
// batch, never in one long write. A file created by an older version keeps
// its free pages and reuses them. The vacuum runs after the deletes
// committed, so that its failure (an ended ctx, a full disk) never undoes
// them: Prune then returns the batch's result, Receipts deleted and More,
// together with an error that says only the vacuum failed (errors.Is finds
// its cause); the pages it did not give back go with later batches.
func (s *Store) Prune(ctx context.Context, before time.Time, limit int) (receiver.PruneResult, error) {
	if err := receiver.CheckPruneLimit(limit); err != nil {
		return receiver.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	if s.ro != nil {
		return receiver.PruneResult{}, fmt.Errorf("prune: %w", ErrReadOnly)
	}
	var n, free0, free1 int64
	err := withTx(ctx, s.db, s.writer, nil, func(tx *sql.Tx) error {
		var err error
		n, free0, free1, err = pruneTx(ctx, tx, before.UnixMicro(), limit)
		return err
	})
	if err != nil {
		return receiver.PruneResult{}, fmt.Errorf("prune: %w", fullError(s.path, err))
	}
	r := receiver.PruneResult{Receipts: n, More: n == int64(limit)}
	if s.pruneCommitted != nil {
		s.pruneCommitted()
	}
	if n > 0 {
		if err := s.vacuum(ctx, dbfile.IncrementalVacuum(free0, free1, limit)); err != nil {
			return r, fmt.Errorf("prune: %d receipts were deleted; only giving the free pages back failed: %w", n, err)
		}
	}
	return r, nil
}

// pruneTx is Prune's transaction: it reads the batch, deletes it by rowid
// and raises the touched flows' marks. It returns the receipts deleted and
// the file's free pages before and after their deletion.
func pruneTx(ctx context.Context, tx *sql.Tx, before int64, limit int) (n, free0, free1 int64, err error) {
	if err := tx.QueryRowContext(ctx, dbfile.FreePagesSQL).Scan(&free0); err != nil {
		return 0, 0, 0, fmt.Errorf("free pages: %w", err)
	}
	rows, err := tx.QueryContext(ctx, qPruneBatch, before, limit)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read receipts: %w", err)
	}
	defer rows.Close()
	var (
		ids  []byte
		high = map[string]int64{}
	)
	for rows.Next() {
		var (
			rowid, seq int64
			flow       string
		)
		if err := rows.Scan(&rowid, &flow, &seq); err != nil {
			return 0, 0, 0, fmt.Errorf("read receipts: %w", err)
		}
		if n == 0 {
			ids = append(ids, '[')
		} else {
			ids = append(ids, ',')
		}
		ids = strconv.AppendInt(ids, rowid, 10)
		high[flow] = max(high[flow], seq)
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("read receipts: %w", err)
	}
	if n == 0 {
		return 0, 0, 0, nil
	}
	r, err := tx.ExecContext(ctx, qPruneDelete, string(append(ids, ']')))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("delete receipts: %w", err)
	}
	if k, err := r.RowsAffected(); err != nil || k != n {
		return 0, 0, 0, fmt.Errorf("delete receipts: %d rows deleted (%v), want %d", k, err, n)
	}
	marks := make([][2]any, 0, len(high))
	for f, seq := range high {
		marks = append(marks, [2]any{f, seq})
	}
	list, err := json.Marshal(marks) // strings and integers: cannot fail
	if err != nil {
		return 0, 0, 0, fmt.Errorf("raise pruned marks: %w", err)
	}
	r, err = tx.ExecContext(ctx, qPruneMark, string(list))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("raise pruned marks: %w", err)
	}
	if k, err := r.RowsAffected(); err != nil || k != int64(len(high)) {
		return 0, 0, 0, fmt.Errorf("raise pruned marks: %d flows changed (%v), want %d", k, err, len(high))
	}
	if err := tx.QueryRowContext(ctx, dbfile.FreePagesSQL).Scan(&free1); err != nil {
		return 0, 0, 0, fmt.Errorf("free pages: %w", err)
	}
	return n, free0, free1, nil
}

// vacuum runs Prune's dbfile.IncrementalVacuum statement in this
// process's write turn, outside Prune's transaction (the pragma runs in a
// transaction of its own).
func (s *Store) vacuum(ctx context.Context, stmt string) error {
	if err := s.writer.Lock(ctx); err != nil {
		return fmt.Errorf("incremental vacuum: %w", err)
	}
	defer s.writer.Unlock()
	if _, err := s.db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("incremental vacuum: %w", fullError(s.path, err))
	}
	return nil
}

// Prunable counts the receipts accepted before before: what Prune with
// before would delete in all its batches together. It deletes nothing.
func (s *Store) Prunable(ctx context.Context, before time.Time) (receiver.PruneResult, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, qPrunable, before.UnixMicro()).Scan(&n); err != nil {
		return receiver.PruneResult{}, fmt.Errorf("prunable: %w", err)
	}
	return receiver.PruneResult{Receipts: n}, nil
}
