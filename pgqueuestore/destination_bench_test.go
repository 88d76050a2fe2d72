package pgqueuestore

import (
	"context"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// BenchmarkDestinationClaim measures the destination-aware claim
// (docs/contract.md §7.11) against the number of flows: 100 destinations
// registered (each with a concurrency limit, so that each claim counts its
// leases, and a rate limit), and 10 or 100,000 flows over them, one event
// each plus one re-enqueued per claim. Each op is one ClaimFor of n heads
// with a filter that excludes one destination; only the ClaimFor is timed
// (the acks and the re-enqueues that keep the flows backlogged are not).
// The claim reads one index range per destination with room, never the
// flows: the goal is the 100,000-flow cost at most 1.5 times the 10-flow
// one (docs/decisions/postgres-destinations.md has the figures).
func BenchmarkDestinationClaim(b *testing.B) {
	for _, n := range []int{1, 16} {
		for _, flows := range []int{10, 100000} {
			b.Run(fmt.Sprintf("n=%d/flows=%d", n, flows), func(b *testing.B) { benchDestClaim(b, flows, n) })
		}
	}
}

func benchDestClaim(b *testing.B, flows, n int) {
	ctx := context.Background()
	// One connection, so that the server's statistics of the reads
	// (flushed by that session) can be read back (BenchmarkBacklogCycle).
	s, schema := oneConnStore(b)
	// read is the index entries read so far from flows' indexes and
	// events': the claim's work, whatever the machine's load.
	read := func() (fl, ev int64) {
		b.Helper()
		if _, err := s.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			b.Fatal(err)
		}
		if err := s.pool.QueryRow(ctx, `SELECT
    coalesce(sum(idx_tup_read) FILTER (WHERE relname = 'flows'), 0)::bigint,
    coalesce(sum(idx_tup_read) FILTER (WHERE relname = 'events'), 0)::bigint
FROM pg_stat_user_indexes WHERE schemaname = $1`, schema).Scan(&fl, &ev); err != nil {
			b.Fatal(err)
		}
		return
	}
	var flTup, evTup int64
	const dests = 100
	for d := range dests {
		if err := s.PutDestination(ctx, queue.Destination{Name: fmt.Sprintf("d%03d", d), URL: "http://127.0.0.1:9/", Secrets: []string{"k"},
			Concurrency: 100000, Rate: 1000000}, "bench", 0); err != nil {
			b.Fatal(err)
		}
	}
	var es []queue.Event
	for f := range flows {
		es = append(es, queue.Event{ID: fmt.Sprintf("s-%d", f), Flow: fmt.Sprintf("f%06d", f), Body: []byte("x"), Destination: fmt.Sprintf("d%03d", f%dests)})
	}
	for len(es) > 0 {
		k := min(len(es), 5000)
		if _, err := s.EnqueueBatch(ctx, es[:k], 0); err != nil {
			b.Fatal(err)
		}
		es = es[k:]
	}
	if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.flows; ANALYZE {s}.events; ANALYZE {s}.destinations`)); err != nil {
		b.Fatal(err)
	}
	f := queue.ClaimFilter{Exclude: []string{"d000"}}
	items := make([]queue.SettleItem, 0, n)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		fl0, ev0 := read()
		b.StartTimer()
		cs, err := s.ClaimFor(ctx, 0, n, f)
		if err != nil || len(cs) == 0 {
			b.Fatalf("ClaimFor = %d claims, %v", len(cs), err)
		}
		b.StopTimer()
		fl1, ev1 := read()
		flTup, evTup = flTup+fl1-fl0, evTup+ev1-ev0
		items, es = items[:0], es[:0]
		for k, c := range cs {
			items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}})
			es = append(es, queue.Event{ID: fmt.Sprintf("c%d-%d", i, k), Flow: c.Flow, Body: []byte("x")})
		}
		if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := s.SettleBatch(ctx, items, 0); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/claim-call")
	b.ReportMetric(float64(flTup)/float64(b.N), "flows-idx-entries/call")
	b.ReportMetric(float64(evTup)/float64(b.N), "events-idx-entries/call")
}

// BenchmarkSingleDestinationClaimSettle is one Claim and one Settle of its event per
// op, on one queue without destinations whose 64 flows stay backlogged:
// the single-destination cost that destinations must leave as it was
// (run on main and on this build; docs/decisions/postgres-destinations.md).
func BenchmarkSingleDestinationClaimSettle(b *testing.B) {
	ctx := context.Background()
	s, _, _ := open(b)
	const flows = 64
	per := b.N/flows + 2
	var es []queue.Event
	for k := range per {
		for f := range flows {
			es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%02d", f), Body: []byte("x")})
		}
	}
	for len(es) > 0 {
		k := min(len(es), 5000)
		if _, err := s.EnqueueBatch(ctx, es[:k], 0); err != nil {
			b.Fatal(err)
		}
		es = es[k:]
	}
	b.ResetTimer()
	for range b.N {
		c, ok, err := s.Claim(ctx, 0)
		if err != nil || !ok {
			b.Fatalf("Claim = %v, %v", ok, err)
		}
		if _, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
