package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"path/filepath"
	"time"

	"github.com/fairrelay/fairrelay/bench"
	"github.com/fairrelay/fairrelay/clock"
)

// retentionOnly runs only the retention rows (for working on them).
var retentionOnly = flag.Bool("retention-only", false, "measure only the retention rows (docs/contract.md §7.9): store sizes under a steady load with and without retention, and a pruner's cost on claim+settle")

// The steady-load runs: a batch of 64 events of different flows a tick,
// a window of 100 ticks (6,400 events), a prune pass every 16 ticks.
const (
	steadyFlows      = 1000
	steadyBatch      = 64
	steadyWindow     = clock.Tick(100)
	steadyPruneEvery = 16
	// pruneCostFlows is the backlog of the pruner's cost rows; the window
	// is the same 100 ticks, one claim+settle a tick.
	pruneCostFlows = 1000
)

// pruneCostCases are the pair of claim+settle cases, without and with a
// pruner beside them, measured with the other single-process cases.
func pruneCostCases(cfg config) []bench.Case {
	per := (cfg.minEvents + pruneCostFlows - 1) / pruneCostFlows
	return []bench.Case{
		bench.PruneClaimSettle(pruneCostFlows, per, steadyWindow, false),
		bench.PruneClaimSettle(pruneCostFlows, per, steadyWindow, true),
	}
}

// steadyRun is one steady-load run and the backend it ran on.
type steadyRun struct {
	backend string // "SQLite" or "PostgreSQL"
	res     bench.SteadyResult
}

// measureRetention runs the steady load without and then with retention,
// once each, on SQLite and, when the server answers, on PostgreSQL.
func measureRetention(ctx context.Context, dir string, cfg config, pg pgServer) ([]steadyRun, error) {
	type backend struct {
		name string
		open bench.SteadyStores
	}
	backends := []backend{{"SQLite", bench.SQLiteSteadyStores}}
	if pg.skipped == "" && pg.url != "" {
		backends = append(backends, backend{"PostgreSQL", bench.PGSteadyStores(pg.url)})
	}
	var out []steadyRun
	for _, b := range backends {
		windows := []clock.Tick{0, steadyWindow}
		if b.name == "PostgreSQL" && !cfg.pgSteadyBoth {
			windows = windows[1:] // the run without retention only with -retention-only: it would add ~1 min
		}
		for i, window := range windows {
			spec := bench.RetentionSpec{Events: cfg.steadyEvents, Flows: steadyFlows, Batch: steadyBatch, Retention: window, PruneEvery: steadyPruneEvery}
			res, err := bench.SteadyLoad(ctx, filepath.Join(dir, fmt.Sprintf("steady-%s-%d", b.name, i)), b.open, spec)
			if err != nil {
				return nil, fmt.Errorf("%s steady load, retention %d: %w", b.name, window, err)
			}
			log.Printf("%s steady load, retention %d: %.0f events/s, queue %s → %s (peak %s), receiver %s → %s (peak %s), pruned %d events, %d receipts",
				b.name, window, res.Rate(), mb(res.Start.Queue), mb(res.End.Queue), mb(res.Peak.Queue),
				mb(res.Start.Receiver), mb(res.End.Receiver), mb(res.Peak.Receiver), res.Events, res.Receipts)
			out = append(out, steadyRun{b.name, res})
		}
	}
	return out, nil
}

func mb(n int64) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }

func one(x float64) bench.Summary { return bench.Summarize([]float64{x}) }

// retentionRows are the steady-load rows (one run each: the sizes are
// not rates) and the pruner's cost (rounds, a ratio within each).
func retentionRows(cfg config, runs []steadyRun, rates bench.Rates) []bench.Row {
	var rows []bench.Row
	for _, backend := range []string{"SQLite", "PostgreSQL"} {
		rows = append(rows, steadyRows(cfg, backend, runs)...)
	}
	return append(rows, pruneCostRows(rates)...)
}

// steadyRows are one backend's steady-load rows.
func steadyRows(cfg config, backend string, runs []steadyRun) []bench.Row {
	var rows []bench.Row
	var without, with *bench.SteadyResult
	for i := range runs {
		switch {
		case runs[i].backend != backend:
		case runs[i].res.Spec.Retention == 0:
			without = &runs[i].res
		default:
			with = &runs[i].res
		}
	}
	queueName, receiverName, growth := "queue.db", "receiver.db",
		"With the window full, each prune pass deletes what the last batches added, and SQLite reuses the freed pages (or, on a file with auto_vacuum=INCREMENTAL, gives them back); growth past half-way means pruning fell behind or pages are not reused."
	if backend == "PostgreSQL" {
		queueName, receiverName = "queue schema", "receiver schema"
		growth = "PostgreSQL reuses a deleted row's space only once a VACUUM has marked it free: the run vacuums both schemas' tables after each prune pass, standing in for autovacuum, which visits a table at most once a minute (autovacuum_naptime) and so never within a run this short (docs/postgres.md: autovacuum for the pruned tables); growth past half-way means pruning fell behind or space was not reused."
	}
	for _, r := range []*bench.SteadyResult{without, with} {
		if r == nil {
			continue
		}
		how := fmt.Sprintf("%s steady load of %s events, without retention", backend, thousands(r.Spec.Events))
		if r.Spec.Retention > 0 {
			how = fmt.Sprintf("%s steady load of %s events, retention %d ticks (%s events)", backend, thousands(r.Spec.Events), r.Spec.Retention, thousands(int(r.Spec.Retention)*steadyBatch))
			if backend == "PostgreSQL" {
				how += ", a VACUUM after each prune pass"
			}
		}
		rows = append(rows,
			bench.Row{What: fmt.Sprintf("%s: %s size at the end (start %s, peak %s)", how, queueName, mb(r.Start.Queue), mb(r.Peak.Queue)),
				Value: one(float64(r.End.Queue) / 1e6), Verb: "%.2f", Unit: "MB"},
			bench.Row{What: fmt.Sprintf("%s: %s size at the end (start %s, peak %s)", how, receiverName, mb(r.Start.Receiver), mb(r.Peak.Receiver)),
				Value: one(float64(r.End.Receiver) / 1e6), Verb: "%.2f", Unit: "MB"},
		)
		if r.Spec.Retention > 0 {
			gq := one(float64(r.End.Queue) / float64(r.Mid.Queue))
			gr := one(float64(r.End.Receiver) / float64(r.Mid.Receiver))
			rows = append(rows,
				bench.Row{What: fmt.Sprintf("%s: %s size at the end ÷ at half-way", how, queueName), Value: gq, Verb: "%.2f", Unit: "ratio",
					Target: "≤ 1.1", Met: bench.AtMost(gq.Median, 1.1), Why: growth},
				bench.Row{What: fmt.Sprintf("%s: %s size at the end ÷ at half-way", how, receiverName), Value: gr, Verb: "%.2f", Unit: "ratio",
					Target: "≤ 1.1", Met: bench.AtMost(gr.Median, 1.1), Why: growth + " A receiver keeps one small flows row per flow for ever, and the receipts of the window."},
				bench.Row{What: fmt.Sprintf("%s: acked events pruned from the queue (receipts pruned from the receiver: %s)", how, thousands(int(r.Receipts))),
					Value: one(float64(r.Events)), Unit: "events"},
			)
		}
	}
	return rows
}

// pruneCostRows are the rows of the pruner's cost on claim+settle.
func pruneCostRows(rates bench.Rates) []bench.Row {
	var rows []bench.Row
	base := rates[fmt.Sprintf("claim+settle/%d/retention", pruneCostFlows)]
	pruned := rates[fmt.Sprintf("claim+settle/%d/retention+pruner", pruneCostFlows)]
	rows = append(rows,
		bench.Row{What: fmt.Sprintf("claim+settle at %s flows, retention %d ticks (one claim+settle a tick), no pruner", thousands(pruneCostFlows), steadyWindow),
			Value: bench.Summarize(base), Unit: "events/s"},
		bench.Row{What: fmt.Sprintf("claim+settle at %s flows, retention %d ticks, with a pruner beside it (Prune batches of 1,000, again at once while more, else every 10 ms)", thousands(pruneCostFlows), steadyWindow),
			Value: bench.Summarize(pruned), Unit: "events/s"},
		bench.Row{What: "claim+settle with a concurrent pruner ÷ without (within each round)",
			Value: bench.Summarize(bench.Ratio(pruned, base, 1)), Verb: "%.2f", Unit: "ratio"},
	)
	return rows
}

// retentionHeader is the method of the retention rows, for the report's
// header.
func retentionHeader(cfg config) string {
	return fmt.Sprintf("- Retention (docs/contract.md §7.9): one run each, without and then with a window, on fresh SQLite files: %s events over %s flows, %d events of different flows a batch (EnqueueBatch → ClaimBatch → ReceiveBatch → SettleBatch, one tick a batch; the receiver's clock is injected, one second a tick, so its window is the queue's); with retention, every %d batches both stores are pruned (queue `Prune(now, 1,000)`, receiver `Prune(before, 1,000)`, each repeated while more is due) in the same goroutine, and their sizes are sampled there. A SQLite size is `page_count × page_size` read on a separate connection (the WAL's committed pages included, the -wal file itself not counted). When the PostgreSQL server answers, the run with retention follows there (and the one without too under `-retention-only`: together they would add about a minute to this run), each store in a schema of its own; a size is the sum of `pg_total_relation_size` over the schema's tables (heap, indexes, TOAST), with a plain VACUUM of both schemas' tables after each prune pass, standing in for autovacuum (which visits a table at most once a minute, so never within this run). The pruner's cost: two claim+settle cases on the same backlog with a window of %d ticks (a tick per claim+settle), one alone, one with a goroutine pruning beside it while it runs, measured in the interleaved rounds above; the ratio is taken within each round.\n",
		thousands(cfg.steadyEvents), thousands(steadyFlows), steadyBatch, steadyPruneEvery, steadyWindow)
}

// runRetentionOnly measures and prints only the retention rows.
func runRetentionOnly(ctx context.Context, dir string, cfg config) ([]byte, error) {
	cfg.pgSteadyBoth = true
	progress := func(round int, name string, rate float64) {
		log.Printf("round %d %-18s %10.0f/s", round, name, rate)
	}
	rates, err := bench.Measure(ctx, filepath.Join(dir, "cases"), pruneCostCases(cfg), cfg.plan, progress)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	runs, err := measureRetention(ctx, filepath.Join(dir, "steady"), cfg, findPG(ctx))
	if err != nil {
		return nil, err
	}
	log.Printf("steady loads took %s", time.Since(start).Round(time.Second))
	var b bytes.Buffer
	b.WriteString(retentionHeader(cfg))
	b.WriteString("\n")
	if err := bench.WriteTable(&b, retentionRows(cfg, runs, rates)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
