package pgqueuestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5/pgconn"
)

// The one-call path (docs/decisions/postgres-server-side-transitions.md):
// Claim, ClaimBatch, Settle, SettleBatch and SettleClaimBatch whose every
// result is a success run as one call of settle_claim (migration 11), one
// round trip and one commit, when nothing but the common case can happen.
// The function checks what only the database knows (the clock mark, the
// policy's fairness and waits, arrivals, destinations, each event and
// head) and raises fallbackCode before anything commits otherwise; the
// call then runs as the statements sent from Go (the general path), which
// decide everything else. Both leave the same rows
// (TestOneCall_SameAsTheGeneralPath).

// fallbackCode is the SQLSTATE settle_claim raises when a call needs the
// general path.
const fallbackCode = "FR001"

const qSettleClaimCall = `SELECT o_k, o_outcome, o_id, o_flow, o_seq, o_body, o_generation, o_attempts, o_ticket, o_lease_until, o_woke
FROM {s}.settle_claim($1::text[], $2::bigint[], $3::bigint, $4::integer, $5::text)`

// oneCallVersion is the migration that creates settle_claim.
const oneCallVersion = 11

// oneCallable reports whether a call at now settling items may take the
// one-call path as far as Go can tell: no hook to call inside the
// transaction, a tick that is not negative and not ahead of the wall
// clock (real time), no destination filter, no destinations and no
// rotation as far as the store last saw (dests; rotating, which every
// write on the general path sets from the policy it reads), and every
// item valid with a success result. settle_claim checks the rest.
func (s *Store) oneCallable(ctx context.Context, items []queue.SettleItem, now clock.Tick) bool {
	if s.general || s.hook != nil || now < 0 || s.dests.Load() || s.rotating.Load() {
		return false
	}
	if s.realTime != nil && now > satAdd(s.realTime.Now(), s.skew) {
		return false
	}
	if _, filtered := ctx.Value(claimFilterKey{}).(queue.ClaimFilter); filtered {
		return false
	}
	for _, it := range items {
		if !it.Result.OK || it.Validate() != nil {
			return false
		}
	}
	return true
}

// oneCall settles items (each acked unless Stale or Expired) and claims up
// to n heads in one call of settle_claim, exactly as settleClaim would.
// ok is false when settle_claim sent the call to the general path: then
// nothing was written.
func (s *Store) oneCall(ctx context.Context, items []queue.SettleItem, now clock.Tick, n int) (out []queue.SettleResult, cs []queue.Claim, ok bool, err error) {
	ids := make([]string, len(items))
	gens := make([]int64, len(items))
	for i, it := range items {
		ids[i], gens[i] = it.EventID, it.Generation
	}
	var wake *string
	if len(items) > 0 && s.notify.open() {
		ch := s.channel()
		wake = &ch
	}
	rows, err := s.pool.Query(ctx, s.q(qSettleClaimCall), ids, gens, int64(now), n, wake)
	if err != nil {
		return nil, nil, false, fmt.Errorf("settle_claim: %w", err)
	}
	defer rows.Close()
	out = make([]queue.SettleResult, len(items))
	woke := false
	for rows.Next() {
		var (
			k                       int
			outcome, id, flow       *string
			seq, gen, ticket, lease *int64
			attempts                *int
			body                    []byte
			sent                    bool
		)
		if err := rows.Scan(&k, &outcome, &id, &flow, &seq, &body, &gen, &attempts, &ticket, &lease, &sent); err != nil {
			return nil, nil, false, fmt.Errorf("settle_claim: %w", err)
		}
		woke = woke || sent
		if k >= 0 {
			if k >= len(out) || outcome == nil {
				return nil, nil, false, fmt.Errorf("settle_claim: %w: outcome row %d of %d items", queue.ErrCorrupt, k, len(out))
			}
			out[k].Outcome = queue.Outcome(*outcome)
			continue
		}
		cs = append(cs, queue.Claim{EventID: *id, Flow: *flow, Seq: *seq, Body: body, Generation: *gen,
			Attempts: *attempts, Ticket: *ticket, LeaseUntil: clock.Tick(*lease), Destination: queue.DefaultDestination})
	}
	if err := rows.Err(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == fallbackCode {
			switch pe.Detail {
			case "rotation":
				s.rotating.Store(true)
			case "destinations":
				s.dests.Store(true) // never removed
			}
			return nil, nil, false, nil
		}
		return nil, nil, false, fmt.Errorf("settle_claim: %w", err)
	}
	if woke {
		s.notify.sent()
	}
	return out, cs, true, nil
}
