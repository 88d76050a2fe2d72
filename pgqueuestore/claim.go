package pgqueuestore

import (
	"context"
	"fmt"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/fairness"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// The claim path; every statement is index-driven (plan_test.go).
const (
	qPromote = `UPDATE {s}.flows SET ready = true WHERE NOT ready AND ready_at <= $1 AND paused IS NULL`

	// qPickHead is fairness.MinServed in SQL: the smallest served, ties to
	// the smallest flow ID in byte order (COLLATE "C"), with the head event
	// in the same statement, among the flows of the default destination:
	// every flow of a queue without destinations (flows_ready's '' range).
	qPickHead = `SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
    e.body, e.generation
FROM {s}.flows AS f LEFT JOIN {s}.events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.ready AND f.dest = '' ORDER BY f.served, f.flow LIMIT 1`

	qQuarantineExpired = `UPDATE {s}.events SET state = 'quarantined', reason = 'lease_expired', lease_until = 0 WHERE id = $1`

	qBlockFlow = `UPDATE {s}.flows SET ready_at = NULL, ready = false WHERE flow = $1`

	// qPickHeads is qPickHead without its LIMIT: the ready flows of the
	// default destination in MinServed order with their heads, the
	// rotation's columns and the destination; pickDefault appends "LIMIT
	// n" (a literal, so the plan is the one TestPlans_IndexDriven checks:
	// flows_ready's '' range in order, no sort).
	qPickHeads = `SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
    e.body, e.generation, f.pass, f.served, f.weight, f.dest
FROM {s}.flows AS f LEFT JOIN {s}.events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.ready AND f.dest = '' ORDER BY f.served, f.flow`

	qClaimEvent = `UPDATE {s}.events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = $2, ticket = $3
WHERE id = $1`

	// qClaimEvents is qClaimEvent for the events of the array $1, the
	// k-th (from 1) with ticket $3 + k - 1, all with lease $2.
	qClaimEvents = `UPDATE {s}.events AS e SET state = 'inflight', generation = e.generation + 1,
    attempts = e.attempts + 1, lifetime_attempts = e.lifetime_attempts + 1,
    lease_until = $2, ticket = $3 + u.k - 1
FROM unnest($1::text[]) WITH ORDINALITY AS u(id, k)
WHERE e.id = u.id`

	// qServeFlows is qServeFlow for the flows of the array $1.
	qServeFlows = `UPDATE {s}.flows SET served = served + 1, ready_at = $2, ready = false WHERE flow = ANY($1::text[])`

	qServeFlow = `UPDATE {s}.flows SET served = served + 1, ready_at = $2, ready = false WHERE flow = $1`

	qSetTicket = `UPDATE {s}.meta SET ticket = $1 WHERE id = 1`
)

// Claim hands out the head of the flow served least (ties to the smallest
// flow ID in byte order) among the flows whose head is dispatchable at now,
// exactly as queuestore.Store.Claim does (docs/contract.md §2.3). Under
// the FairRotation policy the flow is instead the one with the smallest
// (pass, joined), and the claim advances the rotation's virtual time
// (docs/contract.md §7.6). ok is false when nothing is dispatchable; now
// is recorded either way.
func (s *Store) Claim(ctx context.Context, now clock.Tick) (queue.Claim, bool, error) {
	cs, err := s.claim(ctx, now, 1)
	if err != nil {
		return queue.Claim{}, false, fmt.Errorf("claim: %w", err)
	}
	if len(cs) == 0 {
		return queue.Claim{}, false, nil
	}
	return cs[0], true, nil
}

// ClaimBatch is n successive Claims at the same now, in one transaction:
// the same order, tickets, served counts, generations, attempts and
// leases. It returns fewer (or none) when fewer flows are dispatchable. n
// must be at least 1 (queue.ErrInvalid otherwise).
func (s *Store) ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim batch: %w: n is %d, want at least 1", queue.ErrInvalid, n)
	}
	cs, err := s.claim(ctx, now, n)
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	return cs, nil
}

func (s *Store) claim(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error) {
	if s.oneCallable(ctx, nil, now) {
		if _, cs, ok, err := s.oneCall(ctx, nil, now, n); err != nil || ok {
			return cs, err
		}
	}
	var out []queue.Claim
	err := s.withTxRead(ctx, nil, nil, func(tx pgx.Tx, a admission, _ bool, pp *pipe) error {
		out = out[:0]
		now, m, err := s.admitPipe(ctx, tx, a, now, pp)
		if err != nil {
			return err
		}
		out, err = s.claimHeads(ctx, tx, pp, now, n, m.ticket, m.policy)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		s.call(queue.HookClaimCommitted)
	}
	return out, nil
}

// claimHeads is claimHeadsFor with the filter ctx carries
// (withClaimFilter: SettleClaimFor's, through settleClaim), else an empty
// one: the claim of Claim, ClaimBatch and SettleClaimBatch, which leaves
// out only what the store's destinations say (docs/contract.md §7.11).
func (s *Store) claimHeads(ctx context.Context, tx pgx.Tx, pp *pipe, now clock.Tick, n int, ticket int64, p queue.Policy) ([]queue.Claim, error) {
	f, _ := ctx.Value(claimFilterKey{}).(queue.ClaimFilter)
	return s.claimHeadsFor(ctx, tx, pp, now, n, ticket, p, f)
}

// claimFilterKey is the context key of withClaimFilter.
type claimFilterKey struct{}

// withClaimFilter returns ctx carrying f to claimHeads: SettleClaimFor
// runs settleClaim, SettleClaimBatch's body, with its filter this way.
func withClaimFilter(ctx context.Context, f queue.ClaimFilter) context.Context {
	return context.WithValue(ctx, claimFilterKey{}, f)
}

// claimHeadsFor claims up to n heads after the promotion, in the policy's
// order, leaving out the destinations f and the store's own limits leave
// out, in a few round trips: the promotion and the first page of picks
// (the first n ready flows in pick order: pickDefault, or pickMerged once
// the store has destinations) in one pipe, then the writes of every pick
// of the page (and the ticket) queued on pp, left for the caller to send
// (begin sends them with COMMIT). That is n successive
// picks exactly: inside the transaction no flow becomes ready (the
// promotion comes first), and each pick makes its flow not ready
// (claimed: served; a used-up take-over: blocked) without changing any
// other flow's order key (served, or pass and joined), so the k-th pick of
// n successive ones is the k-th ready flow of the page; a destination's
// room shrinks by one with each claim of its flows, exactly as the next
// single claim would find it. Only when used-up take-overs leave the page
// short of n claims (or the page showed that destinations exist) is
// another page read, in the pipe of the writes, for the rest.
func (s *Store) claimHeadsFor(ctx context.Context, tx pgx.Tx, pp *pipe, now clock.Tick, n int, ticket int64, p queue.Policy, f queue.ClaimFilter) ([]queue.Claim, error) {
	rot := rotation(p)
	promote := qPromote
	if rot {
		promote = qRotPromote
	}
	var (
		out         []queue.Claim
		vnow, vtail int64
		hist        history
		used        map[string]int // claims per destination in this call
	)
	pp.exec("promote ready flows", s.q(promote), int64(now))
	for {
		limit := n - len(out)
		var page []head
		var found bool // pickDefault saw that destinations exist
		scan := func(r pgx.Rows) error {
			var h head
			if err := r.Scan(&h.flow, &h.headSeq, &h.id, &h.state, &h.attempts, &h.leaseUntil, &h.availAt, &h.body, &h.gen,
				&h.pass, &h.served, &h.weight, &h.dest); err != nil {
				return err
			}
			if h.flow == "" {
				found = true // the sentinel row of pickDefault
				return nil
			}
			page = append(page, h)
			return nil
		}
		merged := s.dests.Load()
		if merged {
			sql, args := s.pickMerged(rot, now, limit, f, used)
			pp.query("pick flows", scan, sql, args...)
		} else {
			pp.query("pick flow", scan, s.pickDefault(rot, defaultRoom(f, used, limit)))
		}
		if err := pp.send(ctx, tx); err != nil {
			return nil, err
		}
		if found {
			// Destinations exist (they are never removed): this page is
			// the default destination's alone; read it again merged.
			s.dests.Store(true)
			continue
		}
		var ids, flows, dests, spend []string
		var passes []int64
		for _, h := range page {
			c, claimed, err := s.takeHead(pp, &hist, now, ticket+1, p, h)
			if err != nil {
				return nil, err
			}
			if !claimed {
				continue
			}
			ticket = c.Ticket
			ids, flows, dests = append(ids, c.EventID), append(flows, c.Flow), append(dests, c.Destination)
			if c.Destination != queue.DefaultDestination && !slices.Contains(spend, c.Destination) {
				spend = append(spend, c.Destination)
			}
			if used == nil {
				used = make(map[string]int)
			}
			used[c.Destination]++
			if rot {
				next := h.pass + fairness.Stride(h.weight, h.served)
				passes = append(passes, next)
				vnow, vtail = h.pass, max(vtail, next)
			}
			out = append(out, c)
		}
		if len(ids) > 0 {
			// The page's claims in two set statements: their events and
			// flows are all distinct, so one statement per table leaves
			// the rows as the claims one after the other would.
			// Each updates one row per claim, which the server checks
			// (checkedRows): they may go with COMMIT.
			lease, first := int64(now+p.Lease), out[len(out)-len(ids)].Ticket
			if len(spend) > 0 {
				// Events of registered destinations record theirs, which
				// the in-flight index counts (events_inflight_dest).
				pp.exec("claim events", checkedRows(s.q(qClaimEventsDest)), ids, lease, first, dests)
				counts := make([]int64, len(spend))
				for k, d := range spend {
					counts[k] = int64(pageCount(dests, d))
				}
				pp.exec("spend rate tokens", s.q(qSpendTokens), spend, counts, int64(now))
			} else {
				pp.exec("claim events", checkedRows(s.q(qClaimEvents)), ids, lease, first)
			}
			if rot {
				pp.exec("serve flows", s.q(qRotServeFlows), flows, lease, passes)
			} else {
				pp.exec("serve flows", s.q(qServeFlows), flows, lease)
			}
		}
		if len(out) == n || len(page) < limit {
			break
		}
	}
	s.queueHistory(pp, &hist, now)
	if len(out) > 0 {
		if rot {
			pp.exec("record ticket", s.q(qRotSetClock), ticket, vnow, vtail)
		} else {
			pp.exec("record ticket", s.q(qSetTicket), ticket)
		}
	}
	return out, nil
}

// head is a picked flow's head as the pick statements read it, with what
// the rotation's stride needs.
type head struct {
	flow                     string
	headSeq                  *int64
	id, state                *string
	attempts                 *int
	leaseUntil, availAt, gen *int64
	body                     []byte
	pass, served             int64
	weight                   int
	dest                     string // the flow's destination
}

// takeHead checks a picked head: a used-up take-over is quarantined and
// its flow blocked, on pp, with its history row (reason lease_expired, the
// event's generation and attempt) added to hist (claimed false,
// docs/contract.md §2.3, §7.8); a dispatchable head is claimed
// with ticket (its event's and flow's rows are the caller's to update:
// qClaimEvents, qServeFlows); anything else is queue.ErrCorrupt.
func (s *Store) takeHead(pp *pipe, hist *history, now clock.Tick, ticket int64, p queue.Policy, h head) (queue.Claim, bool, error) {
	if h.headSeq == nil {
		return queue.Claim{}, false, fmt.Errorf("%w: flow %q is ready without a head", queue.ErrCorrupt, h.flow)
	}
	if h.id == nil {
		return queue.Claim{}, false, fmt.Errorf("%w: flow %q has no event at its head seq %d", queue.ErrCorrupt, h.flow, *h.headSeq)
	}
	inflight, pending := *h.state == queue.StateInflight, *h.state == queue.StatePending
	switch {
	case inflight && clock.Tick(*h.leaseUntil) <= now && *h.attempts >= p.MaxAttempts:
		pp.exec(fmt.Sprintf("quarantine %q", *h.id), s.q(qQuarantineExpired), *h.id)
		pp.exec(fmt.Sprintf("block flow %q", h.flow), s.q(qBlockFlow), h.flow)
		hist.add(*h.id, *h.gen, *h.attempts, queue.Quarantined, queue.ReasonLeaseExpired, "")
		return queue.Claim{}, false, nil
	case inflight && clock.Tick(*h.leaseUntil) <= now:
	case pending && clock.Tick(*h.availAt) <= now:
	default:
		return queue.Claim{}, false, fmt.Errorf("%w: flow %q is ready but its head %q is %s", queue.ErrCorrupt, h.flow, *h.id, *h.state)
	}
	lease := now + p.Lease
	c := queue.Claim{EventID: *h.id, Flow: h.flow, Seq: *h.headSeq, Body: h.body,
		Generation: *h.gen + 1, Attempts: *h.attempts + 1, Ticket: ticket, LeaseUntil: lease, Destination: h.dest}
	return c, true, nil
}
