package shard_test

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

// loaded gives a 3-shard set 30 flows of uneven backlog, some served,
// some quarantined heads, a pause and a redrive; it returns the tick after.
func loaded(t *testing.T, s *shard.Store) clock.Tick {
	t.Helper()
	ctx := context.Background()
	now := clock.Tick(1)
	for k := 0; k < 30; k++ {
		f := fmt.Sprintf("flow-%02d", k)
		for j := 0; j <= k%4; j++ {
			enqueue(t, s, fmt.Sprintf("e%02d-%d", k, j), f, now)
		}
	}
	// Three rounds: flows whose number is divisible by 5 fail, others ack.
	for round := 0; round < queue.MaxAttempts; round++ {
		cs, err := s.ClaimBatch(ctx, now, 30)
		if err != nil {
			t.Fatal(err)
		}
		items := make([]queue.SettleItem, len(cs))
		for k, c := range cs {
			r := queue.Result{OK: true}
			var n int
			fmt.Sscanf(c.Flow, "flow-%d", &n)
			if n%5 == 0 {
				r = queue.Result{Reason: fmt.Sprintf("r%d", n%2)}
			}
			items[k] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: r}
		}
		if _, err := s.SettleBatch(ctx, items, now); err != nil {
			t.Fatal(err)
		}
		now += queue.BackoffCap + 1
	}
	q, err := s.Quarantined(ctx)
	if err != nil || len(q) != 6 {
		t.Fatalf("Quarantined = %d, %v; want 6", len(q), err)
	}
	if err := s.Redrive(ctx, q[0].EventID, q[0].Generation, "fixed", now); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseFlow(ctx, "flow-07", "hold", now); err != nil {
		t.Fatal(err)
	}
	return now
}

func TestMergedReads(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, shards := newSet(t, b, 3, nil)
		loaded(t, s)
		// Flows: every shard's, by name.
		fs, err := s.Flows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var want []queue.FlowState
		var stats queue.Stats
		for _, sh := range shards {
			part, err := sh.Flows(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, part...)
			st, err := sh.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			stats.Flows += st.Flows
			stats.Events.Acked += st.Events.Acked
			stats.Quarantined += st.Quarantined
			stats.Ticket += st.Ticket
		}
		slices.SortFunc(want, func(a, b queue.FlowState) int { return cmp.Compare(a.Flow, b.Flow) })
		if len(fs) != 30 || !reflect.DeepEqual(fs, want) {
			t.Errorf("Flows = %d flows, not the shards' merged by name", len(fs))
		}
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Flows != 30 || st.Events.Acked != stats.Events.Acked || st.Quarantined != 5 || st.Ticket != stats.Ticket || st.PausedFlows != 1 {
			t.Errorf("Stats = %+v, want the shards' sums (%+v), 5 quarantined, 1 paused", st, stats)
		}
		q, err := s.Quarantined(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(q, func(a, b queue.QuarantinedEvent) int {
			return cmp.Or(cmp.Compare(a.Flow, b.Flow), cmp.Compare(a.Seq, b.Seq))
		}) || len(q) != 5 {
			t.Errorf("Quarantined = %+v: want 5 in flow, seq order", q)
		}
		all, err := s.AuditAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// 3 shard labels, 1 redrive, 1 pause.
		if len(all) != 5 || !slices.IsSortedFunc(all, func(a, b queue.AuditRecord) int { return cmp.Compare(a.At, b.At) }) {
			t.Errorf("AuditAll = %+v: want 5 rows by tick", all)
		}
		// Pages in every order walk the whole merged list, forwards and
		// backwards, each flow once.
		for _, sort := range []queue.FlowSort{queue.SortByFlow, queue.SortByBacklog, queue.SortByServed} {
			walked := walkFlows(t, s, queue.FlowQuery{Sort: sort, Limit: 7})
			wantOrder := slices.Clone(want)
			slices.SortStableFunc(wantOrder, func(a, b queue.FlowState) int {
				switch sort {
				case queue.SortByBacklog:
					return cmp.Or(cmp.Compare(b.Backlog, a.Backlog), cmp.Compare(a.Flow, b.Flow))
				case queue.SortByServed:
					return cmp.Or(cmp.Compare(b.Served, a.Served), cmp.Compare(a.Flow, b.Flow))
				}
				return cmp.Compare(a.Flow, b.Flow)
			})
			var names []string
			for _, f := range wantOrder {
				names = append(names, f.Flow)
			}
			if !slices.Equal(walked, names) {
				t.Errorf("sort %s: pages walked\n %v\nwant\n %v", sort, walked, names)
			}
			last, err := s.FlowsPage(ctx, queue.FlowQuery{Sort: sort, Last: true, Limit: 7})
			if err != nil {
				t.Fatal(err)
			}
			var back []string
			for _, f := range last.Flows {
				back = append(back, f.Flow)
			}
			if !slices.Equal(back, names[len(names)-len(back):]) || len(back) != 7 {
				t.Errorf("sort %s: last page %v, want %v", sort, back, names[len(names)-7:])
			}
			prev, err := s.FlowsPage(ctx, queue.FlowQuery{Sort: sort, Before: last.Prev, Limit: 7})
			if err != nil || len(prev.Flows) != 7 || prev.Flows[6].Flow != names[len(names)-8] {
				t.Errorf("sort %s: the page before the last = %+v, %v", sort, prev.Flows, err)
			}
		}
		// Quarantined pages.
		var walked []queue.QuarantinedEvent
		after := ""
		for {
			p, err := s.QuarantinedPage(ctx, queue.QuarantinedQuery{After: after, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			if p.Total != 5 {
				t.Errorf("QuarantinedPage Total = %d, want 5", p.Total)
			}
			walked = append(walked, p.Events...)
			if p.Next == "" {
				break
			}
			after = p.Next
		}
		if !reflect.DeepEqual(walked, q) {
			t.Errorf("QuarantinedPage walk = %+v, want %+v", walked, q)
		}
		reasons, err := s.QuarantinedReasons(ctx)
		if err != nil || len(reasons) != 2 || reasons[0].Count+reasons[1].Count != 5 || reasons[0].Count < reasons[1].Count {
			t.Errorf("QuarantinedReasons = %+v, %v", reasons, err)
		}
		// Audit pages: every row once, newest first by renumbered ID.
		var ids []int64
		var before int64
		for {
			p, err := s.AuditPage(ctx, queue.AuditQuery{Before: before, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Entries {
				ids = append(ids, r.ID)
			}
			if p.Next == 0 {
				break
			}
			before = p.Next
		}
		var wantIDs []int64
		for _, r := range all {
			wantIDs = append(wantIDs, r.ID)
		}
		slices.Sort(wantIDs)
		slices.Reverse(wantIDs)
		if !slices.Equal(ids, wantIDs) {
			t.Errorf("AuditPage walk = %v, want %v", ids, wantIDs)
		}
	})
}

// walkFlows follows q's pages forward from the first and returns the
// flows in the order walked, at most 50 pages.
func walkFlows(t *testing.T, s *shard.Store, q queue.FlowQuery) []string {
	t.Helper()
	var walked []string
	for pages := 0; pages < 50; pages++ {
		p, err := s.FlowsPage(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range p.Flows {
			walked = append(walked, f.Flow)
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	return walked
}

// TestMergedBlockedPages: pages by blocked merge by each store's own key.
// A head whose lease ran out but that no claim has promoted yet counts as
// waiting in its store (the cached readiness); the merged pages walk every
// flow once however the page boundaries fall.
func TestMergedBlockedPages(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := newSet(t, b, 2, nil)
		// a sorts before c by name, and they live in different shards.
		a, c := "flow-000", ""
		for k := 1; c == ""; k++ {
			if f := fmt.Sprintf("flow-%03d", k); s.ShardOf(f) != s.ShardOf(a) {
				c = f
			}
		}
		enqueue(t, s, "a1", a, 1)
		enqueue(t, s, "c1", c, 1)
		if cs, err := s.ClaimBatch(ctx, 1, 2); err != nil || len(cs) != 2 {
			t.Fatalf("ClaimBatch = %d, %v", len(cs), err)
		}
		// a's shard moves past a1's lease end; nothing promotes a1, so its
		// store keys it waiting (1), as c, whose lease has not run out.
		enqueue(t, s, "a2", a, 1+queue.Lease+1)
		for _, limit := range []int{1, 2, 10} {
			walked := walkFlows(t, s, queue.FlowQuery{Sort: queue.SortByBlocked, Limit: limit})
			if want := []string{a, c}; !slices.Equal(walked, want) {
				t.Errorf("limit %d: pages by blocked walked %v, want each of %v once", limit, walked, want)
			}
		}
	})
}
