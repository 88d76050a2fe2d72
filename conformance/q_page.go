package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// The paged reads of an operator's console (queue.Pager): one page at a
// time in a documented order, with opaque cursors whose text form
// (queue.Cursor) is the same on every backend. Ported from queuestore's
// page tests, which ran on SQLite only.

// pager is q as a queue.Pager; the clause is skipped without one.
func pager(t *testing.T, q Queue) queue.Pager { return capability[queue.Pager](t, q, "paged reads") }

// seedPaging fills a store with flows in every head state: idle (all
// acked), ready, waiting (in flight or backing off) and quarantined, with
// backlogs and served counts that differ, so that every order has ties and
// gaps. The clock mark ends at 31.
func seedPaging(t *testing.T, s Queue, flows int) {
	t.Helper()
	ctx := context.Background()
	var es []queue.Event
	for i := range flows {
		f := fmt.Sprintf("t%02d/flow-%03d", i%7, i)
		for j := range i%5 + 1 {
			es = append(es, queue.Event{ID: fmt.Sprintf("%s#%d", f, j), Flow: f, Body: []byte(`{"delta":1}`)})
		}
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	// Each tick claims every ready head; flows are settled by their number:
	// %4 == 0 succeed, %4 == 1 fail ("boom" or "gap"), %4 == 2 and 3 are
	// left in flight until their leases run out ("lease_expired").
	for now := clock.Tick(1); now <= 30; now++ {
		cs, err := s.ClaimBatch(ctx, now, 1000)
		if err != nil {
			t.Fatalf("ClaimBatch(%d) error = %v", now, err)
		}
		var items []queue.SettleItem
		for _, c := range cs {
			var n int
			fmt.Sscanf(c.Flow[strings.Index(c.Flow, "-")+1:], "%d", &n)
			switch n % 4 {
			case 0:
				items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: success})
			case 1:
				reason := "boom"
				if n%3 == 0 {
					reason = "gap"
				}
				items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: failure(reason)})
			}
		}
		if _, err := s.SettleBatch(ctx, items, now); err != nil {
			t.Fatalf("SettleBatch(%d) error = %v", now, err)
		}
	}
	// At tick 31 one more event for the idle flows %8 == 0 (ready heads;
	// those %8 == 4 stay idle) and a claim of three of them (in flight).
	// The clock mark ends at 31.
	es = es[:0]
	for i := 0; i < flows; i += 8 {
		f := fmt.Sprintf("t%02d/flow-%03d", i%7, i)
		es = append(es, queue.Event{ID: f + "#late", Flow: f, Body: []byte(`{"delta":2}`)})
	}
	if _, err := s.EnqueueBatch(ctx, es, 31); err != nil {
		t.Fatalf("EnqueueBatch(31) error = %v", err)
	}
	if _, err := s.ClaimBatch(ctx, 31, 3); err != nil {
		t.Fatalf("ClaimBatch(31) error = %v", err)
	}
}

// sortKey is a flow's key in sort as the documentation of queue.FlowSort
// defines it, computed in Go from the stored row (independent of any
// backend's SQL): the key of its cursors, Cursor.Key. By name the key is 0.
func sortKey(f queue.SnapshotFlow, sort queue.FlowSort) int64 {
	switch sort {
	case queue.SortByBacklog:
		if f.HeadSeq != nil {
			return -(f.LastSeq - *f.HeadSeq + 1)
		}
	case queue.SortByServed:
		return -f.Served
	case queue.SortByBlocked:
		switch {
		case f.HeadSeq == nil:
			return 3
		case f.ReadyAt == nil:
			return 0
		case !f.Ready:
			return 1
		default:
			return 2
		}
	}
	return 0
}

// expectedOrder sorts the snapshot's flows whose name starts with the
// bytes of prefix by sort, ties by name (byte order), and returns their
// names and their cursors' text forms.
func expectedOrder(snap queue.Snapshot, sort queue.FlowSort, prefix string) (flows, cursors []string) {
	var rows []queue.Cursor
	for _, f := range snap.Flows {
		if strings.HasPrefix(f.Flow, prefix) {
			rows = append(rows, queue.Cursor{Key: sortKey(f, sort), Flow: f.Flow})
		}
	}
	slices.SortFunc(rows, func(a, b queue.Cursor) int { return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Flow, b.Flow)) })
	for _, r := range rows {
		flows, cursors = append(flows, r.Flow), append(cursors, r.String())
	}
	return flows, cursors
}

func pageFlows(fs []queue.FlowState) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Flow
	}
	return out
}

// checkPageCursors fails unless page p, which holds want[at:at+len], has
// the cursors of its first and last rows where it has any: Prev when
// wantPrev, Next when wantNext, "" otherwise.
func checkPageCursors(t *testing.T, what string, p queue.FlowPage, cursors []string, at int, wantPrev, wantNext bool) {
	t.Helper()
	prev, next := "", ""
	if wantPrev {
		prev = cursors[at]
	}
	if wantNext {
		next = cursors[at+len(p.Flows)-1]
	}
	if p.Prev != prev || p.Next != next {
		t.Errorf("%s: Prev, Next = %q, %q; want %q, %q", what, p.Prev, p.Next, prev, next)
	}
	if len(p.Keys) != len(p.Flows) {
		t.Fatalf("%s: %d keys for %d flows", what, len(p.Keys), len(p.Flows))
	}
	for i, f := range p.Flows {
		if c := (queue.Cursor{Key: p.Keys[i], Flow: f.Flow}).String(); c != cursors[at+i] {
			t.Errorf("%s: row %d key %d (cursor %q), want the cursor %q", what, i, p.Keys[i], c, cursors[at+i])
		}
	}
}

// Pager_FlowsPage_WalksEveryOrder: walking forward from the first page and
// backward from the last both give every flow once, in the documented
// order (ties by name), for every sort and for prefixes of names; every
// page's Prev and Next are the cursors ("KEY:FLOW", queue.Cursor) of its
// first and last rows, the key as queue.FlowSort defines it, "" at either
// end, and Keys holds every row's key; Prev of a page leads back to the
// page before.
func queuePager_FlowsPage_WalksEveryOrder(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	pg := pager(t, s)
	seedPaging(t, s, 137)
	sn := snap(t, s)
	blocked := map[int64]int{}
	for _, f := range sn.Flows {
		blocked[sortKey(f, queue.SortByBlocked)]++
	}
	if len(blocked) != 4 {
		t.Fatalf("flows by blocked key = %v, want some of each of 0..3 (the seed is wrong)", blocked)
	}
	for _, sort := range []queue.FlowSort{"", queue.SortByFlow, queue.SortByBacklog, queue.SortByServed, queue.SortByBlocked} {
		for _, prefix := range []string{"", "t03/", "t03/flow-01", "t06/flow-136", "nothing"} {
			name := fmt.Sprintf("sort %q prefix %q", sort, prefix)
			want, cursors := expectedOrder(sn, sort, prefix)
			var got []string
			var pages []queue.FlowPage
			q := queue.FlowQuery{Sort: sort, Prefix: prefix, Limit: 10}
			for {
				p, err := pg.FlowsPage(ctx, q)
				if err != nil {
					t.Fatalf("%s: FlowsPage(%+v) error = %v", name, q, err)
				}
				if len(got)+len(p.Flows) <= len(want) && len(p.Flows) > 0 {
					checkPageCursors(t, fmt.Sprintf("%s: forward page %d", name, len(pages)), p, cursors, len(got), len(pages) > 0, len(got)+len(p.Flows) < len(want))
				}
				if len(p.Flows) > 10 || (p.Next != "" && len(p.Flows) != 10) || len(pages) > len(want) {
					t.Fatalf("%s: page %d has %d flows, Next %q; want 10 before the last", name, len(pages), len(p.Flows), p.Next)
				}
				pages = append(pages, p)
				got = append(got, pageFlows(p.Flows)...)
				if p.Next == "" {
					break
				}
				q.After = p.Next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: forward walk = %v\nwant %v", name, got, want)
			}
			if pages[0].Prev != "" {
				t.Errorf("%s: first page Prev = %q, want none", name, pages[0].Prev)
			}
			// Backward from the last page.
			var back []string
			q = queue.FlowQuery{Sort: sort, Prefix: prefix, Limit: 10, Last: true}
			for i := 0; ; i++ {
				p, err := pg.FlowsPage(ctx, q)
				if err != nil {
					t.Fatalf("%s: FlowsPage(%+v) error = %v", name, q, err)
				}
				back = append(pageFlows(p.Flows), back...)
				if at := len(want) - len(back); at >= 0 && len(p.Flows) > 0 {
					checkPageCursors(t, fmt.Sprintf("%s: backward page %d", name, i), p, cursors, at, at > 0, i > 0)
				}
				if i > len(want) {
					t.Fatalf("%s: backward walk does not end", name)
				}
				if p.Prev == "" {
					break
				}
				q = queue.FlowQuery{Sort: sort, Prefix: prefix, Limit: 10, Before: p.Prev}
			}
			if !slices.Equal(back, want) {
				t.Fatalf("%s: backward walk = %v\nwant %v", name, back, want)
			}
			// Prev of the second page is the first page.
			if len(pages) > 1 {
				p, err := pg.FlowsPage(ctx, queue.FlowQuery{Sort: sort, Prefix: prefix, Limit: 10, Before: pages[1].Prev})
				if err != nil {
					t.Fatalf("%s: FlowsPage(Before) error = %v", name, err)
				}
				if !slices.Equal(pageFlows(p.Flows), pageFlows(pages[0].Flows)) || p.Prev != "" || p.Next != pages[0].Next {
					t.Errorf("%s: page before the second = %v (Prev %q, Next %q), want %v (Prev \"\", Next %q)",
						name, pageFlows(p.Flows), p.Prev, p.Next, pageFlows(pages[0].Flows), pages[0].Next)
				}
			}
		}
	}
}

// Pager_FlowsPage_PrefixIsBytes: Prefix is a prefix of the name's bytes,
// case-sensitive, not a substring: a prefix that ends inside a
// character's encoding keeps the names whose bytes start with it; one no
// valid name can start with (a NUL, bytes that are not UTF-8 anywhere in
// a name) keeps none and is not an error; the default page size applies.
func queuePager_FlowsPage_PrefixIsBytes(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	pg := pager(t, s)
	flows := []string{"e1", "é1", "é2", "ê", "É", "xé", "\U0001F600a", "\U0001F601", "Z"}
	var es []queue.Event
	for i, f := range flows {
		es = append(es, queue.Event{ID: fmt.Sprintf("e%d", i), Flow: f, Body: []byte("x")})
	}
	for i := range queue.DefaultPageLimit + 1 {
		es = append(es, queue.Event{ID: fmt.Sprintf("m%d", i), Flow: fmt.Sprintf("many-%03d", i), Body: []byte("x")})
	}
	if _, err := s.EnqueueBatch(ctx, es, 1); err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	sn := snap(t, s)
	for _, prefix := range []string{"é", "é"[:1], "ê", "\U0001F600"[:1], "\U0001F600"[:2], "\U0001F600"[:3], "\U0001F600",
		"e", "E", "z", "1", "many-", "a\x00", "\x00", "\xff", "\xc3(", "\xe0\x80", "é\xa9"} {
		for _, sort := range []queue.FlowSort{queue.SortByFlow, queue.SortByBacklog} {
			what := fmt.Sprintf("prefix %q sort %q", prefix, sort)
			want, _ := expectedOrder(sn, sort, prefix)
			if len(want) > queue.DefaultPageLimit {
				want = want[:queue.DefaultPageLimit]
			}
			p, err := pg.FlowsPage(ctx, queue.FlowQuery{Prefix: prefix, Sort: sort})
			if err != nil {
				t.Fatalf("%s: FlowsPage() error = %v", what, err)
			}
			if got := pageFlows(p.Flows); !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Errorf("%s: FlowsPage() = %q, want %q", what, got, want)
			}
			if p.Mark != 1 {
				t.Errorf("%s: FlowsPage().Mark = %d, want 1", what, p.Mark)
			}
		}
	}
	if want, _ := expectedOrder(sn, "", "é"[:1]); len(want) != 4 {
		t.Fatalf("names starting with byte C3 = %q, want 4 (the seed is wrong)", want)
	}
}

// Pager_FlowsPage_RowsMatchFlows: the rows of a page are those of Flows,
// field for field.
func queuePager_FlowsPage_RowsMatchFlows(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	pg := pager(t, s)
	seedPaging(t, s, 40)
	all, err := s.Flows(ctx)
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	p, err := pg.FlowsPage(ctx, queue.FlowQuery{Limit: queue.MaxPageLimit})
	if err != nil {
		t.Fatalf("FlowsPage() error = %v", err)
	}
	if len(all) != 40 || jsonOf(p.Flows) != jsonOf(all) {
		t.Errorf("FlowsPage() rows = %s\nwant %s", jsonOf(p.Flows), jsonOf(all))
	}
	if p.Prev != "" || p.Next != "" {
		t.Errorf("FlowsPage() of every flow: Prev, Next = %q, %q; want none", p.Prev, p.Next)
	}
}

// Pager_FlowEventsFrom_PagesAFlow: FlowEventsFrom reads what FlowEvents
// reads, a page at a time: at most limit events in sequence order from the
// first whose seq is at least from (a from below 1 reads from the first);
// an unknown flow is ErrNotFound, a limit outside 1..MaxPageLimit
// ErrInvalid.
func queuePager_FlowEventsFrom_PagesAFlow(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	pg := pager(t, s)
	for i := 1; i <= 5; i++ {
		enqueue(t, s, "f"+itoa(i), "f", "x", 1)
	}
	ack(t, s, "f1", 2)
	c := wantClaim(t, s, "f2", 3)
	settle(t, s, "f2", c.Generation, failure("unavailable"), 3)
	enqueue(t, s, "g1", "g", "x", 3) // another flow: not in f's pages
	all, err := s.FlowEvents(ctx, "f")
	if err != nil || len(all) != 5 {
		t.Fatalf("FlowEvents(f) = %d events, %v", len(all), err)
	}
	for _, c := range []struct {
		from     int64
		limit    int
		from0, n int // the slice of all it must read
	}{
		{0, 2, 0, 2}, {-7, 5, 0, 5}, {1, queue.MaxPageLimit, 0, 5}, {2, 2, 1, 2}, {4, 2, 3, 2}, {5, 3, 4, 1}, {6, 3, 5, 0},
	} {
		got, err := pg.FlowEventsFrom(ctx, "f", c.from, c.limit)
		if err != nil {
			t.Fatalf("FlowEventsFrom(f, %d, %d) error = %v", c.from, c.limit, err)
		}
		if want := all[c.from0 : c.from0+c.n]; !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
			t.Errorf("FlowEventsFrom(f, %d, %d) = %s\nwant %s", c.from, c.limit, jsonOf(got), jsonOf(want))
		}
	}
	_, err = pg.FlowEventsFrom(ctx, "nope", 1, 10)
	wantErr(t, "FlowEventsFrom(unknown flow)", err, queue.ErrNotFound)
	for _, bad := range []int{0, -1, queue.MaxPageLimit + 1} {
		_, err := pg.FlowEventsFrom(ctx, "f", 1, bad)
		wantErr(t, "FlowEventsFrom(limit "+itoa(bad)+")", err, queue.ErrInvalid)
	}
}

// Pager_ClockMark_IsTheMark: ClockMark, and the Mark of a page, are the
// clock mark Stats reports: 0 on a new store, the highest tick recorded
// after writes.
func queuePager_ClockMark_IsTheMark(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	pg := pager(t, s)
	if m, err := pg.ClockMark(ctx); err != nil || m != 0 {
		t.Fatalf("ClockMark() of a new store = %d, %v; want 0", m, err)
	}
	if p, err := pg.FlowsPage(ctx, queue.FlowQuery{}); err != nil || p.Mark != 0 || len(p.Flows) != 0 || p.Prev != "" || p.Next != "" {
		t.Fatalf("FlowsPage() of a new store = %+v, %v; want an empty page at mark 0", p, err)
	}
	seedPaging(t, s, 5)
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pg.FlowsPage(ctx, queue.FlowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := pg.ClockMark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mark != st.ClockMark || m != st.ClockMark || m != 31 {
		t.Errorf("FlowsPage().Mark = %d, ClockMark() = %d, Stats().ClockMark = %d; want all 31", p.Mark, m, st.ClockMark)
	}
}

// Pager_FlowsPage_RefusesBadInput: a query that Check refuses is
// ErrInvalid.
func queuePager_FlowsPage_RefusesBadInput(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	pg := pager(t, s)
	seedPaging(t, s, 3)
	for name, q := range map[string]queue.FlowQuery{
		"sort":          {Sort: "weight"},
		"limit low":     {Limit: -1},
		"limit high":    {Limit: queue.MaxPageLimit + 1},
		"long prefix":   {Prefix: strings.Repeat("x", queue.MaxNameLen+1)},
		"after+before":  {After: "0:a", Before: "0:b"},
		"after+last":    {After: "0:a", Last: true},
		"before+last":   {Before: "0:a", Last: true},
		"cursor no key": {After: "a"},
		"cursor key":    {After: "x:a"},
		"cursor flow":   {After: "1:"},
		"cursor ctrl":   {Before: "1:a\x00"},
		"cursor utf8":   {After: "1:\xff"},
	} {
		if _, err := pg.FlowsPage(ctx, q); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: FlowsPage(%+v) error = %v, want ErrInvalid", name, q, err)
		}
	}
	// A well-formed cursor past either end is an empty page, not an error,
	// whatever its key.
	for _, sort := range []queue.FlowSort{queue.SortByFlow, queue.SortByBacklog, queue.SortByServed, queue.SortByBlocked} {
		for _, q := range []queue.FlowQuery{
			{Sort: sort, After: "9223372036854775807:~~~"},
			{Sort: sort, Before: "-9223372036854775808:!"},
		} {
			p, err := pg.FlowsPage(ctx, q)
			if err != nil || len(p.Flows) != 0 {
				t.Errorf("FlowsPage(%+v) = %d flows, %v; want an empty page", q, len(p.Flows), err)
			}
		}
	}
}

// Pager_AuditPage_NewestFirstAndByEvent: walking AuditPage one row at a
// time gives every audit row of every kind (redrive, policy, weight),
// newest first, each page's Next the ID of its last row; with an EventID
// it gives that event's redrive rows only, newest first; bad input is
// ErrInvalid.
func queuePager_AuditPage_NewestFirstAndByEvent(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	pg := pager(t, s)
	if p, err := pg.AuditPage(ctx, queue.AuditQuery{}); err != nil || p.Entries == nil || len(p.Entries) != 0 || p.Next != 0 {
		t.Fatalf("AuditPage() of a new store = %+v, %v; want no entries (an empty list) and no Next", p, err)
	}
	seedPaging(t, s, 12)
	qs, err := s.Quarantined(ctx)
	if err != nil || len(qs) < 2 {
		t.Fatalf("Quarantined() = %v, %v; want at least 2", qs, err)
	}
	// Redrive each quarantined event; the first one twice over (it fails
	// again in between, under a policy of one attempt), with a policy row
	// and a weight row in between.
	now := clock.Tick(40)
	for _, q := range qs {
		if err := s.Redrive(ctx, q.EventID, q.Generation, "fixed "+q.EventID, now); err != nil {
			t.Fatalf("Redrive(%s) error = %v", q.EventID, err)
		}
	}
	p1 := queue.DefaultPolicy()
	p1.MaxAttempts = 1
	if err := s.SetPolicy(ctx, p1, "one attempt", now); err != nil {
		t.Fatalf("SetPolicy() error = %v", err)
	}
	if w, ok := s.(queue.Weighter); ok {
		if err := w.SetWeight(ctx, qs[1].Flow, 3, "heavier", now); err != nil {
			t.Fatalf("SetWeight() error = %v", err)
		}
	}
	now = 100
	cs, err := s.ClaimBatch(ctx, now, 1000)
	if err != nil {
		t.Fatalf("ClaimBatch() error = %v", err)
	}
	again := false
	for _, c := range cs {
		if c.EventID == qs[0].EventID {
			if o := settle(t, s, c.EventID, c.Generation, failure("still broken"), now); o != queue.Quarantined {
				t.Fatalf("Settle(%s) = %s, want quarantined", c.EventID, o)
			}
			if err := s.Redrive(ctx, c.EventID, c.Generation, "fixed again", now); err != nil {
				t.Fatalf("Redrive(%s) again error = %v", c.EventID, err)
			}
			again = true
		}
	}
	if !again {
		t.Fatalf("the redriven %s was not claimed again", qs[0].EventID)
	}
	all, err := s.AuditAll(ctx)
	if err != nil {
		t.Fatalf("AuditAll() error = %v", err)
	}
	kinds := map[queue.AuditKind]bool{}
	for _, a := range all {
		kinds[a.Kind] = true
	}
	if !kinds[queue.AuditRedrive] || !kinds[queue.AuditPolicy] {
		t.Fatalf("audit kinds = %v, want redrive and policy rows", kinds)
	}
	walk := func(q queue.AuditQuery) []queue.AuditRecord {
		var got []queue.AuditRecord
		for range len(all) + 1 {
			p, err := pg.AuditPage(ctx, q)
			if err != nil {
				t.Fatalf("AuditPage(%+v) error = %v", q, err)
			}
			if len(p.Entries) > q.Limit || (p.Next != 0 && (len(p.Entries) != q.Limit || p.Next != p.Entries[len(p.Entries)-1].ID)) {
				t.Fatalf("AuditPage(%+v) = %+v; want at most %d entries and Next the last one's ID", q, p, q.Limit)
			}
			got = append(got, p.Entries...)
			if p.Next == 0 {
				return got
			}
			q.Before = p.Next
		}
		t.Fatalf("AuditPage walk from %+v does not end", q)
		return nil
	}
	for _, limit := range []int{1, 2, len(all), queue.MaxPageLimit} {
		got := walk(queue.AuditQuery{Limit: limit})
		slices.Reverse(got)
		if jsonOf(got) != jsonOf(all) {
			t.Errorf("AuditPage walk by %d (reversed) = %s\nwant %s", limit, jsonOf(got), jsonOf(all))
		}
	}
	// Below an ID: the rows under it only.
	mid := all[len(all)/2].ID
	p, err := pg.AuditPage(ctx, queue.AuditQuery{Before: mid, Limit: queue.MaxPageLimit})
	if err != nil || len(p.Entries) != len(all)/2 || (len(p.Entries) > 0 && p.Entries[0].ID != all[len(all)/2-1].ID) {
		t.Errorf("AuditPage(Before %d) = %+v, %v; want the %d rows below it, newest first", mid, p, err, len(all)/2)
	}
	for _, ev := range []string{qs[0].EventID, qs[1].EventID, "no such event"} {
		var want []queue.AuditRecord
		for _, a := range all {
			if a.EventID == ev {
				want = append(want, a)
			}
		}
		got := walk(queue.AuditQuery{EventID: ev, Limit: 1})
		slices.Reverse(got)
		if len(got)+len(want) > 0 && jsonOf(got) != jsonOf(want) {
			t.Errorf("AuditPage(event %s) walk (reversed) = %s\nwant %s", ev, jsonOf(got), jsonOf(want))
		}
		if ev == qs[0].EventID && len(want) != 2 {
			t.Errorf("audit rows of %s = %d, want 2", ev, len(want))
		}
	}
	for name, q := range map[string]queue.AuditQuery{
		"limit":  {Limit: queue.MaxPageLimit + 1},
		"before": {Before: -1},
		"event":  {EventID: "a\x01"},
		"limit0": {Limit: -1},
	} {
		if _, err := pg.AuditPage(ctx, q); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: AuditPage(%+v) error = %v, want ErrInvalid", name, q, err)
		}
	}
}

// Pager_QuarantinedPage_FiltersAndPages: QuarantinedReasons counts the
// quarantined events of every reason, most common first, ties by reason;
// walking QuarantinedPage with a filter gives what QuarantinedMatching
// gives, each page's Next the cursor ("SEQ:FLOW") of its last event and
// Total the count of all that match; bad input is ErrInvalid.
func queuePager_QuarantinedPage_FiltersAndPages(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s := bk.open(t)
	pg := pager(t, s)
	if rc, err := pg.QuarantinedReasons(ctx); err != nil || rc == nil || len(rc) != 0 {
		t.Fatalf("QuarantinedReasons() of a new store = %#v, %v; want an empty list", rc, err)
	}
	if p, err := pg.QuarantinedPage(ctx, queue.QuarantinedQuery{}); err != nil || p.Events == nil || len(p.Events) != 0 || p.Total != 0 || p.Next != "" {
		t.Fatalf("QuarantinedPage() of a new store = %#v, %v; want an empty list", p, err)
	}
	seedPaging(t, s, 60)
	all, err := s.Quarantined(ctx)
	if err != nil {
		t.Fatalf("Quarantined() error = %v", err)
	}
	counts := map[string]int64{}
	for _, q := range all {
		counts[q.Reason]++
	}
	var want []queue.ReasonCount
	for r, n := range counts {
		want = append(want, queue.ReasonCount{Reason: r, Count: n})
	}
	slices.SortFunc(want, func(a, b queue.ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason))
	})
	if len(want) < 3 {
		t.Fatalf("seed gave reasons %v, want several", counts)
	}
	rc, err := pg.QuarantinedReasons(ctx)
	if err != nil {
		t.Fatalf("QuarantinedReasons() error = %v", err)
	}
	if !slices.Equal(rc, want) {
		t.Errorf("QuarantinedReasons() = %+v, want %+v", rc, want)
	}
	for _, f := range []queue.RedriveFilter{{}, {Reason: "gap"}, {Flow: all[0].Flow}, {Flow: all[0].Flow, Reason: all[0].Reason}, {Flow: all[0].Flow, Reason: "nope"}, {Flow: "no such flow"}} {
		want, err := s.QuarantinedMatching(ctx, f)
		if err != nil {
			t.Fatalf("QuarantinedMatching(%+v) error = %v", f, err)
		}
		for _, limit := range []int{1, 3, 0} {
			var got []queue.QuarantinedEvent
			q := queue.QuarantinedQuery{Filter: f, Limit: limit}
			size := limit
			if size == 0 {
				size = queue.DefaultPageLimit
			}
			for range len(want) + 1 {
				p, err := pg.QuarantinedPage(ctx, q)
				if err != nil {
					t.Fatalf("QuarantinedPage(%+v) error = %v", q, err)
				}
				if p.Total != int64(len(want)) {
					t.Errorf("QuarantinedPage(%+v) Total = %d, want %d", q, p.Total, len(want))
				}
				if p.Events == nil || len(p.Events) > size {
					t.Fatalf("QuarantinedPage(%+v) = %d events (nil: %v), want 0..%d", q, len(p.Events), p.Events == nil, size)
				}
				if p.Next != "" {
					last := p.Events[len(p.Events)-1]
					if c := (queue.Cursor{Key: last.Seq, Flow: last.Flow}).String(); p.Next != c || len(p.Events) != size {
						t.Errorf("QuarantinedPage(%+v) Next = %q after %d events, want %q after %d", q, p.Next, len(p.Events), c, size)
					}
				}
				got = append(got, p.Events...)
				if p.Next == "" {
					break
				}
				q.After = p.Next
			}
			if len(got) != len(want) || (len(want) > 0 && jsonOf(got) != jsonOf(want)) {
				t.Errorf("QuarantinedPage(%+v, limit %d) walk = %s\nwant %s", f, limit, jsonOf(got), jsonOf(want))
			}
		}
	}
	for name, q := range map[string]queue.QuarantinedQuery{
		"limit":  {Limit: -2},
		"limit+": {Limit: queue.MaxPageLimit + 1},
		"flow":   {Filter: queue.RedriveFilter{Flow: "a\x00"}},
		"reason": {Filter: queue.RedriveFilter{Reason: strings.Repeat("r", queue.MaxReasonLen+1)}},
		"cursor": {After: "nope"},
	} {
		if _, err := pg.QuarantinedPage(ctx, q); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%s: QuarantinedPage(%+v) error = %v, want ErrInvalid", name, q, err)
		}
	}
}
