package bench

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// CostDestinations is how many destinations the destination claim cases
// register (docs/contract.md §7.11: claim cost at 100,000 flows over 100
// destinations ÷ at 10 flows).
const CostDestinations = 100

// destinationPutter registers destinations (queue.DestinationStore).
type destinationPutter interface {
	PutDestination(ctx context.Context, d queue.Destination, reason string, now clock.Tick) error
}

// loadDestBacklog registers dests destinations, each with a concurrency
// and a rate limit too high to bind (so that every claim reads each one's
// in-flight count and rate bucket, as a claim with limits does), and loads
// flows flows of perFlow events spread over them round robin.
func loadDestBacklog(ctx context.Context, q interface {
	BatchEnqueuer
	destinationPutter
}, flows, perFlow, dests int) error {
	for d := range dests {
		dd := queue.Destination{Name: fmt.Sprintf("d%03d", d), URL: "http://127.0.0.1:9/", Secrets: []string{"bench"},
			Concurrency: queue.MaxDestinationConcurrency, Rate: queue.MaxDestinationRate}
		if err := q.PutDestination(ctx, dd, "bench", now); err != nil {
			return fmt.Errorf("register destination: %w", err)
		}
	}
	return loadBacklogTo(ctx, q, "e", flows, perFlow, func(f int) string { return fmt.Sprintf("d%03d", f%dests) })
}

// ClaimSettleDests is [ClaimSettle] on a SQLite queue whose flows are
// spread over dests registered destinations (loadDestBacklog): the claim
// reads one index range per destination.
func ClaimSettleDests(flows, perFlow, dests int) Case {
	return sqliteClaimSettle(fmt.Sprintf("claim+settle-dests/%d", flows), func(ctx context.Context, q *queuestore.Store) error {
		return loadDestBacklog(ctx, q, flows, perFlow, dests)
	})
}

// PGClaimSettleDests is ClaimSettleDests on the PostgreSQL server at url
// (a schema of its own, analyzed after the load, dropped on Close).
func PGClaimSettleDests(url string, flows, perFlow, dests int) Case {
	return pgClaimSettle(url, fmt.Sprintf("pg/claim+settle-dests/%d", flows), func(ctx context.Context, p *pgQueue) error {
		dp, ok := p.Store.(destinationPutter)
		if !ok {
			return fmt.Errorf("pg claim+settle with destinations: the store has no destinations (queue.DestinationStore)")
		}
		return loadDestBacklog(ctx, struct {
			BatchEnqueuer
			destinationPutter
		}{p, dp}, flows, perFlow, dests)
	})
}
