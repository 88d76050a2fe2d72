package shard_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

// TestOfPinned pins shard.Of: a flow's shard must never change, or a
// queue's flows would be looked for in the wrong shard. The values were
// computed by an independent FNV-1a 64 implementation (Python).
func TestOfPinned(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flow string
		n    int
		want int
	}{
		{"orders/1", 2, 0}, {"orders/1", 3, 1}, {"orders/1", 16, 8},
		{"tenant-42", 2, 0}, {"tenant-42", 3, 1}, {"tenant-42", 16, 2},
		{"a", 16, 12}, {"", 2, 1}, {"", 3, 2}, {"", 16, 5},
	} {
		if got := shard.Of(c.flow, c.n); got != c.want {
			t.Errorf("Of(%q, %d) = %d, want %d", c.flow, c.n, got, c.want)
		}
	}
}

func TestOpenRefusesWrongLabels(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		shards := b.make(t, 3, nil)
		if _, err := shard.Open(ctx, shards[:2], shard.Options{}); !errors.Is(err, queue.ErrShardLabel) {
			t.Errorf("Open(unlabeled) error = %v, want ErrShardLabel", err)
		}
		if _, err := shard.Open(ctx, nil, shard.Options{}); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("Open(no shards) error = %v, want ErrInvalid", err)
		}
		// A shard with a flow is not part of a fresh set; nothing is labeled.
		enqueue(t, shards[2], "x", "f", 1)
		if err := shard.Create(ctx, shards, "split", 1); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("Create(a shard with a flow) error = %v, want ErrInvalid", err)
		}
		for i, sh := range shards {
			if _, ok, err := shard.Label(ctx, sh); ok || err != nil {
				t.Errorf("shard %d labeled after a refused Create (%v, %v)", i, ok, err)
			}
		}
		if err := shard.Create(ctx, shards[:2], "split", 1); err != nil {
			t.Fatal(err)
		}
		if err := shard.Create(ctx, shards[:2], "again", 2); !errors.Is(err, queue.ErrShardLabel) {
			t.Errorf("Create(labeled) error = %v, want ErrShardLabel", err)
		}
		if _, err := shard.Open(ctx, shards[:2], shard.Options{}); err != nil {
			t.Fatalf("Open(the set) error = %v", err)
		}
		// A shard of a set of another size, one missing, the wrong order.
		other := b.make(t, 1, nil)[0]
		if err := other.(queue.ShardMember).SetShardLabel(ctx, queue.ShardLabel{Index: 1, Count: 2, Epoch: 1}, "a later set", 1); err != nil {
			t.Fatal(err)
		}
		for name, set := range map[string][]queue.Store{
			"another N":     {shards[0], shards[1], shards[2]},
			"a shard short": {shards[0]},
			"swapped":       {shards[1], shards[0]},
			"another epoch": {shards[0], other},
			"unlabeled":     {shards[0], shards[2]},
		} {
			_, err := shard.Open(ctx, set, shard.Options{})
			if !errors.Is(err, queue.ErrShardLabel) {
				t.Errorf("%s: Open error = %v, want ErrShardLabel", name, err)
			} else {
				t.Logf("%s: %v", name, err)
			}
		}
	})
}

func TestRoutingAndBatches(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, shards := newSet(t, b, 2, nil)
		var evs []queue.Event
		for k := 0; k < 20; k++ {
			f := fmt.Sprintf("flow-%d", k)
			evs = append(evs, queue.Event{ID: fmt.Sprintf("e%d", k), Flow: f, Body: []byte("1")})
		}
		rs, err := s.EnqueueBatch(ctx, evs, 2)
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range rs {
			if r.Seq != 1 || r.Duplicate {
				t.Errorf("event %d: %+v", k, r)
			}
		}
		for _, e := range evs {
			i := shard.Of(e.Flow, 2)
			if _, err := shards[i].Event(ctx, e.ID); err != nil {
				t.Errorf("event %s not in shard %d: %v", e.ID, i, err)
			}
			if _, err := shards[1-i].Event(ctx, e.ID); !errors.Is(err, queue.ErrNotFound) {
				t.Errorf("event %s also in shard %d: %v", e.ID, 1-i, err)
			}
		}
		// One shard's part fails (its clock is ahead): the other's commits,
		// the error says which; the same batch later is harmless.
		enqueue(t, shards[1], "ahead", flowsIn(1, 2, 1, "z")[0], 100)
		a, c := flowsIn(0, 2, 1, "p")[0], flowsIn(1, 2, 1, "p")[0]
		batch := []queue.Event{{ID: "b0", Flow: a, Body: []byte("x")}, {ID: "b1", Flow: c, Body: []byte("y")}}
		_, err = s.EnqueueBatch(ctx, batch, 50)
		var se *shard.ShardError
		if !errors.As(err, &se) || se.Shard != 1 || !slices.Equal(se.Done, []int{0}) || !errors.Is(err, queue.ErrTimeRegression) {
			t.Fatalf("EnqueueBatch with shard 1 ahead: %v, want a ShardError of shard 1 after shard 0, ErrTimeRegression", err)
		}
		rs, err = s.EnqueueBatch(ctx, batch, 100)
		if err != nil || !rs[0].Duplicate || rs[1].Duplicate {
			t.Fatalf("retried batch = %+v, %v; want b0 Duplicate, b1 new", rs, err)
		}
		// A bad event in the batch changes nothing anywhere.
		before := readAll(t, s)
		if _, err := s.EnqueueBatch(ctx, []queue.Event{{ID: "ok", Flow: a, Body: []byte("x")}, {ID: "", Flow: c, Body: []byte("y")}}, 100); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("batch with a bad event: %v, want ErrInvalid", err)
		}
		if _, err := s.EnqueueBatch(ctx, []queue.Event{{ID: "same", Flow: a, Body: []byte("x")}, {ID: "same", Flow: c, Body: []byte("x")}}, 100); !errors.Is(err, queue.ErrConflict) {
			t.Errorf("batch reusing an ID across shards: %v, want ErrConflict", err)
		}
		if after := readAll(t, s); !reflect.DeepEqual(before, after) {
			t.Errorf("refused batches changed the queue")
		}
	})
}

func TestSettleRoutes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, shards := newSet(t, b, 2, nil)
		for i := 0; i < 2; i++ {
			for k, f := range flowsIn(i, 2, 2, "f") {
				enqueue(t, s, fmt.Sprintf("s%d-%d", i, k), f, 1)
			}
		}
		cs, err := s.ClaimBatch(ctx, 2, 4)
		if err != nil || len(cs) != 4 {
			t.Fatalf("ClaimBatch = %d claims, %v", len(cs), err)
		}
		items := make([]queue.SettleItem, len(cs))
		for k, c := range cs {
			items[k] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}}
		}
		items[3].Result = queue.Result{Reason: "unavailable"}
		items = append(items, queue.SettleItem{EventID: "nope", Generation: 1, Result: queue.Result{OK: true}})
		rs, err := s.SettleBatch(ctx, items, 3)
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range rs[:3] {
			if r.Outcome != queue.Acked {
				t.Errorf("item %d: %+v, want acked", k, r)
			}
		}
		if rs[3].Outcome != queue.RetryScheduled || !errors.Is(rs[4].Err, queue.ErrNotFound) {
			t.Errorf("items 3, 4 = %+v, %+v; want retry_scheduled and ErrNotFound", rs[3], rs[4])
		}
		// Another process's Store (no claims of its own) finds the shard.
		other, err := shard.Open(ctx, shards, shard.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c3 := cs[3]
		later := clock.Tick(3 + queue.BackoffCap + 1)
		got, err := s.ClaimBatch(ctx, later, 1)
		if err != nil || len(got) != 1 || got[0].EventID != c3.EventID {
			t.Fatalf("claim of the retried event = %+v, %v", got, err)
		}
		if o, err := other.Extend(ctx, got[0].EventID, got[0].Generation, later); err != nil || o != queue.Extended {
			t.Errorf("Extend through another Store = %v, %v", o, err)
		}
		if o, err := other.Settle(ctx, got[0].EventID, got[0].Generation, queue.Result{OK: true}, later); err != nil || o != queue.Acked {
			t.Errorf("Settle through another Store = %v, %v", o, err)
		}
		if e, err := other.Event(ctx, c3.EventID); err != nil || e.State != queue.StateAcked {
			t.Errorf("Event through another Store = %+v, %v", e, err)
		}
	})
}

// TestEmptySettleClaim: a SettleClaimBatch or SettleClaimFor with nothing
// to settle and nothing to claim answers as on one queue: no results, no
// claims, no error, on one shard and on several.
func TestEmptySettleClaim(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for _, n := range []int{1, 2} {
			s, _ := newSet(t, b, n, nil)
			if rs, cs, err := s.SettleClaimBatch(ctx, nil, 5, 0); err != nil || len(rs) != 0 || len(cs) != 0 {
				t.Errorf("%d shards: SettleClaimBatch(nil, 0) = %v, %v, %v", n, rs, cs, err)
			}
			if rs, cs, err := s.SettleClaimFor(ctx, nil, 6, 0, queue.ClaimFilter{}); err != nil || len(rs) != 0 || len(cs) != 0 {
				t.Errorf("%d shards: SettleClaimFor(nil, 0) = %v, %v, %v", n, rs, cs, err)
			}
			if _, _, err := s.SettleClaimBatch(ctx, nil, 4, 0); !errors.Is(err, queue.ErrTimeRegression) {
				t.Errorf("%d shards: SettleClaimBatch(nil, 0) below the mark = %v, want ErrTimeRegression", n, err)
			}
		}
	})
}

// TestSettlesPerShard: a settle batch over two shards whose second part
// fails commits the first; the ShardError says which shards committed, and
// the same settles again answer Stale for what did commit. A settle-and-
// claim likewise.
func TestSettlesPerShard(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, shards := newSet(t, b, 2, nil)
		a, c := flowsIn(0, 2, 1, "p")[0], flowsIn(1, 2, 1, "p")[0]
		enqueue(t, s, "a1", a, 1)
		enqueue(t, s, "c1", c, 1)
		enqueue(t, s, "a2", a, 1)
		enqueue(t, s, "c2", c, 1)
		cs, err := s.ClaimBatch(ctx, 1, 2)
		if err != nil || len(cs) != 2 {
			t.Fatalf("ClaimBatch = %+v, %v", cs, err)
		}
		items := make([]queue.SettleItem, 2)
		for _, cl := range cs {
			items[shard.Of(cl.Flow, 2)] = queue.SettleItem{EventID: cl.EventID, Generation: cl.Generation, Result: queue.Result{OK: true}}
		}
		enqueue(t, shards[1], "c3", c, 4) // shard 1's clock is ahead
		_, err = s.SettleBatch(ctx, items, 3)
		var se *shard.ShardError
		if !errors.As(err, &se) || se.Shard != 1 || !slices.Equal(se.Done, []int{0}) || !errors.Is(err, queue.ErrTimeRegression) {
			t.Fatalf("SettleBatch with shard 1 ahead: %v, want a ShardError of shard 1 after shard 0, ErrTimeRegression", err)
		}
		rs, err := s.SettleBatch(ctx, items, 4)
		if err != nil || rs[0].Outcome != queue.Stale || rs[1].Outcome != queue.Acked {
			t.Fatalf("settles again = %+v, %v; want a1 stale (acked before), c1 acked", rs, err)
		}

		cs, err = s.ClaimBatch(ctx, 4, 2)
		if err != nil || len(cs) != 2 {
			t.Fatalf("ClaimBatch = %+v, %v", cs, err)
		}
		for _, cl := range cs {
			items[shard.Of(cl.Flow, 2)] = queue.SettleItem{EventID: cl.EventID, Generation: cl.Generation, Result: queue.Result{OK: true}}
		}
		enqueue(t, shards[1], "c4", c, 7)
		_, _, err = s.SettleClaimBatch(ctx, items, 6, 2)
		if !errors.As(err, &se) || se.Shard != 1 || !errors.Is(err, queue.ErrTimeRegression) {
			t.Fatalf("SettleClaimBatch with shard 1 ahead: %v, want a ShardError of shard 1, ErrTimeRegression", err)
		}
		e, err := s.Event(ctx, "a2")
		if err != nil {
			t.Fatal(err)
		}
		if committed := slices.Contains(se.Done, 0); committed != (e.State == queue.StateAcked) {
			t.Errorf("ShardError.Done = %v, but a2 in shard 0 is %s", se.Done, e.State)
		}
	})
}

// TestClaimRefusesBadN: a claim of n < 1 (ClaimBatch, ClaimFor) and a
// settle-and-claim of n < 0 are ErrInvalid, as on one queue, and touch no
// shard: nothing is settled or claimed and no shard's clock mark moves to
// the refused call's tick.
func TestClaimRefusesBadN(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for _, n := range []int{1, 2} {
			s, shards := newSet(t, b, n, nil)
			for i := 0; i < n; i++ {
				enqueue(t, s, fmt.Sprintf("e%d", i), flowsIn(i, n, 1, "f")[0], 2)
			}
			cs, err := s.ClaimBatch(ctx, 2, n)
			if err != nil || len(cs) != n {
				t.Fatalf("%d shards: ClaimBatch = %+v, %v", n, cs, err)
			}
			items := make([]queue.SettleItem, len(cs))
			for k, c := range cs {
				items[k] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}}
			}
			var calls []string
			var errs []error
			refused := func(call string, err error) {
				calls, errs = append(calls, call), append(errs, err)
			}
			for _, bad := range []int{0, -1} {
				_, err := s.ClaimBatch(ctx, 10, bad)
				refused(fmt.Sprintf("ClaimBatch(%d)", bad), err)
				_, err = s.ClaimFor(ctx, 10, bad, queue.ClaimFilter{})
				refused(fmt.Sprintf("ClaimFor(%d)", bad), err)
			}
			_, _, err = s.SettleClaimBatch(ctx, items, 10, -1)
			refused("SettleClaimBatch(items, -1)", err)
			_, _, err = s.SettleClaimFor(ctx, items, 10, -1, queue.ClaimFilter{})
			refused("SettleClaimFor(items, -1)", err)
			_, _, err = s.SettleClaimBatch(ctx, nil, 10, -1)
			refused("SettleClaimBatch(nil, -1)", err)
			for k, err := range errs {
				if !errors.Is(err, queue.ErrInvalid) {
					t.Errorf("%d shards: %s = %v, want ErrInvalid", n, calls[k], err)
				}
			}
			for i, sh := range shards {
				if st, err := sh.Stats(ctx); err != nil || st.ClockMark != 2 {
					t.Errorf("%d shards: shard %d's clock mark after the refused calls = %d, %v; want 2", n, i, st.ClockMark, err)
				}
			}
			rs, err := s.SettleBatch(ctx, items, 3)
			if err != nil {
				t.Errorf("%d shards: SettleBatch below the refused calls' tick: %v", n, err)
				continue
			}
			for k, r := range rs {
				if r.Outcome != queue.Acked {
					t.Errorf("%d shards: item %d settled %+v, want acked (the refused calls settled nothing)", n, k, r)
				}
			}
		}
	})
}
