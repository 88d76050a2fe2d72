package pgqueuestore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// SettleClaimBatch settles items and then claims up to n heads, in one
// write transaction: one turn and one commit where SettleBatch followed by
// ClaimBatch take two. A relay that settles its finished handlers and
// claims for the slots they freed makes one call per wave this way
// (docs/decisions/settle-claim-batch.md).
//
// The results and claims are exactly those of SettleBatch(ctx, items, now)
// followed at once by ClaimBatch(ctx, now, n) with nothing in between, as
// for queuestore.Store.SettleClaimBatch: the same outcomes, item errors,
// order (MinServed or the rotation), tickets, generations, attempts and
// leases. The claim sees the settles, so a flow whose head was just acked
// can hand out its next event in the same call. Hooks run as in those two
// calls: HookSettleBeforeCommit inside the transaction when an item changed
// its event, HookClaimCommitted after the commit when something was
// claimed.
//
// n is at least 0; 0 settles only. A bad item (ErrInvalid, ErrNotFound)
// gets its own Err, as in SettleBatch, and changes nothing. All or
// nothing: n < 0 (ErrInvalid, checked first), ErrTimeRegression, a
// canceled context, a corrupt flow or an SQL error in either part refuses
// the whole call, and then nothing changes.
func (s *Store) SettleClaimBatch(ctx context.Context, items []queue.SettleItem, now clock.Tick, n int) ([]queue.SettleResult, []queue.Claim, error) {
	if n < 0 {
		return nil, nil, fmt.Errorf("settle claim batch: %w: n is %d, want at least 0", queue.ErrInvalid, n)
	}
	out, cs, err := s.settleClaim(ctx, items, now, n)
	if err != nil {
		return nil, nil, fmt.Errorf("settle claim batch: %w", err)
	}
	return out, cs, nil
}

// settleClaim is the body of SettleBatch (n = 0) and SettleClaimBatch: in
// one transaction, the items settled as SettleBatch settles them, then up
// to n heads claimed as ClaimBatch claims them. The events are read with
// BEGIN and the settles' writes go with the claim's first statements:
// one round trip for BEGIN and the reads, one for the writes and the
// first page of picks, one for the claims' writes and COMMIT.
func (s *Store) settleClaim(ctx context.Context, items []queue.SettleItem, now clock.Tick, n int) ([]queue.SettleResult, []queue.Claim, error) {
	if s.oneCallable(ctx, items, now) {
		if out, cs, ok, err := s.oneCall(ctx, items, now, n); err != nil || ok {
			return out, cs, err
		}
	}
	var (
		out []queue.SettleResult
		cs  []queue.Claim
	)
	st := s.newSettles(items, false)
	err := s.withTxRead(ctx, nil, st.reads(), func(tx pgx.Tx, a admission, stale bool, pp *pipe) error {
		cs = nil
		now, m, err := s.admitPipe(ctx, tx, a, now, pp)
		if err != nil {
			return err
		}
		// With a claim to follow, the settles' writes go with its first
		// statements (claimHeads sends pp first thing); without, with
		// COMMIT.
		rs, wrote, err := st.settle(ctx, tx, pp, now, m.policy, stale)
		if err != nil {
			return err
		}
		out = rs
		if wrote {
			s.call(queue.HookSettleBeforeCommit)
		}
		if n == 0 {
			return nil
		}
		cs, err = s.claimHeads(ctx, tx, pp, now, n, m.ticket, m.policy)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(cs) > 0 {
		s.call(queue.HookClaimCommitted)
	}
	return out, cs, nil
}
