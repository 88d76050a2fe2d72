package pgqueuestore

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// BenchmarkPages reads pages of the console at 100,000 flows (seedPages):
// the first and the last page of each order of FlowsPage (the last by
// Before from the last page's Prev, a keyset seek near the end), of
// QuarantinedPage and of AuditPage. An op is one page of 50; a page should
// cost the same wherever it is (TestPlans_PagedReads shows the plans).
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	s, _, _ := open(b)
	seedPages(b, s)
	for _, sort := range []queue.FlowSort{queue.SortByFlow, queue.SortByBacklog, queue.SortByServed, queue.SortByBlocked} {
		last, err := s.FlowsPage(ctx, queue.FlowQuery{Sort: sort, Last: true})
		if err != nil || last.Prev == "" {
			b.Fatalf("FlowsPage(%s, Last) Prev %q, %v", sort, last.Prev, err)
		}
		for _, at := range []struct {
			name string
			q    queue.FlowQuery
		}{
			{"first", queue.FlowQuery{Sort: sort}},
			{"last", queue.FlowQuery{Sort: sort, Last: true}},
			{"before-last", queue.FlowQuery{Sort: sort, Before: last.Prev}},
		} {
			b.Run("flows/"+string(sort)+"/"+at.name, func(b *testing.B) {
				for b.Loop() {
					p, err := s.FlowsPage(ctx, at.q)
					if err != nil || len(p.Flows) != queue.DefaultPageLimit {
						b.Fatalf("FlowsPage(%+v) = %d flows, %v", at.q, len(p.Flows), err)
					}
				}
			})
		}
	}
	qp, err := s.QuarantinedPage(ctx, queue.QuarantinedQuery{Limit: queue.MaxPageLimit})
	if err != nil || qp.Next == "" {
		b.Fatalf("QuarantinedPage = %d events, Next %q, %v", len(qp.Events), qp.Next, err)
	}
	for _, at := range []struct {
		name string
		q    queue.QuarantinedQuery
	}{{"first", queue.QuarantinedQuery{}}, {"after-1000", queue.QuarantinedQuery{After: qp.Next}}} {
		b.Run("quarantined/"+at.name, func(b *testing.B) {
			for b.Loop() {
				if p, err := s.QuarantinedPage(ctx, at.q); err != nil || len(p.Events) != queue.DefaultPageLimit {
					b.Fatalf("QuarantinedPage(%+v) = %d events, %v", at.q, len(p.Events), err)
				}
			}
		})
	}
	for _, at := range []struct {
		name string
		q    queue.AuditQuery
	}{{"first", queue.AuditQuery{}}, {"oldest", queue.AuditQuery{Before: queue.DefaultPageLimit + 1}}} {
		b.Run("audit/"+at.name, func(b *testing.B) {
			for b.Loop() {
				if p, err := s.AuditPage(ctx, at.q); err != nil || len(p.Entries) != queue.DefaultPageLimit {
					b.Fatalf("AuditPage(%+v) = %d entries, %v", at.q, len(p.Entries), err)
				}
			}
		})
	}
}
