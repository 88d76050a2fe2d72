package main

import (
	"bytes"
	"context"
	"flag"
	"log"
	"path/filepath"

	"github.com/fairrelay/fairrelay/bench"
)

// destinationsOnly runs only the destinations rows (for working on them).
var destinationsOnly = flag.Bool("destinations-only", false, "measure only the destinations rows (docs/contract.md §7.11): the healthy seven's rate beside a blackholed, a slow and a 503 destination ÷ without them")

// runDestinationsOnly measures and prints only the destinations rows.
func runDestinationsOnly(ctx context.Context, dir string, cfg config) ([]byte, error) {
	pg := findPG(ctx)
	var b bytes.Buffer
	rows := bench.DestinationsRows(ctx, filepath.Join(dir, "destinations"), pg.url, pg.skipped, cfg.name == "quick", logDestinationsRound)
	if err := bench.WriteTable(&b, rows); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// logDestinationsRound logs one round of the destinations case.
func logDestinationsRound(backend string, round int, r bench.DestinationsRound) {
	log.Printf("round %d destinations %-8s healthy seven alone %6.0f/s, beside the bad three %6.0f/s: %.2f", round, backend, r.Alone, r.WithBad, r.Ratio())
}
