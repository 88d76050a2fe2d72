package pgqueuestore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
)

// twinStores opens a store with the one-call path, whose calls c counts,
// and one on the general path only, both with opts.
func twinStores(t *testing.T, c *pgtest.CallCounter, opts ...Option) (one, general *Store) {
	t.Helper()
	one = openTraced(t, c, 0, opts...)
	general, _, _ = open(t, append([]Option{withGeneralPath()}, opts...)...)
	return one, general
}

// TestOneCall_SameAsTheGeneralPath: random sequences of enqueues (some
// scheduled, some in the caller's transaction: arrivals), claims, settles
// (acks, failures, stale generations, an event twice), settle-and-claims, pauses and
// resumes, at ticks that move on, jump past leases or go back, run on a
// store that takes the one-call path and on one that never does. Both
// answer every call the same (claims, outcomes, errors) and leave the same
// snapshot and flows after every step, under the default policy and under
// one whose short lease and two attempts make take-overs and used-up
// take-overs common; and the one-call path was taken, and left, in each.
func TestOneCall_SameAsTheGeneralPath(t *testing.T) {
	short := queue.DefaultPolicy()
	short.Lease, short.MaxAttempts = 5, 2
	for _, pc := range []struct {
		name string
		opts []Option
	}{
		{"default policy", nil},
		{"lease 5, two attempts", []Option{WithPolicy(short)}},
	} {
		t.Run(pc.name, func(t *testing.T) {
			c := pgtest.NewCallCounter("settle_claim")
			for seed := uint64(1); seed <= 8; seed++ {
				one, general := twinStores(t, c, pc.opts...)
				runTwin(t, seed, one, general)
			}
			if c.Taken() == 0 || c.Taken() == c.Calls() {
				t.Fatalf("settle_claim called %d times, %d without falling back: want both paths", c.Calls(), c.Taken())
			}
			t.Logf("settle_claim called %d times, %d without falling back", c.Calls(), c.Taken())
		})
	}
}

// runTwin runs one random sequence on a and b, comparing as it goes.
func runTwin(t *testing.T, seed uint64, a, b *Store) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 11))
	now := clock.Tick(1000)
	var held []queue.Claim
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format+"\nsteps:\n  %s", append(append([]any{seed}, args...), strings.Join(log, "\n  "))...)
	}
	same := func(what string, x, y any, ex, ey error) {
		t.Helper()
		if fmt.Sprint(ex) != fmt.Sprint(ey) || !reflect.DeepEqual(x, y) {
			fail("%s: one call %+v, %v; general path %+v, %v", what, x, ex, y, ey)
		}
	}
	result := func() queue.Result {
		switch k := r.IntN(10); {
		case k < 7:
			return queue.Result{OK: true}
		case k < 9:
			return queue.Result{Reason: "unavailable", Error: "503"}
		default:
			return queue.Result{Permanent: true, Reason: "rejected"}
		}
	}
	items := func() []queue.SettleItem {
		var its []queue.SettleItem
		for _, c := range held {
			if r.IntN(3) == 0 {
				continue
			}
			gen := c.Generation
			if r.IntN(10) == 0 {
				gen++ // a stale claim
			}
			its = append(its, queue.SettleItem{EventID: c.EventID, Generation: gen, Result: result()})
		}
		if len(its) > 0 && r.IntN(6) == 0 {
			again := its[r.IntN(len(its))] // the same event twice
			again.Result = queue.Result{OK: true}
			its = append(its, again)
		}
		return its
	}
	n := 0
	for step := range 60 {
		switch k := r.IntN(20); {
		case k < 2:
			now += clock.Tick(r.IntN(12)) // past short leases
		case k < 3:
			now -= clock.Tick(r.IntN(3)) // a regression, or not
		default:
			now += clock.Tick(r.IntN(2))
		}
		var x, y any
		var ex, ey error
		switch op := r.IntN(9); op {
		case 0, 1:
			var es []queue.Event
			for range 1 + r.IntN(4) {
				n++
				e := queue.Event{ID: fmt.Sprintf("e%d", n), Flow: fmt.Sprintf("f%d", r.IntN(5)), Body: []byte("b")}
				if r.IntN(5) == 0 {
					e.NotBefore = now + clock.Tick(r.IntN(8))
				}
				es = append(es, e)
			}
			log = append(log, fmt.Sprintf("%d: EnqueueBatch %v at %d", step, es, now))
			x, ex = a.EnqueueBatch(ctx, es, now)
			y, ey = b.EnqueueBatch(ctx, es, now)
		case 2:
			n++
			e := queue.Event{ID: fmt.Sprintf("e%d", n), Flow: fmt.Sprintf("f%d", r.IntN(5)), Body: []byte("t")}
			log = append(log, fmt.Sprintf("%d: EnqueueTx %v at %d", step, e, now))
			x, ex = enqueueInTx(ctx, a, e, now)
			y, ey = enqueueInTx(ctx, b, e, now)
		case 3:
			log = append(log, fmt.Sprintf("%d: Claim at %d", step, now))
			ca, oka, ea := a.Claim(ctx, now)
			cb, okb, eb := b.Claim(ctx, now)
			same("Claim", []any{ca, oka}, []any{cb, okb}, ea, eb)
			if oka {
				held = append(held, ca)
			}
			continue
		case 4:
			k := 1 + r.IntN(4)
			log = append(log, fmt.Sprintf("%d: ClaimBatch %d at %d", step, k, now))
			ca, ea := a.ClaimBatch(ctx, now, k)
			cb, eb := b.ClaimBatch(ctx, now, k)
			same("ClaimBatch", ca, cb, ea, eb)
			held = append(held, ca...)
			continue
		case 5:
			if len(held) == 0 {
				continue
			}
			c := held[r.IntN(len(held))]
			res := result()
			log = append(log, fmt.Sprintf("%d: Settle %s gen %d %+v at %d", step, c.EventID, c.Generation, res, now))
			x, ex = a.Settle(ctx, c.EventID, c.Generation, res, now)
			y, ey = b.Settle(ctx, c.EventID, c.Generation, res, now)
		case 6:
			its := items()
			log = append(log, fmt.Sprintf("%d: SettleBatch %+v at %d", step, its, now))
			x, ex = a.SettleBatch(ctx, its, now)
			y, ey = b.SettleBatch(ctx, its, now)
		case 7:
			its, k := items(), r.IntN(4)
			log = append(log, fmt.Sprintf("%d: SettleClaimBatch %+v, %d at %d", step, its, k, now))
			ra, ca, ea := a.SettleClaimBatch(ctx, its, now, k)
			rb, cb, eb := b.SettleClaimBatch(ctx, its, now, k)
			same("SettleClaimBatch", []any{ra, ca}, []any{rb, cb}, ea, eb)
			held = append(held, ca...)
			continue
		case 8:
			f := fmt.Sprintf("f%d", r.IntN(5))
			if r.IntN(2) == 0 {
				log = append(log, fmt.Sprintf("%d: PauseFlow %s at %d", step, f, now))
				ex, ey = a.PauseFlow(ctx, f, "hold", now), b.PauseFlow(ctx, f, "hold", now)
			} else {
				log = append(log, fmt.Sprintf("%d: ResumeFlow %s at %d", step, f, now))
				ex, ey = a.ResumeFlow(ctx, f, "go", now), b.ResumeFlow(ctx, f, "go", now)
			}
		}
		same(log[len(log)-1], x, y, ex, ey)
		if d := stateDiff(t, a, b); d != "" {
			fail("after step %d (a: one call, b: general path) %s", step, d)
		}
	}
}

// stateDiff compares what two stores hold (Snapshot and Flows): "" when
// both are the same, else which differs, with both sides.
func stateDiff(t *testing.T, a, b *Store) string {
	t.Helper()
	ctx := context.Background()
	sa, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa, sb) {
		return fmt.Sprintf("snapshots differ:\na %+v\nb %+v", sa, sb)
	}
	fa, err := a.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := b.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fa, fb) {
		return fmt.Sprintf("flows differ:\na %+v\nb %+v", fa, fb)
	}
	return ""
}

// enqueueInTx enqueues e with EnqueueTx in a transaction of s's pool,
// committed: the event arrives for the next write turn to promote.
func enqueueInTx(ctx context.Context, s *Store, e queue.Event, now clock.Tick) (queue.Enqueued, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return queue.Enqueued{}, err
	}
	defer tx.Rollback(ctx)
	out, err := s.EnqueueTx(ctx, tx, e, now)
	if err != nil {
		return out, err
	}
	return out, tx.Commit(ctx)
}

// Two in-flight events of one flow (made by hand: the contract never
// leaves a flow so) settled in one batch: each item must see the other's
// writes, which the one-call path leaves to the general path; the answers
// and rows are the general path's.
func TestOneCall_TwoItemsOfOneFlow(t *testing.T) {
	ctx := context.Background()
	c := pgtest.NewCallCounter("settle_claim")
	one, general := twinStores(t, c)
	var rows []string
	for _, s := range []*Store{one, general} {
		es := []queue.Event{{ID: "f1", Flow: "f", Body: []byte("1")}, {ID: "f2", Flow: "f", Body: []byte("2")}, {ID: "g1", Flow: "g", Body: []byte("3")}}
		if _, err := s.EnqueueBatch(ctx, es, 1); err != nil {
			t.Fatal(err)
		}
		if cs, err := s.ClaimBatch(ctx, 2, 2); err != nil || len(cs) != 2 {
			t.Fatalf("ClaimBatch = %d, %v", len(cs), err)
		}
		execSQL(t, pgtest.URL(), s.q(`UPDATE {s}.events SET state = 'inflight', generation = 1, attempts = 1,
    lifetime_attempts = 1, lease_until = 100000, ticket = 99 WHERE id = 'f2'`))
		items := []queue.SettleItem{
			{EventID: "f2", Generation: 1, Result: queue.Result{OK: true}},
			{EventID: "f1", Generation: 1, Result: queue.Result{OK: true}},
			{EventID: "g1", Generation: 1, Result: queue.Result{OK: true}},
		}
		out, err := s.SettleBatch(ctx, items, 3)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal([]any{out, snap})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, string(j))
	}
	if rows[0] != rows[1] {
		t.Fatalf("one call:\n%s\ngeneral path:\n%s", rows[0], rows[1])
	}
	if c.Calls() == 0 || c.Taken() != 1 { // the ClaimBatch only
		t.Fatalf("settle_claim called %d times, %d without falling back; want the ClaimBatch's call alone taken", c.Calls(), c.Taken())
	}
}

// Under the rotation the one-call path always falls back: the store learns
// so from its first call and stops calling settle_claim until a write on
// the general path reads the policy back at MinServed; a store with
// destinations stops calling it for good. Every call is still answered.
func TestOneCall_SkippedWhileItCannotApply(t *testing.T) {
	ctx := context.Background()
	c := pgtest.NewCallCounter("settle_claim")
	s := openTraced(t, c, 0, WithPolicy(rotationPolicy()))
	if _, err := s.EnqueueBatch(ctx, []queue.Event{{ID: "a1", Flow: "a", Body: []byte("x")}, {ID: "a2", Flow: "a", Body: []byte("x")}}, 1); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	claimAck := func(now clock.Tick) {
		t.Helper()
		cl, ok, err := s.Claim(ctx, now)
		if err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		if o, err := s.Settle(ctx, cl.EventID, cl.Generation, queue.Result{OK: true}, now); err != nil || o != queue.Acked {
			t.Fatalf("Settle = %v, %v", o, err)
		}
	}
	claimAck(2)
	if got := c.Calls(); got != 0 {
		t.Fatalf("under the rotation, after a general-path enqueue: settle_claim called %d times, want 0", got)
	}
	p := queue.DefaultPolicy()
	if err := s.SetPolicy(ctx, p, "back to min_served", 3); err != nil {
		t.Fatal(err)
	}
	// SetPolicy read the old policy; the enqueue after it, on the general
	// path, reads MinServed, so the claim and the settle take one call each.
	if _, err := s.EnqueueBatch(ctx, []queue.Event{{ID: "b1", Flow: "b", Body: []byte("x")}, {ID: "b2", Flow: "b", Body: []byte("x")}}, 4); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	claimAck(5)
	if c.Calls() != 2 || c.Taken() != 2 {
		t.Fatalf("under MinServed again: settle_claim called %d times, %d taken; want 2 and 2", c.Calls(), c.Taken())
	}
	if err := s.PutDestination(ctx, queue.Destination{Name: "d", URL: "http://127.0.0.1:1/x", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, "add", 6); err != nil {
		t.Fatal(err)
	}
	// The store that added the destination knows; another Store on the
	// schema (another process) learns it from its first call.
	other, err := OpenPool(ctx, s.pool, WithSchema(s.schema))
	if err != nil {
		t.Fatal(err)
	}
	c.Reset()
	claimAck(7)
	if c.Calls() != 0 {
		t.Fatalf("with a destination it added: settle_claim called %d times, want 0", c.Calls())
	}
	if o, err := other.Settle(ctx, "b1", 1, queue.Result{OK: true}, 8); err != nil || o != queue.Stale {
		t.Fatalf("Settle = %v, %v", o, err)
	}
	if _, err := other.ClaimBatch(ctx, 9, 1); err != nil {
		t.Fatal(err)
	}
	if c.Calls() != 1 || c.Taken() != 0 {
		t.Fatalf("another store, with a destination: settle_claim called %d times, %d taken; want 1 (the first, which falls back) and 0", c.Calls(), c.Taken())
	}
}
