package queuestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// seedPaging fills a store with flows in every head state: idle (all acked),
// ready, waiting (in flight or backing off) and quarantined, with backlogs
// and served counts that differ, so that every order has ties and gaps.
func seedPaging(t *testing.T, s *Store, flows int) {
	t.Helper()
	ctx := context.Background()
	var es []Event
	for i := range flows {
		f := fmt.Sprintf("t%02d/flow-%03d", i%7, i)
		for j := range i%5 + 1 {
			es = append(es, Event{ID: fmt.Sprintf("%s#%d", f, j), Flow: f, Body: []byte(`{"delta":1}`)})
		}
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	// Each tick claims every ready head; flows are settled by their number:
	// %4 == 0 succeed, %4 == 1 fail ("boom" or "gap"), %4 == 2 stay in flight
	// and 3 are left in flight until their leases run out ("lease_expired").
	for now := clock.Tick(1); now <= 30; now++ {
		cs, err := s.ClaimBatch(ctx, now, 1000)
		if err != nil {
			t.Fatalf("ClaimBatch(%d) error = %v", now, err)
		}
		var items []SettleItem
		for _, c := range cs {
			var n int
			fmt.Sscanf(c.Flow[strings.Index(c.Flow, "-")+1:], "%d", &n)
			switch n % 4 {
			case 0:
				items = append(items, SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}})
			case 1:
				reason := "boom"
				if n%3 == 0 {
					reason = "gap"
				}
				items = append(items, SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{Reason: reason}})
			}
		}
		if _, err := s.SettleBatch(ctx, items, now); err != nil {
			t.Fatalf("SettleBatch(%d) error = %v", now, err)
		}
	}
}

// expectedOrder sorts the snapshot's flows by the documented rule of sort,
// computed in Go from the stored rows (independent of the SQL keys).
func expectedOrder(snap Snapshot, sort FlowSort, prefix string) []string {
	type row struct {
		key  int64
		flow string
	}
	var rows []row
	for _, f := range snap.Flows {
		if !strings.HasPrefix(f.Flow, prefix) {
			continue
		}
		var k int64
		switch sort {
		case SortByBacklog:
			if f.HeadSeq != nil {
				k = -(f.LastSeq - *f.HeadSeq + 1)
			}
		case SortByServed:
			k = -f.Served
		case SortByBlocked:
			switch {
			case f.HeadSeq == nil:
				k = 3
			case f.ReadyAt == nil:
				k = 0
			case !f.Ready:
				k = 1
			default:
				k = 2
			}
		}
		rows = append(rows, row{k, f.Flow})
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.flow, b.flow)) })
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.flow
	}
	return out
}

func names(fs []FlowState) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Flow
	}
	return out
}

// Walking forward from the first page and backward from the last both give
// every flow once, in the documented order, for every sort and for a
// prefix search; Prev of a page leads back to the page before.
func TestFlowsPage_WalksEveryOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	seedPaging(t, s, 137)
	sn := snap(t, s)
	for _, sort := range []FlowSort{"", SortByFlow, SortByBacklog, SortByServed, SortByBlocked} {
		for _, prefix := range []string{"", "t03/", "t03/flow-01", "nothing"} {
			name := fmt.Sprintf("sort %q prefix %q", sort, prefix)
			want := expectedOrder(sn, sort, prefix)
			var got []string
			var pages []FlowPage
			q := FlowQuery{Sort: sort, Prefix: prefix, Limit: 10}
			for {
				p, err := s.FlowsPage(ctx, q)
				if err != nil {
					t.Fatalf("%s: FlowsPage(%+v) error = %v", name, q, err)
				}
				pages = append(pages, p)
				got = append(got, names(p.Flows)...)
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
			q = FlowQuery{Sort: sort, Prefix: prefix, Limit: 10, Last: true}
			for i := 0; ; i++ {
				p, err := s.FlowsPage(ctx, q)
				if err != nil {
					t.Fatalf("%s: FlowsPage(%+v) error = %v", name, q, err)
				}
				back = append(names(p.Flows), back...)
				if i > 0 && p.Next == "" {
					t.Errorf("%s: page before the last has no Next", name)
				}
				if p.Prev == "" {
					break
				}
				q = FlowQuery{Sort: sort, Prefix: prefix, Limit: 10, Before: p.Prev}
			}
			if !slices.Equal(back, want) {
				t.Fatalf("%s: backward walk = %v\nwant %v", name, back, want)
			}
			// Prev of the second page is the first page.
			if len(pages) > 1 {
				p, err := s.FlowsPage(ctx, FlowQuery{Sort: sort, Prefix: prefix, Limit: 10, Before: pages[1].Prev})
				if err != nil {
					t.Fatalf("%s: FlowsPage(Before) error = %v", name, err)
				}
				if !slices.Equal(names(p.Flows), names(pages[0].Flows)) {
					t.Errorf("%s: page before the second = %v, want %v", name, names(p.Flows), names(pages[0].Flows))
				}
			}
		}
	}
}

// The rows of a page are those of Flows, field for field.
func TestFlowsPage_RowsMatchFlows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	seedPaging(t, s, 40)
	all, err := s.Flows(ctx)
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	p, err := s.FlowsPage(ctx, FlowQuery{Limit: MaxPageLimit})
	if err != nil {
		t.Fatalf("FlowsPage() error = %v", err)
	}
	if jsonOf(p.Flows) != jsonOf(all) {
		t.Errorf("FlowsPage() rows = %s\nwant %s", jsonOf(p.Flows), jsonOf(all))
	}
}

func TestFlowsPage_CarriesTheMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	seedPaging(t, s, 5)
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.FlowsPage(ctx, FlowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.ClockMark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mark != st.ClockMark || m != st.ClockMark || m != 30 {
		t.Errorf("FlowsPage().Mark = %d, ClockMark() = %d, Stats().ClockMark = %d; want all 30", p.Mark, m, st.ClockMark)
	}
}

func TestFlowsPage_RefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	seedPaging(t, s, 3)
	for name, q := range map[string]FlowQuery{
		"sort":          {Sort: "weight"},
		"limit low":     {Limit: -1},
		"limit high":    {Limit: MaxPageLimit + 1},
		"long prefix":   {Prefix: strings.Repeat("x", MaxNameLen+1)},
		"after+before":  {After: "0:a", Before: "0:b"},
		"after+last":    {After: "0:a", Last: true},
		"cursor no key": {After: "a"},
		"cursor key":    {After: "x:a"},
		"cursor flow":   {After: "1:"},
		"cursor ctrl":   {Before: "1:a\x00"},
	} {
		if _, err := s.FlowsPage(ctx, q); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: FlowsPage(%+v) error = %v, want ErrInvalid", name, q, err)
		}
	}
}

func TestAuditPage_NewestFirstAndByEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	seedPaging(t, s, 12)
	qs, err := s.Quarantined(ctx)
	if err != nil || len(qs) < 2 {
		t.Fatalf("Quarantined() = %v, %v; want at least 2", qs, err)
	}
	// Redrive each quarantined event; the first one three times over
	// (it fails again in between).
	now := clock.Tick(40)
	for _, q := range qs {
		if err := s.Redrive(ctx, q.EventID, q.Generation, "fixed "+q.EventID, now); err != nil {
			t.Fatalf("Redrive(%s) error = %v", q.EventID, err)
		}
	}
	all, err := s.AuditAll(ctx)
	if err != nil {
		t.Fatalf("AuditAll() error = %v", err)
	}
	var got []AuditRecord
	q := AuditQuery{Limit: 1}
	for {
		p, err := s.AuditPage(ctx, q)
		if err != nil {
			t.Fatalf("AuditPage(%+v) error = %v", q, err)
		}
		got = append(got, p.Entries...)
		if p.Next == 0 {
			break
		}
		q.Before = p.Next
	}
	slices.Reverse(got)
	if jsonOf(got) != jsonOf(all) {
		t.Errorf("AuditPage walk (reversed) = %s\nwant %s", jsonOf(got), jsonOf(all))
	}
	p, err := s.AuditPage(ctx, AuditQuery{EventID: qs[1].EventID})
	if err != nil {
		t.Fatalf("AuditPage(event) error = %v", err)
	}
	if len(p.Entries) != 1 || p.Entries[0].EventID != qs[1].EventID || p.Next != 0 {
		t.Errorf("AuditPage(event %s) = %+v, want its one row", qs[1].EventID, p)
	}
	for name, q := range map[string]AuditQuery{
		"limit":  {Limit: MaxPageLimit + 1},
		"before": {Before: -1},
		"event":  {EventID: "a\x01"},
		"limit0": {Limit: -1},
	} {
		if _, err := s.AuditPage(ctx, q); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: AuditPage(%+v) error = %v, want ErrInvalid", name, q, err)
		}
	}
}

func TestQuarantinedPage_FiltersAndPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	seedPaging(t, s, 60)
	all, err := s.Quarantined(ctx)
	if err != nil {
		t.Fatalf("Quarantined() error = %v", err)
	}
	reasons := map[string]int64{}
	for _, q := range all {
		reasons[q.Reason]++
	}
	if len(reasons) < 2 {
		t.Fatalf("seed gave reasons %v, want several", reasons)
	}
	rc, err := s.QuarantinedReasons(ctx)
	if err != nil {
		t.Fatalf("QuarantinedReasons() error = %v", err)
	}
	for _, r := range rc {
		if reasons[r.Reason] != r.Count {
			t.Errorf("QuarantinedReasons() %s = %d, want %d", r.Reason, r.Count, reasons[r.Reason])
		}
	}
	if len(rc) != len(reasons) || !slices.IsSortedFunc(rc, func(a, b ReasonCount) int { return cmp.Compare(b.Count, a.Count) }) {
		t.Errorf("QuarantinedReasons() = %+v, want every reason, most common first", rc)
	}
	for _, f := range []RedriveFilter{{}, {Reason: "gap"}, {Flow: all[0].Flow}, {Flow: all[0].Flow, Reason: all[0].Reason}, {Flow: all[0].Flow, Reason: "nope"}} {
		want, err := s.QuarantinedMatching(ctx, f)
		if err != nil {
			t.Fatalf("QuarantinedMatching(%+v) error = %v", f, err)
		}
		var got []QuarantinedEvent
		q := QuarantinedQuery{Filter: f, Limit: 3}
		for {
			p, err := s.QuarantinedPage(ctx, q)
			if err != nil {
				t.Fatalf("QuarantinedPage(%+v) error = %v", q, err)
			}
			if p.Total != int64(len(want)) {
				t.Errorf("QuarantinedPage(%+v) Total = %d, want %d", q, p.Total, len(want))
			}
			got = append(got, p.Events...)
			if p.Next == "" {
				break
			}
			q.After = p.Next
		}
		if jsonOf(got) != jsonOf(want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("QuarantinedPage(%+v) walk = %s\nwant %s", f, jsonOf(got), jsonOf(want))
		}
	}
	for name, q := range map[string]QuarantinedQuery{
		"limit":  {Limit: -2},
		"flow":   {Filter: RedriveFilter{Flow: "a\x00"}},
		"reason": {Filter: RedriveFilter{Reason: strings.Repeat("r", MaxReasonLen+1)}},
		"cursor": {After: "nope"},
	} {
		if _, err := s.QuarantinedPage(ctx, q); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: QuarantinedPage(%+v) error = %v, want ErrInvalid", name, q, err)
		}
	}
}
