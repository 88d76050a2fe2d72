package pgreceiverstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
)

// The store is a receiver.Pruner (docs/contract.md §7.9).
var _ receiver.Pruner = (*Store)(nil)

const (
	// qPruneBatch finds the oldest receipts accepted before $1, at most $2
	// of them, those accepted at the same time in order of flow, then seq
	// (docs/contract.md §7.9), by reading receipts_accepted_at
	// (accepted_at, flow, seq) in order: no sort.
	qPruneBatch = `SELECT id, flow FROM {s}.receipts
WHERE accepted_at < $1 ORDER BY accepted_at, flow, seq LIMIT $2`
	// qPrune deletes the receipts of $1 that are still there and still
	// accepted before $2, raises each touched flow's pruned mark to the
	// highest seq deleted in it, and counts what it deleted.
	qPrune = `WITH d AS (
    DELETE FROM {s}.receipts WHERE id = ANY($1::text[]) AND accepted_at < $2
    RETURNING flow, seq
), m AS (
    SELECT flow, max(seq) AS seq, count(*) AS n FROM d GROUP BY flow
), u AS (
    UPDATE {s}.flows AS f SET pruned_through = greatest(f.pruned_through, m.seq)
    FROM m WHERE f.flow = m.flow
)
SELECT coalesce(sum(n), 0)::bigint FROM m`
	// qPrunable counts the receipts accepted before $1 on the index.
	qPrunable = `SELECT count(*) FROM {s}.receipts WHERE accepted_at < $1`
)

// maxPruneFlows is the most flows one Prune transaction touches: it holds
// one advisory lock per flow until commit, and PostgreSQL's lock table is
// shared by every session (max_locks_per_transaction × max_connections
// slots; the default 64 per session), so a batch over a thousand flows
// could fail with "out of shared memory" on a busy server.
const maxPruneFlows = 32

// Prune deletes, in one transaction, at most limit receipts accepted
// before before (the oldest first, those accepted at the same time in
// byte order of their flow, then by seq, as receiverstore's:
// docs/contract.md §7.9; of at most maxPruneFlows flows), and raises each
// touched flow's PrunedThrough to the highest seq deleted in it (never
// lowers it). Totals, next expected numbers and conflicts are kept.
// More is set when limit receipts were read, when the flow bound cut the
// batch short, or when a concurrent Prune deleted some of the batch first:
// there may be more. A limit outside 1..receiver.MaxPruneBatch
// is receiver.ErrInvalidOption and changes nothing.
//
// The transaction takes the store's write key shared, as Receive and
// ReceiveBatch do, then the advisory locks of the touched flows, the ones
// they take, in the same ascending order: a receive in
// one of those flows waits for the prune to commit (and then answers
// Pruned for a deleted receipt's message), and neither can deadlock the
// other. Bounding the flows per transaction bounds the locks it holds.
func (s *Store) Prune(ctx context.Context, before time.Time, limit int) (receiver.PruneResult, error) {
	if err := receiver.CheckPruneLimit(limit); err != nil {
		return receiver.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	var (
		n, read int64
		cut     bool
	)
	prune := func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, s.q(qPruneBatch), before, limit)
		var (
			ids      []string
			keys     []int64
			id, flow string
		)
		flows := make(map[string]bool)
		if _, err := pgx.ForEachRow(rows, []any{&id, &flow}, func() error {
			if cut {
				return nil
			}
			if !flows[flow] {
				if len(flows) == maxPruneFlows {
					cut = true // the oldest receipts of the first flows only
					return nil
				}
				flows[flow] = true
				keys = append(keys, lockKey("flow", s.schema, flow))
			}
			ids = append(ids, id)
			return nil
		}); err != nil {
			return fmt.Errorf("read receipts: %w", err)
		}
		if read = int64(len(ids)); read == 0 {
			return nil
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`, keys); err != nil {
			return fmt.Errorf("lock flows: %w", err)
		}
		if err := tx.QueryRow(ctx, s.q(qPrune), ids, before).Scan(&n); err != nil {
			return fmt.Errorf("delete receipts: %w", err)
		}
		return nil
	}
	err := s.begin(ctx, pgx.TxOptions{}, qKeyPlans, func(tx pgx.Tx) ([]batchStep, error) { return nil, prune(tx) }, s.sharedWriteKey())
	if err != nil {
		return receiver.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	// The batch is read before its flows are locked: a concurrent Prune
	// may have deleted some of it by then. Whenever fewer were deleted
	// than read, or the read filled limit, there may be more.
	return receiver.PruneResult{Receipts: n, More: cut || read == int64(limit) || n < read}, nil
}

// Prunable counts the receipts accepted before before: what Prune with
// before would delete in all its batches together. It deletes nothing.
func (s *Store) Prunable(ctx context.Context, before time.Time) (receiver.PruneResult, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.q(qPrunable), before).Scan(&n); err != nil {
		return receiver.PruneResult{}, fmt.Errorf("prunable: %w", err)
	}
	return receiver.PruneResult{Receipts: n}, nil
}
