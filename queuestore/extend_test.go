package queuestore

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// §7.2: Extend renews the lease to now + Lease and changes nothing else of
// the event (attempts, generation, ticket) or its flow (served); the flow's
// ready_at moves with the lease, so the take-over waits for the new lease.
func TestExtend_7_2_RenewsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	c := mustClaim(t, s, 0) // lease 5
	before := snap(t, s)
	o, err := s.Extend(ctx, "a1", c.Generation, 4)
	if err != nil || o != Extended {
		t.Fatalf("Extend() = %q, %v; want extended", o, err)
	}
	after := snap(t, s)
	want := before
	want.ClockMark = 4
	want.Events = append([]SnapshotEvent(nil), before.Events...)
	want.Events[0].LeaseUntil = 4 + Lease
	want.Flows = append([]SnapshotFlow(nil), before.Flows...)
	nine := 4 + Lease
	want.Flows[0].ReadyAt = &nine
	if jsonOf(after) != jsonOf(want) {
		t.Fatalf("after Extend:\n%s\nwant\n%s", jsonOf(after), jsonOf(want))
	}
	// At the old lease end nobody can take it over; at the new one they can.
	if _, ok := claim(t, s, 5); ok {
		t.Fatalf("claimed at the old lease end")
	}
	if o := settle(t, s, "a1", c.Generation, success, 8); o != Acked {
		t.Fatalf("settle within the extended lease = %s, want acked", o)
	}
	enqueue(t, s, "b1", "b", "x", 10)
	c = mustClaim(t, s, 10)
	if o, _ := s.Extend(ctx, "b1", c.Generation, 12); o != Extended {
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
func TestExtend_7_2_StaleAndExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "p1", "p", "x", 0)
	c := mustClaim(t, s, 0)
	if c.EventID != "a1" {
		t.Fatalf("claimed %s", c.EventID)
	}
	check := func(what, id string, gen int64, now int64, want Outcome) {
		t.Helper()
		before := snap(t, s)
		o, err := s.Extend(ctx, id, gen, clock.Tick(now))
		if err != nil || o != want {
			t.Fatalf("%s: Extend() = %q, %v; want %q", what, o, err, want)
		}
		assertOnlyMark(t, what, before, snap(t, s), clock.Tick(now))
	}
	check("other generation", "a1", c.Generation+1, 1, Stale)
	check("generation 0 of a pending event", "p1", 0, 1, Stale)
	// Generation first, then state, then the lease: an old generation at
	// an expired tick is stale.
	check("old generation after the lease", "a1", 0, 5, Stale)
	check("at lease_until", "a1", c.Generation, 5, Expired)
	check("after lease_until", "a1", c.Generation, 6, Expired)
	// Acked: not in flight.
	enqueue(t, s, "b1", "b", "x", 6)
	var b Claim
	for {
		b = mustClaim(t, s, 6)
		if b.EventID == "b1" {
			break
		}
	}
	settle(t, s, "b1", b.Generation, success, 6)
	check("acked", "b1", b.Generation, 6, Stale)
}

// Bad input is ErrInvalid, an unknown event ErrNotFound; nothing changes.
func TestExtend_7_2_BadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 3)
	before := snap(t, s)
	_, err := s.Extend(ctx, "", 1, 3)
	wantErr(t, "Extend(empty ID)", err, ErrInvalid)
	_, err = s.Extend(ctx, " a1", 1, 3)
	wantErr(t, "Extend(ID with a leading space)", err, ErrInvalid)
	_, err = s.Extend(ctx, "a1", -1, 3)
	wantErr(t, "Extend(negative generation)", err, ErrInvalid)
	_, err = s.Extend(ctx, "a1", -1, 0)
	wantErr(t, "Extend(bad input at a past tick)", err, ErrInvalid)
	_, err = s.Extend(ctx, "nope", 1, 3)
	wantErr(t, "Extend(unknown)", err, ErrNotFound)
	_, err = s.Extend(ctx, "a1", 1, 2)
	wantErr(t, "Extend(past tick)", err, ErrTimeRegression)
	assertUnchanged(t, "refused Extend", before, snap(t, s))
}

// ExtendBatch: one transaction; each item gets what Extend would give it
// in order; bad items get their own Err; an event named twice is extended
// twice to the same lease; an empty batch records now; a tick error refuses
// the whole batch.
func TestExtendBatch_7_2_EachItemAsExtend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	for _, f := range []string{"a", "b", "c"} {
		enqueue(t, s, f+"1", f, "x", 0)
	}
	cs, err := s.ClaimBatch(ctx, 0, 3)
	if err != nil || len(cs) != 3 {
		t.Fatalf("ClaimBatch() = %d, %v", len(cs), err)
	}
	items := []ExtendItem{
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
	want := []Outcome{Extended, Stale, "", "", Extended, Extended}
	for i, r := range res {
		if r.Outcome != want[i] {
			t.Errorf("item %d: %q, %v; want %q", i, r.Outcome, r.Err, want[i])
		}
	}
	wantErr(t, "item 2", res[2].Err, ErrInvalid)
	wantErr(t, "item 3", res[3].Err, ErrNotFound)
	for _, id := range []string{"a1", "c1"} {
		if e := event(t, s, id); e.LeaseUntil != 3+Lease {
			t.Fatalf("%s lease = %d, want %d", id, e.LeaseUntil, 3+Lease)
		}
	}
	if e := event(t, s, "b1"); e.LeaseUntil != Lease {
		t.Fatalf("stale b1 lease = %d, want %d unchanged", e.LeaseUntil, Lease)
	}
	before := snap(t, s)
	_, err = s.ExtendBatch(ctx, items, 2)
	wantErr(t, "ExtendBatch(past tick)", err, ErrTimeRegression)
	assertUnchanged(t, "refused ExtendBatch", before, snap(t, s))
	if res, err := s.ExtendBatch(ctx, nil, 4); err != nil || len(res) != 0 {
		t.Fatalf("ExtendBatch(empty) = %v, %v", res, err)
	}
	assertOnlyMark(t, "empty ExtendBatch", before, snap(t, s), 4)
}
