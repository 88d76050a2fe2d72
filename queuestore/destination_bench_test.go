package queuestore

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// destCostStore is costStore with dests destinations registered (each
// with a concurrency and a rate limit, so the claim reads its in-flight
// count and its bucket) and flows flows of perFlow events spread over them
// round robin.
func destCostStore(b *testing.B, dests, flows, perFlow int) *Store {
	s := costStore(b, 0, 0)
	ctx := context.Background()
	for d := range dests {
		dd := Destination{Name: fmt.Sprintf("d%03d", d), URL: "http://127.0.0.1:9/", Secrets: []string{"k"},
			Concurrency: 100000, Rate: 1000000}
		if err := s.PutDestination(ctx, dd, "bench", 0); err != nil {
			b.Fatal(err)
		}
	}
	for k := range perFlow {
		var es []Event
		for i := range flows {
			es = append(es, Event{ID: fmt.Sprintf("s-%d-%d", i, k), Flow: fmt.Sprintf("f%06d", i), Body: []byte(`{"delta":1}`),
				Destination: fmt.Sprintf("d%03d", i%dests)})
			if len(es) == 10000 {
				if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
					b.Fatal(err)
				}
				es = es[:0]
			}
		}
		if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkDestCost prices the destination-aware claim in CPU time per
// operation (cpu-ns/op, as BenchmarkCost) with 100 destinations
// registered: a ClaimFor of one head with an empty filter and its ack, and
// a SettleClaimFor that acks the last 16 claims and claims 16 more with one
// destination excluded, at 10 flows and at 100,000 flows (1,000 a
// destination). The claim reads one range of flows_ready per destination
// with room, so the two sizes should cost about the same
// (docs/decisions/destinations-in-the-store.md has the figures). At 10
// flows a SettleClaimFor of 16 claims (and acks) only the 9 flows not
// excluded, at 100,000 flows 16: the cost per claimed event (cpu-ns/claim)
// compares the two sizes fairly, the cost per call does not.
func BenchmarkDestCost(b *testing.B) {
	ctx := context.Background()
	const dests = 100
	report := func(b *testing.B, start time.Duration, n, claims int) {
		cpu := float64(cpuTime(b) - start)
		b.ReportMetric(cpu/float64(n), "cpu-ns/op")
		b.ReportMetric(cpu/float64(claims), "cpu-ns/claim")
	}
	for _, flows := range []int{10, 100000} {
		b.Run(fmt.Sprintf("claimfor+ack/flows=%d", flows), func(b *testing.B) {
			s := destCostStore(b, dests, flows, max(2, b.N/flows+2))
			b.ResetTimer()
			start := cpuTime(b)
			for i := 0; i < b.N; i++ {
				cs, err := s.ClaimFor(ctx, 0, 1, ClaimFilter{})
				if err != nil || len(cs) != 1 {
					b.Fatalf("ClaimFor() = %v, %v", cs, err)
				}
				if o, err := s.Settle(ctx, cs[0].EventID, cs[0].Generation, Result{OK: true}, 0); err != nil || o != Acked {
					b.Fatalf("Settle() = %v, %v", o, err)
				}
			}
			report(b, start, b.N, b.N)
		})
		b.Run(fmt.Sprintf("settleclaimfor16/flows=%d", flows), func(b *testing.B) {
			s := destCostStore(b, dests, flows, max(2, b.N*16/flows+2))
			f := ClaimFilter{Exclude: []string{"d007"}}
			var items []SettleItem
			claims := 0
			b.ResetTimer()
			start := cpuTime(b)
			for i := 0; i < b.N; i++ {
				_, cs, err := s.SettleClaimFor(ctx, items, 0, 16, f)
				if err != nil || len(cs) == 0 {
					b.Fatalf("SettleClaimFor() = %d claims, %v", len(cs), err)
				}
				claims += len(cs)
				items = items[:0]
				for _, c := range cs {
					items = append(items, SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}})
				}
			}
			report(b, start, b.N, claims)
		})
	}
}
