package conformance

import (
	"context"
	"github.com/fairrelay/fairrelay/queue"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// §7.2: Extend renews the lease to now + queue.Lease and changes nothing else of
// the event (attempts, generation, ticket) or its flow (served); the flow's
// ready_at moves with the lease, so the take-over waits for the new lease.
func queueExtend_7_2_RenewsLease(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	c := mustClaim(t, s, 0) // lease 5
	before := snap(t, s)
	o, err := s.Extend(ctx, "a1", c.Generation, 4)
	if err != nil || o != queue.Extended {
		t.Fatalf("Extend() = %q, %v; want extended", o, err)
	}
	after := snap(t, s)
	want := before
	want.ClockMark = 4
	want.Events = append([]queue.SnapshotEvent(nil), before.Events...)
	want.Events[0].LeaseUntil = 4 + queue.Lease
	want.Flows = append([]queue.SnapshotFlow(nil), before.Flows...)
	nine := 4 + queue.Lease
	want.Flows[0].ReadyAt = &nine
	if jsonOf(after) != jsonOf(want) {
		t.Fatalf("after Extend:\n%s\nwant\n%s", jsonOf(after), jsonOf(want))
	}
	// At the old lease end nobody can take it over; at the new one they can.
	if _, ok := claim(t, s, 5); ok {
		t.Fatalf("claimed at the old lease end")
	}
	if o := settle(t, s, "a1", c.Generation, success, 8); o != queue.Acked {
		t.Fatalf("settle within the extended lease = %s, want acked", o)
	}
	enqueue(t, s, "b1", "b", "x", 10)
	c = mustClaim(t, s, 10)
	if o, _ := s.Extend(ctx, "b1", c.Generation, 12); o != queue.Extended {
		t.Fatalf("Extend b1 = %s", o)
	}
	if _, ok := claim(t, s, 16); ok {
		t.Fatalf("claimed before the extended lease 17 ended")
	}
	if tk := mustClaim(t, s, 17); tk.EventID != "b1" || tk.Attempts != 2 {
		t.Fatalf("take-over at the extended lease end = %s", jsonOf(tk))
	}
}

// §7.2: the checks are settle's checks 1-3 in the same order: another
// generation is stale, an event not in flight is stale, now >= lease_until
// is expired; each changes nothing but the clock mark.
func queueExtend_7_2_StaleAndExpired(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "p1", "p", "x", 0)
	c := mustClaim(t, s, 0)
	if c.EventID != "a1" {
		t.Fatalf("claimed %s", c.EventID)
	}
	check := func(what, id string, gen int64, now int64, want queue.Outcome) {
		t.Helper()
		before := snap(t, s)
		o, err := s.Extend(ctx, id, gen, clock.Tick(now))
		if err != nil || o != want {
			t.Fatalf("%s: Extend() = %q, %v; want %q", what, o, err, want)
		}
		assertOnlyMark(t, what, before, snap(t, s), clock.Tick(now))
	}
	check("other generation", "a1", c.Generation+1, 1, queue.Stale)
	check("generation 0 of a pending event", "p1", 0, 1, queue.Stale)
	// Generation first, then state, then the lease: an old generation at
	// an expired tick is stale.
	check("old generation after the lease", "a1", 0, 5, queue.Stale)
	check("at lease_until", "a1", c.Generation, 5, queue.Expired)
	check("after lease_until", "a1", c.Generation, 6, queue.Expired)
	// queue.Acked: not in flight.
	enqueue(t, s, "b1", "b", "x", 6)
	var b queue.Claim
	for {
		b = mustClaim(t, s, 6)
		if b.EventID == "b1" {
			break
		}
	}
	settle(t, s, "b1", b.Generation, success, 6)
	check("acked", "b1", b.Generation, 6, queue.Stale)
}

// Bad input is queue.ErrInvalid, an unknown event queue.ErrNotFound; nothing changes.
func queueExtend_7_2_BadInput(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 3)
	before := snap(t, s)
	_, err := s.Extend(ctx, "", 1, 3)
	wantErr(t, "Extend(empty ID)", err, queue.ErrInvalid)
	_, err = s.Extend(ctx, " a1", 1, 3)
	wantErr(t, "Extend(ID with a leading space)", err, queue.ErrInvalid)
	_, err = s.Extend(ctx, "a1", -1, 3)
	wantErr(t, "Extend(negative generation)", err, queue.ErrInvalid)
	_, err = s.Extend(ctx, "a1", -1, 0)
	wantErr(t, "Extend(bad input at a past tick)", err, queue.ErrInvalid)
	_, err = s.Extend(ctx, "nope", 1, 3)
	wantErr(t, "Extend(unknown)", err, queue.ErrNotFound)
	_, err = s.Extend(ctx, "a1", 1, 2)
	wantErr(t, "Extend(past tick)", err, queue.ErrTimeRegression)
	assertUnchanged(t, "refused Extend", before, snap(t, s))
}

// ExtendBatch: one transaction; each item gets what Extend would give it
// in order, an extended item with its new lease end; bad items get their
// own Err; an event named twice is extended twice to the same lease; an
// empty batch records now; a tick error refuses the whole batch; the lease
// is the policy's in force at the extension.
func queueExtendBatch_7_2_EachItemAsExtend(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	for _, f := range []string{"a", "b", "c"} {
		enqueue(t, s, f+"1", f, "x", 0)
	}
	cs, err := s.ClaimBatch(ctx, 0, 3)
	if err != nil || len(cs) != 3 {
		t.Fatalf("ClaimBatch() = %d, %v", len(cs), err)
	}
	items := []queue.ExtendItem{
		{EventID: "a1", Generation: cs[0].Generation},
		{EventID: "b1", Generation: cs[1].Generation + 1},
		{EventID: "", Generation: 1},
		{EventID: "zz", Generation: 1},
		{EventID: "a1", Generation: cs[0].Generation},
		{EventID: "c1", Generation: cs[2].Generation},
	}
	res, err := s.ExtendBatch(ctx, items, 3)
	if err != nil {
		t.Fatalf("ExtendBatch() error = %v", err)
	}
	want := []queue.Outcome{queue.Extended, queue.Stale, "", "", queue.Extended, queue.Extended}
	for i, r := range res {
		var lease clock.Tick
		if want[i] == queue.Extended {
			lease = 3 + queue.Lease
		}
		if r.Outcome != want[i] || r.LeaseUntil != lease {
			t.Errorf("item %d: %q until %d, %v; want %q until %d", i, r.Outcome, r.LeaseUntil, r.Err, want[i], lease)
		}
	}
	wantErr(t, "item 2", res[2].Err, queue.ErrInvalid)
	wantErr(t, "item 3", res[3].Err, queue.ErrNotFound)
	for _, id := range []string{"a1", "c1"} {
		if e := event(t, s, id); e.LeaseUntil != 3+queue.Lease {
			t.Fatalf("%s lease = %d, want %d", id, e.LeaseUntil, 3+queue.Lease)
		}
	}
	if e := event(t, s, "b1"); e.LeaseUntil != queue.Lease {
		t.Fatalf("stale b1 lease = %d, want %d unchanged", e.LeaseUntil, queue.Lease)
	}
	before := snap(t, s)
	_, err = s.ExtendBatch(ctx, items, 2)
	wantErr(t, "ExtendBatch(past tick)", err, queue.ErrTimeRegression)
	assertUnchanged(t, "refused ExtendBatch", before, snap(t, s))
	if res, err := s.ExtendBatch(ctx, nil, 4); err != nil || len(res) != 0 {
		t.Fatalf("ExtendBatch(empty) = %v, %v", res, err)
	}
	assertOnlyMark(t, "empty ExtendBatch", before, snap(t, s), 4)

	// The lease of the policy in force at the extension, not at the claim:
	// the result says where the lease now ends.
	p := queue.DefaultPolicy()
	p.Lease = 7
	if err := s.SetPolicy(ctx, p, "shorter leases", 5); err != nil {
		t.Fatalf("SetPolicy() error = %v", err)
	}
	res, err = s.ExtendBatch(ctx, []queue.ExtendItem{{EventID: "c1", Generation: cs[2].Generation}}, 6)
	if err != nil || len(res) != 1 || res[0].Outcome != queue.Extended || res[0].LeaseUntil != 13 {
		t.Fatalf("ExtendBatch(after SetPolicy) = %+v, %v; want extended until 13", res, err)
	}
	if e := event(t, s, "c1"); e.LeaseUntil != 13 {
		t.Fatalf("c1 lease = %d, want 13", e.LeaseUntil)
	}
}
