package shard

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Paged reads merge the shards' pages. A page's cursor is a position in
// the order ("KEY:FLOW", or for audit rows a renumbered ID), not a row,
// and every shard orders its rows by the same (key, flow), so the same
// cursor passed to every shard gives each shard's rows after (or before)
// that position, and the merged page of the first limit rows is the page
// of the whole queue. No page reads more than limit+1 rows of a shard.

func (s *Store) pagers() ([]queue.Pager, error) {
	out := make([]queue.Pager, len(s.shards))
	for i, sh := range s.shards {
		p, ok := sh.(queue.Pager)
		if !ok {
			return nil, unsupported(i, sh, "queue.Pager")
		}
		out[i] = p
	}
	return out, nil
}

// FlowEventsFrom reads one page of a flow's events from its shard.
func (s *Store) FlowEventsFrom(ctx context.Context, flow string, from int64, limit int) ([]queue.EventState, error) {
	ps, err := s.pagers()
	if err != nil {
		return nil, err
	}
	return ps[s.ShardOf(flow)].FlowEventsFrom(ctx, flow, from, limit)
}

// ClockMark is the highest clock mark of the shards.
func (s *Store) ClockMark(ctx context.Context) (clock.Tick, error) {
	ps, err := s.pagers()
	if err != nil {
		return 0, err
	}
	var m clock.Tick
	for i, p := range ps {
		t, err := p.ClockMark(ctx)
		if err != nil {
			return 0, &ShardError{Shard: i, Err: err}
		}
		m = max(m, t)
	}
	return m, nil
}

// FlowsPage merges one page of every shard.
func (s *Store) FlowsPage(ctx context.Context, q queue.FlowQuery) (queue.FlowPage, error) {
	ps, err := s.pagers()
	if err != nil {
		return queue.FlowPage{}, err
	}
	if len(ps) == 1 {
		return ps[0].FlowsPage(ctx, q)
	}
	limit, _, err := q.Check()
	if err != nil {
		return queue.FlowPage{}, err
	}
	backward := q.Before != "" || q.Last
	type row struct {
		f   queue.FlowState
		key int64
	}
	var rows []row
	var mark clock.Tick
	more := false
	for i, p := range ps {
		pg, err := p.FlowsPage(ctx, q)
		if err != nil {
			return queue.FlowPage{}, &ShardError{Shard: i, Err: err}
		}
		mark = max(mark, pg.Mark)
		if (backward && pg.Prev != "") || (!backward && pg.Next != "") {
			more = true
		}
		if len(pg.Keys) != len(pg.Flows) {
			return queue.FlowPage{}, &ShardError{Shard: i, Err: fmt.Errorf("a page of %d flows with %d keys", len(pg.Flows), len(pg.Keys))}
		}
		for j, f := range pg.Flows {
			rows = append(rows, row{f: f, key: pg.Keys[j]})
		}
	}
	sortOf := q.Sort
	slices.SortStableFunc(rows, func(a, b row) int {
		if sortOf == "" || sortOf == queue.SortByFlow {
			return cmp.Compare(a.f.Flow, b.f.Flow)
		}
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.f.Flow, b.f.Flow))
	})
	if len(rows) > limit {
		more = true
		if backward {
			rows = rows[len(rows)-limit:]
		} else {
			rows = rows[:limit]
		}
	}
	page := queue.FlowPage{Mark: mark, Flows: make([]queue.FlowState, len(rows)), Keys: make([]int64, len(rows))}
	for k, r := range rows {
		page.Flows[k], page.Keys[k] = r.f, r.key
	}
	if len(rows) == 0 {
		return page, nil
	}
	first := queue.Cursor{Key: rows[0].key, Flow: rows[0].f.Flow}.String()
	last := queue.Cursor{Key: rows[len(rows)-1].key, Flow: rows[len(rows)-1].f.Flow}.String()
	if backward {
		if more {
			page.Prev = first
		}
		if q.Before != "" {
			page.Next = last
		}
		return page, nil
	}
	if more {
		page.Next = last
	}
	if q.After != "" {
		page.Prev = first
	}
	return page, nil
}

// QuarantinedPage merges one page of every shard in flow and sequence
// order; Total is the sum of the shards' totals.
func (s *Store) QuarantinedPage(ctx context.Context, q queue.QuarantinedQuery) (queue.QuarantinedPage, error) {
	ps, err := s.pagers()
	if err != nil {
		return queue.QuarantinedPage{}, err
	}
	if len(ps) == 1 {
		return ps[0].QuarantinedPage(ctx, q)
	}
	limit, _, err := q.Check()
	if err != nil {
		return queue.QuarantinedPage{}, err
	}
	var out queue.QuarantinedPage
	more := false
	for i, p := range ps {
		if q.Filter.Flow != "" && i != s.ShardOf(q.Filter.Flow) {
			continue
		}
		pg, err := p.QuarantinedPage(ctx, q)
		if err != nil {
			return queue.QuarantinedPage{}, &ShardError{Shard: i, Err: err}
		}
		out.Total += pg.Total
		out.Events = append(out.Events, pg.Events...)
		more = more || pg.Next != ""
	}
	slices.SortStableFunc(out.Events, cmpQuarantined)
	if len(out.Events) > limit {
		out.Events, more = out.Events[:limit], true
	}
	out.Events = nonNil(out.Events)
	if more && len(out.Events) > 0 {
		last := out.Events[len(out.Events)-1]
		out.Next = queue.Cursor{Key: last.Seq, Flow: last.Flow}.String()
	}
	return out, nil
}

// QuarantinedReasons sums the shards' counts by reason, the most common
// first (ties by reason).
func (s *Store) QuarantinedReasons(ctx context.Context) ([]queue.ReasonCount, error) {
	ps, err := s.pagers()
	if err != nil {
		return nil, err
	}
	if len(ps) == 1 {
		return ps[0].QuarantinedReasons(ctx)
	}
	sum := map[string]int64{}
	for i, p := range ps {
		rs, err := p.QuarantinedReasons(ctx)
		if err != nil {
			return nil, &ShardError{Shard: i, Err: err}
		}
		for _, r := range rs {
			sum[r.Reason] += r.Count
		}
	}
	out := make([]queue.ReasonCount, 0, len(sum))
	for r, n := range sum {
		out = append(out, queue.ReasonCount{Reason: r, Count: n})
	}
	slices.SortFunc(out, func(a, b queue.ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason))
	})
	return out, nil
}

// AuditPage merges one page of every shard's audit rows in the order of
// their renumbered IDs (ID × N + shard), newest first; Next is such an
// ID. Within one shard that is the shard's write order; across shards it
// interleaves the shards' rows by their own counts, not by time.
func (s *Store) AuditPage(ctx context.Context, q queue.AuditQuery) (queue.AuditPage, error) {
	ps, err := s.pagers()
	if err != nil {
		return queue.AuditPage{}, err
	}
	if len(ps) == 1 {
		return ps[0].AuditPage(ctx, q)
	}
	limit, before, err := q.Check()
	if err != nil {
		return queue.AuditPage{}, err
	}
	n := int64(len(ps))
	var rows []queue.AuditRecord
	more := false
	for i, p := range ps {
		// local*n + i < before  ⇔  local < ceil((before-i)/n).
		local := before
		if q.Before != 0 {
			local = (before - int64(i) + n - 1) / n
			if local <= 0 {
				continue
			}
		}
		sq := q
		sq.Before = local
		if q.Before == 0 {
			sq.Before = 0
		}
		pg, err := p.AuditPage(ctx, sq)
		if err != nil {
			return queue.AuditPage{}, &ShardError{Shard: i, Err: err}
		}
		more = more || pg.Next != 0
		for _, r := range pg.Entries {
			r.ID = s.globalID(r.ID, i)
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b queue.AuditRecord) int { return cmp.Compare(b.ID, a.ID) })
	if len(rows) > limit {
		rows, more = rows[:limit], true
	}
	out := queue.AuditPage{Entries: nonNil(rows)}
	if more && len(rows) > 0 {
		out.Next = rows[len(rows)-1].ID
	}
	return out, nil
}
