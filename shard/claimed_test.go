package shard

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// The tests of this file look inside the Store at its claim map (the
// routing hint of Settle and Extend): an entry must go when the claim is
// answered for, and an entry nobody answers for must go once its lease is
// long over, so that a long-running relay keeps a map the size of its live
// claims (docs/contract.md §7.10, §7.2).

// hintSet makes a labeled set of n SQLite shards with the default policy.
func hintSet(t *testing.T, n int) *Store {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	shards := make([]queue.Store, n)
	for i := range shards {
		s, err := queuestore.Open(filepath.Join(dir, fmt.Sprintf("shard-%d.db", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		shards[i] = s
	}
	if err := Create(ctx, shards, "test set", 1); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, shards, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// flowOf returns a flow name, prefix followed by digits, in shard i of n.
func flowOf(i, n int, prefix string) string {
	for j := 0; ; j++ {
		f := fmt.Sprintf("%s%03d", prefix, j)
		if Of(f, n) == i {
			return f
		}
	}
}

func hintEnqueue(t *testing.T, s *Store, id, flow string, now clock.Tick) {
	t.Helper()
	if _, err := s.Enqueue(context.Background(), queue.Event{ID: id, Flow: flow, Body: []byte("{}")}, now); err != nil {
		t.Fatalf("Enqueue(%s): %v", id, err)
	}
}

// hints lists the events the claim map holds.
func hints(s *Store) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimed.ids()
}

// claimAll claims n events at now and fails the test unless it gets n.
func claimAll(t *testing.T, s *Store, now clock.Tick, n int) map[string]queue.Claim {
	t.Helper()
	cs, err := s.ClaimBatch(context.Background(), now, n)
	if err != nil || len(cs) != n {
		t.Fatalf("ClaimBatch(%d, %d) = %+v, %v; want %d claims", now, n, cs, err, n)
	}
	out := map[string]queue.Claim{}
	for _, c := range cs {
		out[c.EventID] = c
	}
	return out
}

// TestSettleAnswersForget: every answer a settle gives for an item, an
// outcome or the item's own error, ends this Store's interest in the claim,
// and its entry goes: a stale generation (the lease was lost and the event
// claimed again), an item the shard refuses (ErrInvalid), an event the
// shard no longer has (ErrNotFound), in a batch and alone.
func TestSettleAnswersForget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := hintSet(t, 2)
	hintEnqueue(t, s, "a", flowOf(0, 2, "a"), 1)
	hintEnqueue(t, s, "b", flowOf(1, 2, "b"), 1)
	hintEnqueue(t, s, "c", flowOf(1, 2, "c"), 1)
	hintEnqueue(t, s, "d", flowOf(0, 2, "d"), 1)
	cs := claimAll(t, s, 1, 4)
	if got := hints(s); len(got) != 4 {
		t.Fatalf("after 4 claims the map holds %v, want the 4 events", got)
	}
	rs, err := s.SettleBatch(ctx, []queue.SettleItem{
		{EventID: "a", Generation: cs["a"].Generation + 1, Result: queue.Result{OK: true}},
		{EventID: "b", Generation: cs["b"].Generation, Result: queue.Result{Reason: ""}},
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != queue.Stale || !errors.Is(rs[1].Err, queue.ErrInvalid) {
		t.Fatalf("settles = %+v; want a stale, b ErrInvalid", rs)
	}
	if _, err := s.Settle(ctx, "c", cs["c"].Generation, queue.Result{Reason: ""}, 2); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("Settle(c, no reason) = %v, want ErrInvalid", err)
	}
	// The shard no longer has d (as after a prune of an event another
	// process settled): the settle answers ErrNotFound.
	s.mu.Lock()
	s.claimed.put("d", 1, cs["d"].LeaseUntil)
	s.mu.Unlock()
	if _, err := s.Settle(ctx, "d", cs["d"].Generation, queue.Result{OK: true}, 2); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("Settle(d) in a shard without it = %v, want ErrNotFound", err)
	}
	if got := hints(s); len(got) != 0 {
		t.Errorf("after an answer for every claim the map holds %v, want nothing", got)
	}
}

// TestExtendLostForgets: an extension answered stale or expired (the
// lease is lost; §7.2: the worker stops and never settles it) drops the
// entry, alone and in a batch; a claim extended in a batch keeps its
// entry past its first lease.
func TestExtendLostForgets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := hintSet(t, 2)
	hintEnqueue(t, s, "a", flowOf(0, 2, "a"), 1)
	hintEnqueue(t, s, "b", flowOf(1, 2, "b"), 1)
	hintEnqueue(t, s, "c", flowOf(1, 2, "c"), 1)
	cs := claimAll(t, s, 1, 3)
	if rs, err := s.ExtendBatch(ctx, []queue.ExtendItem{{EventID: "c", Generation: cs["c"].Generation}}, 2); err != nil || rs[0].Outcome != queue.Extended {
		t.Fatalf("ExtendBatch(c) = %+v, %v; want extended", rs, err)
	}
	lease := cs["a"].LeaseUntil
	rs, err := s.ExtendBatch(ctx, []queue.ExtendItem{
		{EventID: "a", Generation: cs["a"].Generation},
		{EventID: "b", Generation: cs["b"].Generation + 1},
	}, lease)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != queue.Expired || rs[1].Outcome != queue.Stale {
		t.Fatalf("extends = %+v; want a expired, b stale", rs)
	}
	if got := hints(s); len(got) != 1 || got[0] != "c" {
		t.Errorf("after a and b lost their leases the map holds %v, want c only", got)
	}
	if o, err := s.Extend(ctx, "c", cs["c"].Generation, lease+queue.Lease); err != nil || o != queue.Expired {
		t.Fatalf("Extend(c) after its lease = %v, %v; want expired", o, err)
	}
	if got := hints(s); len(got) != 0 {
		t.Errorf("after every lease was lost the map holds %v, want nothing", got)
	}
}

// TestUnsettledClaimsDropped: claims this Store never settles (a relay
// that abandons them at shutdown, claims a failing shard kept from the
// caller) leave no entry for ever: a relay claiming two events a tick and
// settling none keeps the entries of the claims of the last two leases
// only, whatever the number of claims before.
func TestUnsettledClaimsDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := hintSet(t, 2)
	const per, ticks = 2, 60
	window := clock.Tick(2 * (queue.Lease + 1))
	last := map[string]clock.Tick{} // the tick of each event's latest claim
	for now := clock.Tick(1); now <= ticks; now++ {
		for k := 0; k < per; k++ {
			id := fmt.Sprintf("e%d-%d", now, k)
			hintEnqueue(t, s, id, "flow-"+id, now)
		}
		cs, err := s.ClaimBatch(ctx, now, per)
		if err != nil || len(cs) == 0 {
			t.Fatalf("ClaimBatch(%d) = %+v, %v", now, cs, err)
		}
		for _, c := range cs {
			last[c.EventID] = now
		}
		got := hints(s)
		for _, id := range got {
			if last[id] <= now-window {
				t.Fatalf("at tick %d the map (%d entries of %d events claimed) still holds %s, last claimed at tick %d with a lease of %d and never settled",
					now, len(got), len(last), id, last[id], queue.Lease)
			}
		}
	}
}

// TestRoutesAfterDrop: a dropped entry is only a lost hint: a settle or
// an extension of a claim whose entry went still reaches the event's shard
// (the Store asks each shard), for a claim still live and for one whose
// lease ran out.
func TestRoutesAfterDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := hintSet(t, 2)
	x, y := flowOf(1, 2, "x"), flowOf(1, 2, "y")
	hintEnqueue(t, s, "x", x, 1)
	hintEnqueue(t, s, "y", y, 1)
	cs := claimAll(t, s, 1, 2)
	// x's entry goes with the refused item; its claim is still live.
	rs, err := s.SettleBatch(ctx, []queue.SettleItem{{EventID: "x", Generation: cs["x"].Generation, Result: queue.Result{}}}, 2)
	if err != nil || !errors.Is(rs[0].Err, queue.ErrInvalid) {
		t.Fatalf("settle of x with no reason = %+v, %v; want ErrInvalid", rs, err)
	}
	if got := hints(s); len(got) != 1 || got[0] != "y" {
		t.Fatalf("after x's refused item the map holds %v, want y only", got)
	}
	if o, err := s.Extend(ctx, "x", cs["x"].Generation, 3); err != nil || o != queue.Extended {
		t.Errorf("Extend(x) without its entry = %v, %v; want extended", o, err)
	}
	rs, err = s.SettleBatch(ctx, []queue.SettleItem{{EventID: "x", Generation: cs["x"].Generation, Result: queue.Result{OK: true}}}, 3)
	if err != nil || rs[0].Err != nil || rs[0].Outcome != queue.Acked {
		t.Errorf("SettleBatch(x) without its entry = %+v, %v; want acked", rs, err)
	}
	// y is never settled: later calls past its lease drop its entry; its
	// late settle then still reaches shard 1, which answers expired (shard
	// 0 would answer ErrNotFound).
	late := cs["y"].LeaseUntil + 3*queue.Lease
	for now := clock.Tick(4); now <= late; now++ {
		if _, err := s.SettleBatch(ctx, nil, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range hints(s) {
		if id == "y" {
			t.Fatalf("at tick %d the map still holds y, whose lease ended at %d", late, cs["y"].LeaseUntil)
		}
	}
	if o, err := s.Settle(ctx, "y", cs["y"].Generation, queue.Result{OK: true}, late); err != nil || o != queue.Expired {
		t.Errorf("Settle(y) after its entry went = %v, %v; want expired", o, err)
	}
	for _, id := range []string{"x", "y"} {
		if e, err := s.shards[1].Event(ctx, id); err != nil || e.Generation < cs[id].Generation {
			t.Errorf("shard 1's %s = %+v, %v", id, e, err)
		}
	}
}

// ids lists the events recorded, sorted (for tests).
func (m *claimMap) ids() []string {
	var out []string
	for id := range m.cur {
		out = append(out, id)
	}
	for id := range m.old {
		if _, ok := m.cur[id]; !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// TestClaimMapClockSetBack: after a clock set back below the last sweep
// (each shard checks only its own mark, so another shard accepts the
// tick), the generations' lease ends bound nothing: the map drops them, and
// claims made from then on go as usual instead of piling up until the
// clock passes the old ends again.
func TestClaimMapClockSetBack(t *testing.T) {
	var m claimMap
	for k := range 10 {
		m.sweep(1000)
		m.put(fmt.Sprintf("a%d", k), 0, 1005)
	}
	m.sweep(500)
	for now := clock.Tick(500); now < 600; now++ {
		m.sweep(now)
		m.put(fmt.Sprintf("b%d", now), 1, now+5)
	}
	if n := len(m.cur) + len(m.old); n > 12 {
		t.Fatalf("after 100 ticks of claims with leases of 5, set back from 1000 to 500, the map holds %d entries, want about two leases' worth", n)
	}
	if _, ok := m.get("a0"); ok {
		t.Fatal("an entry from before the clock was set back is still there")
	}
}
