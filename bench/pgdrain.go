package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// PGClaims is one ClaimBatch's claims, settled together.
type PGClaims []queue.Claim

// Len is the number of claims.
func (c PGClaims) Len() int { return len(c) }

// BatchSettleClaimer is what [PGBatchClaimant] needs of a queue: ClaimBatch
// and queue.SettleClaimer's SettleClaimBatch. Both backends have them.
type BatchSettleClaimer interface {
	ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error)
	queue.SettleClaimer
}

// PGBatchClaimant drains a queue the way a relay does: a first ClaimBatch
// of up to N events, then one SettleClaimBatch after another, each acking
// the last batch and claiming the next (a [SettleClaimant]). The
// PostgreSQL drains use it; it takes any [BatchSettleClaimer].
type PGBatchClaimant struct {
	Q BatchSettleClaimer
	N int
}

// Claim takes up to N heads in one transaction; ok is false when none was
// dispatchable.
func (c PGBatchClaimant) Claim(ctx context.Context) (any, bool, error) {
	cs, err := c.Q.ClaimBatch(ctx, now, c.N)
	if err != nil || len(cs) == 0 {
		return nil, false, err
	}
	return PGClaims(cs), true, nil
}

// Settle acks every claim of a batch in one transaction.
func (c PGBatchClaimant) Settle(ctx context.Context, item any) error {
	_, err := c.ackAndClaim(ctx, item.(PGClaims), 0)
	return err
}

// SettleClaim acks every claim of a batch and claims up to N heads, in one
// transaction.
func (c PGBatchClaimant) SettleClaim(ctx context.Context, item any) (any, bool, error) {
	next, err := c.ackAndClaim(ctx, item.(PGClaims), c.N)
	if err != nil {
		return nil, false, err
	}
	return PGClaims(next), len(next) > 0, nil
}

// ackAndClaim acks every claim of cs and claims up to n heads (none when n
// is 0) in one SettleClaimBatch; it fails unless every claim was acked.
func (c PGBatchClaimant) ackAndClaim(ctx context.Context, cs PGClaims, n int) ([]queue.Claim, error) {
	items := make([]queue.SettleItem, len(cs))
	for i, cl := range cs {
		items[i] = queue.SettleItem{EventID: cl.EventID, Generation: cl.Generation, Result: queue.Result{OK: true}}
	}
	res, next, err := c.Q.SettleClaimBatch(ctx, items, now, n)
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		if r.Err != nil || r.Outcome != queue.Acked {
			return nil, fmt.Errorf("settle %s: %s, %v, want acked", cs[i].EventID, r.Outcome, r.Err)
		}
	}
	return next, nil
}

// PGQueueChild is the child side of a PostgreSQL drain: it opens the queue in
// schema on the server at url and calls [ChildDrain] with a
// [PGBatchClaimant] of batch events.
func PGQueueChild(ctx context.Context, url, schema string, batch int) error {
	q, err := pgqueuestore.Open(ctx, url, pgqueuestore.WithSchema(schema))
	if err != nil {
		return err
	}
	defer q.Close()
	return ChildDrain(ctx, PGBatchClaimant{Q: q, N: batch})
}

// MakePGTemplate creates a queue in schema loaded with flows × perFlow events
// ([LoadBacklog]), for [CopyPGTemplate] to copy.
func MakePGTemplate(ctx context.Context, url, schema string, flows, perFlow int) error {
	q, err := pgqueuestore.Open(ctx, url, pgqueuestore.WithSchema(schema))
	if err != nil {
		return err
	}
	defer q.Close()
	return LoadBacklog(ctx, q, "e", flows, perFlow)
}

// CopyPGTemplate creates a fresh queue in schema (pgqueuestore's own
// migration, so the tables, constraints and indexes are the store's) and
// copies the rows of the template's meta, flows, flow_seqs, events and
// acked into it, then analyzes it. The template's audit is empty and stays so.
func CopyPGTemplate(ctx context.Context, url, template, schema string) error {
	q, err := pgqueuestore.Open(ctx, url, pgqueuestore.WithSchema(schema))
	if err != nil {
		return err
	}
	q.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	from, to := pgx.Identifier{template}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		for _, sql := range []string{
			"DELETE FROM " + to + ".meta",
			"INSERT INTO " + to + ".meta SELECT * FROM " + from + ".meta",
			"INSERT INTO " + to + ".flows SELECT * FROM " + from + ".flows",
			// Each flow's sequence counter (migration 7), which an event's
			// insert checks for its flow.
			"INSERT INTO " + to + ".flow_seqs SELECT * FROM " + from + ".flow_seqs",
			// quarantined is generated: every column but it.
			"INSERT INTO " + to + ".events (" + eventColumns + ") SELECT " + eventColumns + " FROM " + from + ".events",
			"INSERT INTO " + to + ".acked SELECT * FROM " + from + ".acked",
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("copy template: %s: %w", sql, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return analyzePG(ctx, url, schema)
}

// eventColumns are the stored columns of pgqueuestore's events.
const eventColumns = "id, flow, seq, body, state, generation, attempts, lifetime_attempts, available_at, lease_until, ticket, reason, enqueued_at, acked_at"

// PGDrainArgs are the arguments that make a benchrun child (-child pg) drain
// the queue in schema with batches of batch.
func PGDrainArgs(url, schema string, batch int) []string {
	return []string{"-child", "pg", "-pg-url", url, "-db", schema, "-batch", strconv.Itoa(batch)}
}

// MeasurePGDrains runs rounds rounds; in each, for every count in counts (in
// an order rotated by one each round), that many OS processes (exe with
// args(schema), each calling [PGQueueChild]) drain a fresh copy of the
// template for d. The copy is dropped after its drain. It returns, for every
// count, one summary per round.
func MeasurePGDrains(ctx context.Context, url, template, exe string, args func(schema string) []string, counts []int, rounds int, d time.Duration,
	progress func(round, procs int, s DrainSummary)) (map[int][]DrainSummary, error) {
	out := map[int][]DrainSummary{}
	for r := range rounds {
		for j := range counts {
			n := counts[(r+j)%len(counts)]
			schema := NewPGSchema()
			if err := CopyPGTemplate(ctx, url, template, schema); err != nil {
				DropPGSchema(ctx, url, schema)
				return nil, err
			}
			ps, err := SpawnDrain(ctx, exe, args(schema), n, d)
			if derr := DropPGSchema(ctx, url, schema); err == nil {
				err = derr
			}
			if err != nil {
				return nil, fmt.Errorf("pg drain, %d processes: %w", n, err)
			}
			s := SummarizeDrain(ps)
			for _, p := range ps {
				if p.Empty {
					return nil, fmt.Errorf("pg drain, %d processes: process %d found the backlog empty after %s: %w", n, p.Proc, p.Elapsed, ErrBacklogEmpty)
				}
			}
			out[n] = append(out[n], s)
			if progress != nil {
				progress(r+1, n, s)
			}
		}
	}
	return out, nil
}
