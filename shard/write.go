package shard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

var (
	_ queue.Store            = (*Store)(nil)
	_ queue.Weighter         = (*Store)(nil)
	_ queue.SettleClaimer    = (*Store)(nil)
	_ queue.Pager            = (*Store)(nil)
	_ queue.Waiter           = (*Store)(nil)
	_ queue.Pauser           = (*Store)(nil)
	_ queue.Pruner           = (*Store)(nil)
	_ queue.DestinationStore = (*Store)(nil)
)

// Enqueue enqueues e into the shard of its flow.
func (s *Store) Enqueue(ctx context.Context, e queue.Event, now clock.Tick) (queue.Enqueued, error) {
	i := s.ShardOf(e.Flow)
	r, err := s.shards[i].Enqueue(ctx, e, now)
	if err != nil {
		return r, &ShardError{Shard: i, Err: err}
	}
	return r, nil
}

// EnqueueBatch enqueues es, grouped by shard: one transaction per shard,
// the shards in index order. Every event is checked first against what
// needs no shard (queue.Event.Validate, or one ID twice in es with another
// flow or body): such bad input changes nothing. A refusal that needs a
// shard's state (a NotBefore past the policy's ticks, an unknown
// destination or another than the flow's, a conflict with a stored event)
// comes from that shard, after the parts before it committed. A
// failure in one shard's part is a *ShardError naming the shard and the
// shards whose parts committed; the parts of the shards after it are not
// tried. The same batch again is harmless: the committed events come back
// Duplicate.
func (s *Store) EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error) {
	if len(es) == 0 || len(s.shards) == 1 {
		r, err := s.shards[0].EnqueueBatch(ctx, es, now)
		if err != nil {
			return nil, &ShardError{Shard: 0, Err: err}
		}
		return r, nil
	}
	seen := make(map[string]int, len(es))
	for k, e := range es {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("event %d: %w", k, err)
		}
		if j, ok := seen[e.ID]; ok && (es[j].Flow != e.Flow || !bytes.Equal(es[j].Body, e.Body)) {
			return nil, fmt.Errorf("%w: event %d reuses the ID %q of event %d with another flow or body", queue.ErrConflict, k, e.ID, j)
		}
		seen[e.ID] = k
	}
	parts := make([][]int, len(s.shards))
	for k, e := range es {
		i := s.ShardOf(e.Flow)
		parts[i] = append(parts[i], k)
	}
	out := make([]queue.Enqueued, len(es))
	var done []int
	for i, part := range parts {
		if len(part) == 0 {
			continue
		}
		sub := make([]queue.Event, len(part))
		for j, k := range part {
			sub[j] = es[k]
		}
		r, err := s.shards[i].EnqueueBatch(ctx, sub, now)
		if err != nil {
			return nil, &ShardError{Shard: i, Err: err, Done: done}
		}
		for j, k := range part {
			out[k] = r[j]
		}
		done = append(done, i)
	}
	return out, nil
}

// Claim claims one head: ClaimBatch with n = 1.
func (s *Store) Claim(ctx context.Context, now clock.Tick) (queue.Claim, bool, error) {
	cs, err := s.ClaimBatch(ctx, now, 1)
	if err != nil || len(cs) == 0 {
		return queue.Claim{}, false, err
	}
	return cs[0], true, nil
}

// ClaimBatch claims up to n heads over the shards, in a rotation: the call
// asks the shard after the last one that gave the previous call more than
// an even share (n/N) of claims for the whole batch, in its own fair order
// (§2.3) and in one transaction, and what that shard could not fill is
// claimed from the next shards in the same order. So the shards take
// turns, one batch each, skipping the ones with nothing dispatchable, and
// a batch costs one commit as on one queue (splitting it over the shards
// cost one commit per shard: 8 shards drained at 0.22 of one queue). A failing shard ends the call with a
// *ShardError; the claims made before it are not returned and come back
// when their lease runs out. n must be at least 1 (ErrInvalid otherwise,
// as on one queue, and no shard is asked).
func (s *Store) ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim batch: %w: n is %d, want at least 1", queue.ErrInvalid, n)
	}
	_, cs, err := s.settleClaim(ctx, nil, now, n, nil)
	return cs, err
}

// SettleClaimBatch settles items and claims up to n heads: each shard
// settles its items in one transaction of its own, the shard whose turn it
// is (ClaimBatch's rotation) together with its claims. n is at least 0
// (ErrInvalid otherwise, and no shard is asked); 0 settles only.
func (s *Store) SettleClaimBatch(ctx context.Context, items []queue.SettleItem, now clock.Tick, n int) ([]queue.SettleResult, []queue.Claim, error) {
	if n < 0 {
		return nil, nil, fmt.Errorf("settle claim batch: %w: n is %d, want at least 0", queue.ErrInvalid, n)
	}
	return s.settleClaim(ctx, items, now, n, nil)
}

// ClaimFor is ClaimBatch whose claims also leave out what f says; a
// destination's Room is shared by the shards (what one shard claimed is
// taken from the room the next one gets). n is checked first, as
// ClaimBatch's, then f (ErrInvalid); either refusal asks no shard.
func (s *Store) ClaimFor(ctx context.Context, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.Claim, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim for: %w: n is %d, want at least 1", queue.ErrInvalid, n)
	}
	_, cs, err := s.settleClaim(ctx, nil, now, n, &f)
	return cs, err
}

// SettleClaimFor is SettleClaimBatch whose claims also leave out what f
// says, as ClaimFor. n is checked first, as SettleClaimBatch's, then f.
func (s *Store) SettleClaimFor(ctx context.Context, items []queue.SettleItem, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.SettleResult, []queue.Claim, error) {
	if n < 0 {
		return nil, nil, fmt.Errorf("settle claim for: %w: n is %d, want at least 0", queue.ErrInvalid, n)
	}
	return s.settleClaim(ctx, items, now, n, &f)
}

// rotation returns the order in which this call visits the shards: from
// the shard after the last one that gave more than its even share.
func (s *Store) rotation() []int {
	s.mu.Lock()
	start := s.next
	s.mu.Unlock()
	order := make([]int, len(s.shards))
	for j := range order {
		order[j] = (start + j) % len(s.shards)
	}
	return order
}

// advance moves the rotation past the last shard, in this call's order,
// that gave more than the even share n/N (an extra of the remainder, or a
// shortfall filled); past the first shard when none did.
func (s *Store) advance(order []int, got []int, n int) {
	even := n / len(s.shards)
	next := (order[0] + 1) % len(s.shards)
	for _, i := range order {
		if got[i] > even {
			next = (i + 1) % len(s.shards)
		}
	}
	s.mu.Lock()
	s.next = next
	s.mu.Unlock()
}

// remember records the shard of each claim, for settles and extends,
// after a sweep of the claim map at now (a tick shard i accepted).
func (s *Store) remember(i int, cs []queue.Claim, now clock.Tick) {
	s.mu.Lock()
	s.claimed.sweep(now)
	for _, c := range cs {
		s.claimed.put(c.EventID, i, c.LeaseUntil)
	}
	s.mu.Unlock()
}

// itemRefused reports an error of a single Settle or Extend that is the
// item's own answer (a bad item, an event the shard does not have), not a
// failure of the call: the claim is answered for.
func itemRefused(err error) bool {
	return errors.Is(err, queue.ErrInvalid) || errors.Is(err, queue.ErrNotFound)
}

// settleClaim is the one claim path: items settled per shard, n claims in
// the rotation, f (nil: none) applied with its Room shared. Its callers
// have checked n: at least 1 for a claim, at least 0 for a settle-and-
// claim.
func (s *Store) settleClaim(ctx context.Context, items []queue.SettleItem, now clock.Tick, n int, f *queue.ClaimFilter) ([]queue.SettleResult, []queue.Claim, error) {
	if f != nil {
		if err := f.Validate(); err != nil {
			return nil, nil, err
		}
	}
	if (n == 0 && len(items) == 0) || len(s.shards) == 1 {
		// A settle-and-claim of nothing (the first shard records now, as
		// SettleBatch of no items does), or one shard: the shard answers
		// as it would alone.
		return s.call(ctx, 0, items, now, n, f)
	}
	groups, results, err := s.group(ctx, settleIDs(items))
	if err != nil {
		return nil, nil, err
	}
	order := s.rotation()
	quota := make([]int, len(s.shards))
	quota[order[0]] = n // the whole batch from one shard: one commit, as one queue pays
	var room map[string]int
	if f != nil && f.Room != nil {
		room = make(map[string]int, len(f.Room))
		for k, v := range f.Room {
			room[k] = v
		}
	}
	var claims []queue.Claim
	var full, done []int
	got := make([]int, len(s.shards))
	short := 0
	for _, i := range order {
		sub := pick(items, groups[i])
		if len(sub) == 0 && quota[i] == 0 {
			full = append(full, i) // not asked yet: may fill a shortfall
			continue
		}
		rs, cs, err := s.call(ctx, i, sub, now, quota[i], withRoom(f, room))
		if err != nil {
			return nil, nil, &ShardError{Shard: i, Err: err, Done: done}
		}
		done = append(done, i)
		for j, k := range groups[i] {
			results[k] = rs[j]
		}
		take(room, cs)
		claims = append(claims, cs...)
		got[i] += len(cs)
		short += quota[i] - len(cs)
		if len(cs) == quota[i] {
			full = append(full, i)
		}
	}
	for _, i := range full {
		if short == 0 {
			break
		}
		_, cs, err := s.call(ctx, i, nil, now, short, withRoom(f, room))
		if err != nil {
			return nil, nil, &ShardError{Shard: i, Err: err, Done: done}
		}
		if !slices.Contains(done, i) {
			done = append(done, i)
		}
		take(room, cs)
		claims = append(claims, cs...)
		got[i] += len(cs)
		short -= len(cs)
	}
	s.advance(order, got, n)
	if claims == nil {
		claims = []queue.Claim{}
	}
	return results, claims, nil
}

// call settles items and claims n on shard i with the narrowest method
// that does it.
func (s *Store) call(ctx context.Context, i int, items []queue.SettleItem, now clock.Tick, n int, f *queue.ClaimFilter) ([]queue.SettleResult, []queue.Claim, error) {
	sh := s.shards[i]
	var rs []queue.SettleResult
	var cs []queue.Claim
	var err error
	switch {
	case f != nil:
		d, ok := sh.(queue.DestinationStore)
		if !ok {
			return nil, nil, unsupported(i, sh, "queue.DestinationStore")
		}
		if len(items) == 0 && n > 0 {
			cs, err = d.ClaimFor(ctx, now, n, *f)
		} else {
			rs, cs, err = d.SettleClaimFor(ctx, items, now, n, *f)
		}
	case len(items) == 0 && n > 0:
		cs, err = sh.ClaimBatch(ctx, now, n)
	default:
		sc, ok := sh.(queue.SettleClaimer)
		if ok {
			rs, cs, err = sc.SettleClaimBatch(ctx, items, now, n)
		} else {
			if rs, err = sh.SettleBatch(ctx, items, now); err == nil && n > 0 {
				cs, err = sh.ClaimBatch(ctx, now, n)
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	s.settled(items, rs, now)
	s.remember(i, cs, now)
	return rs, cs, nil
}

// settled forgets every item a settle answered for, whatever the answer:
// an outcome (Stale and Expired included: the lease was lost) or the
// item's own error (docs/contract.md §2.4, §7.2: either way the caller is
// done with that claim). It sweeps the claim map at now first.
func (s *Store) settled(items []queue.SettleItem, rs []queue.SettleResult, now clock.Tick) {
	s.mu.Lock()
	s.claimed.sweep(now)
	for k := range min(len(items), len(rs)) {
		s.claimed.drop(items[k].EventID)
	}
	s.mu.Unlock()
}

// extended updates the claim map after an extension in shard i at now: an
// item extended keeps its entry, with its new lease end; any other answer
// (Stale or Expired: the lease is lost and the worker stops, docs/
// contract.md §7.2; or the item's own error) drops it.
func (s *Store) extended(i int, items []queue.ExtendItem, rs []queue.SettleResult, now clock.Tick) {
	s.mu.Lock()
	s.claimed.sweep(now)
	for k := range min(len(items), len(rs)) {
		if rs[k].Err == nil && rs[k].Outcome == queue.Extended {
			s.claimed.put(items[k].EventID, i, rs[k].LeaseUntil)
		} else {
			s.claimed.drop(items[k].EventID)
		}
	}
	s.mu.Unlock()
}

func settleIDs(items []queue.SettleItem) []string {
	ids := make([]string, len(items))
	for k, it := range items {
		ids[k] = it.EventID
	}
	return ids
}

func pick[T any](all []T, idx []int) []T {
	if len(idx) == 0 {
		return nil
	}
	out := make([]T, len(idx))
	for j, k := range idx {
		out[j] = all[k]
	}
	return out
}

// withRoom is f with its Room replaced by room (what is left of it).
func withRoom(f *queue.ClaimFilter, room map[string]int) *queue.ClaimFilter {
	if f == nil {
		return nil
	}
	g := *f
	if room != nil {
		g.Room = make(map[string]int, len(room))
		for k, v := range room {
			g.Room[k] = v
		}
	}
	return &g
}

// take takes the claims from the room left.
func take(room map[string]int, cs []queue.Claim) {
	if room == nil {
		return
	}
	for _, c := range cs {
		if r, ok := room[c.Destination]; ok && r > 0 {
			room[c.Destination] = r - 1
		}
	}
}

// shardOfEvent finds the shard of an event: the one this Store claimed it
// from, or else the first shard that has it (one read per shard: an
// operator's path). ok is false when no shard has it.
func (s *Store) shardOfEvent(ctx context.Context, id string) (int, bool, error) {
	s.mu.Lock()
	i, ok := s.claimed.get(id)
	s.mu.Unlock()
	if ok {
		return i, true, nil
	}
	if len(s.shards) == 1 {
		return 0, true, nil
	}
	if err := queue.CheckID(id); err != nil {
		return 0, false, err
	}
	for i, sh := range s.shards {
		_, err := sh.Event(ctx, id)
		if err == nil {
			return i, true, nil
		}
		if !errors.Is(err, queue.ErrNotFound) {
			return 0, false, &ShardError{Shard: i, Err: err}
		}
	}
	return 0, false, nil
}

// group sorts event IDs by shard: groups[i] lists the indexes of ids in
// shard i. An ID no shard has (or a bad one) goes to shard 0, whose answer
// for it (ErrNotFound, ErrInvalid) is the item's.
func (s *Store) group(ctx context.Context, ids []string) ([][]int, []queue.SettleResult, error) {
	groups := make([][]int, len(s.shards))
	for k, id := range ids {
		i, ok, err := s.shardOfEvent(ctx, id)
		if err != nil && !errors.Is(err, queue.ErrInvalid) {
			return nil, nil, err
		}
		if !ok {
			i = 0
		}
		groups[i] = append(groups[i], k)
	}
	return groups, make([]queue.SettleResult, len(ids)), nil
}

// Settle settles a claim in the event's shard. Any answer for the item
// (an outcome, ErrInvalid, ErrNotFound) ends this Store's record of the
// claim.
func (s *Store) Settle(ctx context.Context, eventID string, generation int64, r queue.Result, now clock.Tick) (queue.Outcome, error) {
	i, _, err := s.shardOfEvent(ctx, eventID)
	if err != nil && !errors.Is(err, queue.ErrInvalid) {
		return "", err
	}
	o, err := s.shards[i].Settle(ctx, eventID, generation, r, now)
	s.answered(eventID, now, o, err)
	return o, err
}

// answered updates the claim map after a single Settle or Extend of id at
// now answered o or err: a failure of the call keeps the entry (the
// caller tries again); the item's own refusal, or any outcome but
// Extended, drops it. An extension keeps the entry as it was (Extend does
// not report the new lease end).
func (s *Store) answered(id string, now clock.Tick, o queue.Outcome, err error) {
	if err != nil && !itemRefused(err) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.claimed.sweep(now)
	}
	if err != nil || o != queue.Extended {
		s.claimed.drop(id)
	}
}

// SettleBatch settles items, grouped by shard: one transaction per shard.
// A failing shard is a *ShardError; the shards before it committed.
func (s *Store) SettleBatch(ctx context.Context, items []queue.SettleItem, now clock.Tick) ([]queue.SettleResult, error) {
	if len(s.shards) == 1 || len(items) == 0 {
		rs, err := s.shards[0].SettleBatch(ctx, items, now)
		if err == nil {
			s.settled(items, rs, now)
		}
		return rs, err
	}
	groups, results, err := s.group(ctx, settleIDs(items))
	if err != nil {
		return nil, err
	}
	var done []int
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		sub := pick(items, g)
		rs, err := s.shards[i].SettleBatch(ctx, sub, now)
		if err != nil {
			return nil, &ShardError{Shard: i, Err: err, Done: done}
		}
		s.settled(sub, rs, now)
		for j, k := range g {
			results[k] = rs[j]
		}
		done = append(done, i)
	}
	return results, nil
}

// Extend renews a claim's lease in the event's shard. An answer that the
// lease is lost (Stale, Expired) or the item's own error (ErrInvalid,
// ErrNotFound) ends this Store's record of the claim. An extended claim's
// record is left as it was: Extend does not report the new lease end, so
// the record may go after the old one and a later settle then asks each
// shard; ExtendBatch reports it, and the record follows it.
func (s *Store) Extend(ctx context.Context, eventID string, generation int64, now clock.Tick) (queue.Outcome, error) {
	i, _, err := s.shardOfEvent(ctx, eventID)
	if err != nil && !errors.Is(err, queue.ErrInvalid) {
		return "", err
	}
	o, err := s.shards[i].Extend(ctx, eventID, generation, now)
	s.answered(eventID, now, o, err)
	return o, err
}

// ExtendBatch extends items, grouped by shard: one transaction per shard.
// An item extended keeps this Store's record of its claim, to its new
// lease end; any other answer ends it, as Extend's does.
func (s *Store) ExtendBatch(ctx context.Context, items []queue.ExtendItem, now clock.Tick) ([]queue.SettleResult, error) {
	if len(s.shards) == 1 || len(items) == 0 {
		rs, err := s.shards[0].ExtendBatch(ctx, items, now)
		if err == nil {
			s.extended(0, items, rs, now)
		}
		return rs, err
	}
	ids := make([]string, len(items))
	for k, it := range items {
		ids[k] = it.EventID
	}
	groups, results, err := s.group(ctx, ids)
	if err != nil {
		return nil, err
	}
	var done []int
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		sub := pick(items, g)
		rs, err := s.shards[i].ExtendBatch(ctx, sub, now)
		if err != nil {
			return nil, &ShardError{Shard: i, Err: err, Done: done}
		}
		s.extended(i, sub, rs, now)
		for j, k := range g {
			results[k] = rs[j]
		}
		done = append(done, i)
	}
	return results, nil
}

// Redrive redrives a quarantined event in its shard.
func (s *Store) Redrive(ctx context.Context, eventID string, generation int64, reason string, now clock.Tick) error {
	i, _, err := s.shardOfEvent(ctx, eventID)
	if err != nil && !errors.Is(err, queue.ErrInvalid) {
		return err
	}
	return s.shards[i].Redrive(ctx, eventID, generation, reason, now)
}

// RedriveAll redrives what f matches: in the flow's shard when f names a
// flow, else in every shard in index order (a failing shard is a
// *ShardError; the shards before it redrove theirs).
func (s *Store) RedriveAll(ctx context.Context, f queue.RedriveFilter, reason string, now clock.Tick) ([]queue.Redriven, error) {
	if f.Flow != "" || len(s.shards) == 1 {
		i := 0
		if f.Flow != "" {
			i = s.ShardOf(f.Flow)
		}
		return s.shards[i].RedriveAll(ctx, f, reason, now)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := queue.CheckReason(reason); err != nil {
		return nil, err
	}
	out := []queue.Redriven{}
	var done []int
	for i, sh := range s.shards {
		r, err := sh.RedriveAll(ctx, f, reason, now)
		if err != nil {
			return out, &ShardError{Shard: i, Err: err, Done: done}
		}
		out = append(out, r...)
		done = append(done, i)
	}
	return out, nil
}

// SetPolicy records p in every shard, in index order.
func (s *Store) SetPolicy(ctx context.Context, p queue.Policy, reason string, now clock.Tick) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return s.every(func(i int, sh queue.Store) error { return sh.SetPolicy(ctx, p, reason, now) })
}

// every runs fn on every shard in index order, stopping at the first
// failure (a *ShardError naming the shards done).
func (s *Store) every(fn func(i int, sh queue.Store) error) error {
	var done []int
	for i, sh := range s.shards {
		if err := fn(i, sh); err != nil {
			if len(s.shards) == 1 {
				return err
			}
			return &ShardError{Shard: i, Err: err, Done: done}
		}
		done = append(done, i)
	}
	return nil
}

// SetWeight sets a flow's weight in its shard.
func (s *Store) SetWeight(ctx context.Context, flow string, weight int, reason string, now clock.Tick) error {
	i := s.ShardOf(flow)
	w, ok := s.shards[i].(queue.Weighter)
	if !ok {
		return unsupported(i, s.shards[i], "queue.Weighter")
	}
	return w.SetWeight(ctx, flow, weight, reason, now)
}

// PauseFlow pauses a flow in its shard.
func (s *Store) PauseFlow(ctx context.Context, flow, reason string, now clock.Tick) error {
	i := s.ShardOf(flow)
	p, ok := s.shards[i].(queue.Pauser)
	if !ok {
		return unsupported(i, s.shards[i], "queue.Pauser")
	}
	return p.PauseFlow(ctx, flow, reason, now)
}

// ResumeFlow resumes a flow in its shard.
func (s *Store) ResumeFlow(ctx context.Context, flow, reason string, now clock.Tick) error {
	i := s.ShardOf(flow)
	p, ok := s.shards[i].(queue.Pauser)
	if !ok {
		return unsupported(i, s.shards[i], "queue.Pauser")
	}
	return p.ResumeFlow(ctx, flow, reason, now)
}

// Prune prunes every shard, each with the same limit (so one call may
// delete up to N × limit rows of each kind); More is set when any shard
// filled its limit.
func (s *Store) Prune(ctx context.Context, now clock.Tick, limit int) (queue.PruneResult, error) {
	var sum queue.PruneResult
	err := s.every(func(i int, sh queue.Store) error {
		p, ok := sh.(queue.Pruner)
		if !ok {
			return unsupported(i, sh, "queue.Pruner")
		}
		r, err := p.Prune(ctx, now, limit)
		sum.Events += r.Events
		sum.Audit += r.Audit
		sum.More = sum.More || r.More
		return err
	})
	return sum, err
}

// Prunable sums what Prune at now would delete in every shard.
func (s *Store) Prunable(ctx context.Context, now clock.Tick) (queue.PruneResult, error) {
	var sum queue.PruneResult
	err := s.every(func(i int, sh queue.Store) error {
		p, ok := sh.(queue.Pruner)
		if !ok {
			return unsupported(i, sh, "queue.Pruner")
		}
		r, err := p.Prunable(ctx, now)
		sum.Events += r.Events
		sum.Audit += r.Audit
		sum.More = sum.More || r.More
		return err
	})
	return sum, err
}

// PutDestination registers d unchanged in every shard: its Concurrency and
// Rate hold in each shard on its own (the whole queue's limit is N × the
// registered one; see the package documentation).
func (s *Store) PutDestination(ctx context.Context, d queue.Destination, reason string, now clock.Tick) error {
	if err := d.Validate(); err != nil {
		return err
	}
	return s.everyDest(func(ds queue.DestinationStore) error { return ds.PutDestination(ctx, d, reason, now) })
}

// PauseDestination pauses the destination in every shard, in index order.
// A shard that has it paused already is skipped (it counts as done), so
// the same call again finishes a pause that stopped part way. The call is
// ErrDestinationPaused, as on one queue, only when every shard had it
// paused; any other refusal stops it, a *ShardError naming the shards
// done.
func (s *Store) PauseDestination(ctx context.Context, name, reason string, now clock.Tick) error {
	return s.everyDestOnce(queue.ErrDestinationPaused, func(ds queue.DestinationStore) error {
		return ds.PauseDestination(ctx, name, reason, now)
	})
}

// ResumeDestination resumes the destination in every shard, as
// PauseDestination pauses it: a shard where it is not paused is skipped,
// and the call is ErrDestinationNotPaused only when it was paused in no
// shard.
func (s *Store) ResumeDestination(ctx context.Context, name, reason string, now clock.Tick) error {
	return s.everyDestOnce(queue.ErrDestinationNotPaused, func(ds queue.DestinationStore) error {
		return ds.ResumeDestination(ctx, name, reason, now)
	})
}

// SetFlowDestination changes a flow's destination in its shard.
func (s *Store) SetFlowDestination(ctx context.Context, flow, dest, reason string, now clock.Tick) error {
	i := s.ShardOf(flow)
	ds, ok := s.shards[i].(queue.DestinationStore)
	if !ok {
		return unsupported(i, s.shards[i], "queue.DestinationStore")
	}
	return ds.SetFlowDestination(ctx, flow, dest, reason, now)
}

func (s *Store) everyDest(fn func(queue.DestinationStore) error) error {
	return s.every(func(i int, sh queue.Store) error {
		ds, ok := sh.(queue.DestinationStore)
		if !ok {
			return unsupported(i, sh, "queue.DestinationStore")
		}
		return fn(ds)
	})
}

// everyDestOnce is everyDest for a change a shard refuses with already
// when it has the state asked for (a pause, a resume): such a shard
// changes nothing and counts as done, and the call goes on to the next.
// The call is that refusal, shard 0's as it gave it, only when every shard
// refused so; a retry of a call that stopped part way thus finishes it.
func (s *Store) everyDestOnce(already error, fn func(queue.DestinationStore) error) error {
	var first error
	had := 0
	err := s.everyDest(func(ds queue.DestinationStore) error {
		err := fn(ds)
		if errors.Is(err, already) {
			if first == nil {
				first = err
			}
			had++
			return nil
		}
		return err
	})
	if err == nil && had == len(s.shards) {
		return first
	}
	return err
}
