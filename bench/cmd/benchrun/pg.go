package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/fairrelay/fairrelay/bench"
)

// The PostgreSQL rows and River (docs/decisions/river-comparison.md).
const (
	riverBatch   = 64 // InsertMany batch, and our cycle's batch
	pgDrainBatch = 16 // the claims per SettleClaimBatch of the PostgreSQL drain children
	// pgDrainRate is the events/s a PostgreSQL drain's template has
	// events for over the whole drain (2 processes drained 13,000/s on a
	// quiet machine, where the template held 12,000/s).
	pgDrainRate = 25000
)

// pgDrainCounts are the process counts of the PostgreSQL drains.
var pgDrainCounts = []int{1, 2, 4, 8}

// notThisMode is why a mode that measures neither has no PostgreSQL or
// River rows.
const notThisMode = "PostgreSQL and River rows not in this mode"

// pgServer says whether the PostgreSQL rows can run: the server's URL and
// version, or why not (one line, logged; never a failure of the run).
type pgServer struct {
	url, version string
	skipped      string // why the PostgreSQL rows are not in this run, or ""
}

func findPG(ctx context.Context) pgServer {
	url := bench.PGURL()
	if err := bench.PGCheck(ctx, url); err != nil {
		s := pgServer{url: url, skipped: fmt.Sprintf("PostgreSQL rows skipped: no server at %s (%v); start one or set %s=postgres://…", url, err, bench.EnvPGURL)}
		log.Print(s.skipped)
		return s
	}
	v, err := bench.PGVersion(ctx, url)
	if err != nil {
		s := pgServer{url: url, skipped: fmt.Sprintf("PostgreSQL rows skipped: %s: %v", url, err)}
		log.Print(s.skipped)
		return s
	}
	return pgServer{url: url, version: v}
}

// riverSQLiteCases are the SQLite cases compared with River on SQLite, which
// the main run does not have already.
func riverSQLiteCases(cfg config) []bench.Case {
	return []bench.Case{bench.BatchedQueueCycle(riverBatch), bench.RiverSQLite(riverBatch, bench.RiverWorkers, cfg.plan.Slice),
		bench.RiverSQLite(bench.RiverBestBatch, bench.RiverBestWorkers, cfg.plan.Slice)}
}

// pgCases are the single-process PostgreSQL cases: the batched cycle, River,
// and claim+settle at the smallest and the largest backlog.
func pgCases(cfg config, pg pgServer) []bench.Case {
	if pg.skipped != "" {
		return nil
	}
	lo, hi := cfg.pgFlows[0], cfg.pgFlows[len(cfg.pgFlows)-1]
	return []bench.Case{
		bench.PGCeiling(pg.url),
		bench.PGBatchedCycle(pg.url, riverBatch),
		bench.RiverPG(pg.url, riverBatch, bench.RiverWorkers, cfg.plan.Slice),
		bench.RiverPG(pg.url, bench.RiverBestBatch, bench.RiverBestWorkers, cfg.plan.Slice),
		bench.RuntimePGCase(pg.url, bench.RuntimeInProcess, 16, 64, 1000, cfg.runtimePer, cfg.plan.Slice),
		bench.RuntimePGCase(pg.url, bench.RuntimeHTTP, 16, 64, 1000, cfg.runtimePer, cfg.plan.Slice),
		bench.PGClaimSettle(pg.url, lo, (cfg.pgMinEvents+lo-1)/lo),
		bench.PGClaimSettle(pg.url, hi, (cfg.pgMinEvents+hi-1)/hi),
		bench.PGClaimSettleDests(pg.url, lo, (cfg.pgMinEvents+lo-1)/lo, bench.CostDestinations),
		bench.PGClaimSettleDests(pg.url, hi, (cfg.pgMinEvents+hi-1)/hi, bench.CostDestinations),
	}
}

// measurePGDrains loads one template and drains copies of it with 1, 2, 4
// and 8 processes of this executable (-child pg).
func measurePGDrains(ctx context.Context, cfg config, pg pgServer) (map[int][]bench.DrainSummary, error) {
	if pg.skipped != "" {
		return nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// Enough for pgDrainRate events/s over the whole drain: it must not run
	// dry (a child that finds it empty fails the run).
	per := max(cfg.drainPer, int(pgDrainRate/1000*cfg.drainFor.Seconds()))
	tmpl := bench.NewPGSchema()
	defer bench.DropPGSchema(ctx, pg.url, tmpl)
	log.Printf("loading the PostgreSQL drain template (%d flows × %d events)", cfg.drainFlow, per)
	if err := bench.MakePGTemplate(ctx, pg.url, tmpl, cfg.drainFlow, per); err != nil {
		return nil, err
	}
	return bench.MeasurePGDrains(ctx, pg.url, tmpl, exe,
		func(schema string) []string { return bench.PGDrainArgs(pg.url, schema, pgDrainBatch) },
		pgDrainCounts, cfg.drainRnds, cfg.drainFor,
		func(round, procs int, s bench.DrainSummary) {
			log.Printf("round %d pg drain %d procs %6.0f/s, share %.2f–%.2f, longest call %s, errors %d",
				round, procs, s.Rate, s.MinShare, s.MaxShare, s.MaxWrite.Round(time.Millisecond), s.OtherErrs)
		})
}

// riverSQLiteRows compare River on SQLite with our queue cycle and goqite.
func riverSQLiteRows(rates bench.Rates) []bench.Row {
	rv := rates[fmt.Sprintf("river-sqlite/batch-%d", riverBatch)]
	best := rates[fmt.Sprintf("river-sqlite/w%d-batch-%d", bench.RiverBestWorkers, bench.RiverBestBatch)]
	qc := rates[fmt.Sprintf("queue/batch-%d", riverBatch)]
	rc := rates[fmt.Sprintf("relay/batch-%d", riverBatch)]
	goq := rates["goqite"]
	return []bench.Row{
		{What: fmt.Sprintf("River %s on SQLite (riversqlite): InsertMany of %d → %d no-op workers → completed", bench.RiverVersion, riverBatch, bench.RiverWorkers), Value: bench.Summarize(rv), Unit: "events/s"},
		{What: fmt.Sprintf("River %s on SQLite, its own best settings: InsertMany of %s → %s no-op workers → completed", bench.RiverVersion, thousands(bench.RiverBestBatch), thousands(bench.RiverBestWorkers)), Value: bench.Summarize(best), Unit: "events/s"},
		{What: fmt.Sprintf("queue cycle at %d on SQLite ÷ River on SQLite at its own best settings", riverBatch), Value: bench.Summarize(bench.Ratio(qc, best, 1)), Verb: "%.2f", Unit: "ratio"},
		{What: fmt.Sprintf("queue cycle at %d on SQLite (EnqueueBatch → ClaimBatch → SettleBatch)", riverBatch), Value: bench.Summarize(qc), Unit: "events/s"},
		{What: fmt.Sprintf("queue cycle at %d on SQLite ÷ River on SQLite", riverBatch), Value: bench.Summarize(bench.Ratio(qc, rv, 1)), Verb: "%.2f", Unit: "ratio"},
		{What: fmt.Sprintf("batched relay cycle at %d (with ReceiveBatch) ÷ River on SQLite", riverBatch), Value: bench.Summarize(bench.Ratio(rc, rv, 1)), Verb: "%.2f", Unit: "ratio"},
		{What: "River on SQLite ÷ goqite cycle", Value: bench.Summarize(bench.Ratio(rv, goq, 1)), Verb: "%.2f", Unit: "ratio"},
	}
}

// pgRows are the PostgreSQL rows: the cycle against River, claim+settle at
// the smallest and largest backlog, and the drains.
func pgRows(cfg config, rates bench.Rates, drains map[int][]bench.DrainSummary, pg pgServer) []bench.Row {
	if pg.skipped != "" {
		return nil
	}
	ours := rates[fmt.Sprintf("pg/batch-%d", riverBatch)]
	rv := rates[fmt.Sprintf("river-pg/batch-%d", riverBatch)]
	if len(ours) == 0 { // a drains-only run
		return pgDrainRows(drains)
	}
	ratio := bench.Summarize(bench.Ratio(ours, rv, 1))
	ceil := rates["pg/ceiling"]
	rows := []bench.Row{
		{What: "PostgreSQL storage ceiling: one-row `INSERT` (autocommit)", Value: bench.Summarize(ceil), Unit: "commits/s"},
		{What: fmt.Sprintf("PostgreSQL: queue cycle at %d (EnqueueBatch → ClaimBatch → SettleBatch)", riverBatch), Value: bench.Summarize(ours), Unit: "events/s"},
		{What: fmt.Sprintf("PostgreSQL: River %s (riverpgxv5): InsertMany of %d → %d no-op workers → completed", bench.RiverVersion, riverBatch, bench.RiverWorkers), Value: bench.Summarize(rv), Unit: "events/s"},
		{What: fmt.Sprintf("PostgreSQL: queue cycle at %d ÷ River", riverBatch), Value: ratio, Verb: "%.2f", Unit: "ratio", Target: "≥ 1.5", Met: bench.AtLeast(ratio.Median, 1.5),
			Why: "Our cycle is three transactions per 64 events in one goroutine, one after the other, each taking the queue's one write turn (the meta row) and a commit; River inserts, fetches and completes from several goroutines on four connections, so its statements and commits overlap, which the contract's one order of writes rules out for ours. The enqueue is a read over an array and a few set statements in pipelined round trips, each write running the generic plan that reaches its rows by key (docs/decisions/postgres-batch-round-trips.md and docs/decisions/postgres-custom-plans.md); the claim and the settle are one call of settle_claim each (docs/decisions/postgres-server-side-transitions.md): the server's own statement time is most of a cycle (5.4 of 7.2 ms in a quiet profile after migration 4, with custom plans then, \"Updates that stay on their page\": the three commits, the insert, the claim's event update and the enqueue's flow update are the largest). The runs that read 1.66 to 1.75 (two -pg-only runs on a quiet machine, and 1.68 in the full run of 2026-12-06 06:18) left River's clients running between their steps, and their polling slowed River's 16-worker case more than ours; with River's client stopped between its steps, the full run of 2026-12-06 15:33 read 1.24 (1.05–1.51) and a -pg-only run right after it 1.12 (0.85–1.42) (docs/decisions/river-comparison.md). A client-side profile of the cycle (pgqueuestore's BenchmarkBatchCycle, 8.3 ms a cycle) found the test process on the CPU for 14% of the time, so what is left is the server's work per event: in this cycle each event's flows row is rewritten three times (the enqueue makes the event its head, then the claim and the ack), never heap-only, since each changes an indexed column."},
	}
	best := rates[fmt.Sprintf("river-pg/w%d-batch-%d", bench.RiverBestWorkers, bench.RiverBestBatch)]
	rows = append(rows,
		bench.Row{What: fmt.Sprintf("PostgreSQL: River %s at its own best settings: InsertMany of %s → %s no-op workers → completed", bench.RiverVersion, thousands(bench.RiverBestBatch), thousands(bench.RiverBestWorkers)), Value: bench.Summarize(best), Unit: "events/s"},
		bench.Row{What: fmt.Sprintf("PostgreSQL: queue cycle at %d ÷ River at its own best settings", riverBatch), Value: bench.Summarize(bench.Ratio(ours, best, 1)), Verb: "%.2f", Unit: "ratio"},
		bench.Row{What: fmt.Sprintf("PostgreSQL: River at %s workers, inserts of %s ÷ River at %d workers, inserts of %d", thousands(bench.RiverBestWorkers), thousands(bench.RiverBestBatch), bench.RiverWorkers, riverBatch), Value: bench.Summarize(bench.Ratio(best, rv, 1)), Verb: "%.2f", Unit: "ratio"},
	)
	rows = append(rows, bench.Row{What: fmt.Sprintf("PostgreSQL: queue cycle at %d ÷ (ceiling × %d/3)", riverBatch, riverBatch), Value: bench.Summarize(bench.Ratio(ours, ceil, 3.0/riverBatch)), Verb: "%.2f", Unit: "ratio"})
	lo, hi := cfg.pgFlows[0], cfg.pgFlows[len(cfg.pgFlows)-1]
	for _, n := range []int{lo, hi} {
		rows = append(rows, bench.Row{What: fmt.Sprintf("PostgreSQL: claim+settle at %s flows", thousands(n)), Value: bench.Summarize(rates[fmt.Sprintf("pg/claim+settle/%d", n)]), Unit: "events/s"})
	}
	single := bench.Summarize(bench.Ratio(rates[fmt.Sprintf("pg/claim+settle/%d", lo)], ceil, 2))
	rows = append(rows, bench.Row{What: fmt.Sprintf("PostgreSQL: single-event claim+settle at %s flows ÷ (ceiling ÷ 2)", thousands(lo)), Value: single, Verb: "%.2f", Unit: "ratio",
		Target: "≥ 0.5", Met: bench.AtLeast(single.Median, 0.5),
		Why: "An event is two transactions and two commits, as the target allows, and since migration 11 each is one call of settle_claim: one round trip, its statements planned once per connection (docs/decisions/postgres-server-side-transitions.md). What is left is the server's own work for each transition: the meta row locked and written, the flows row and the event rewritten, and their index entries (the flows row's indexed columns change at every claim and ack, so its update is never heap-only), then the commit; on a 2-core machine the server's backend and the client also share the cores. Measured on this workload (2026-12-06, pg_stat_user_functions and auto_explain): a call spent 0.27 to 0.39 ms inside settle_claim, each of its row updates 0.05 to 0.07 ms, where the ceiling's whole commit took 0.23 ms; with synchronous_commit off a call took 0.36 ms against 0.72 with it, and a ceiling commit 0.07 against 0.23. Part of each row update was its table's CHECKs, which PostgreSQL prepares again for every UPDATE statement: queue migration 14 took meta's fifteen off the clock and ticket updates (about 13 % more events/s, docs/decisions/postgres-check-constraints.md); those of events and flows guard the columns each transition writes and stay, about an eighth of the server's CPU in a profile of this case."})
	rows = append(rows, pgRuntimeRows(rates)...)
	cost := bench.Summarize(bench.Ratio(rates[fmt.Sprintf("pg/claim+settle/%d", lo)], rates[fmt.Sprintf("pg/claim+settle/%d", hi)], 1))
	rows = append(rows, bench.Row{What: fmt.Sprintf("PostgreSQL: claim+settle cost at %s flows ÷ at %s flows", thousands(hi), thousands(lo)), Value: cost, Verb: "%.2f", Unit: "ratio",
		Target: "≤ 1.5", Met: bench.AtMost(cost.Median, 1.5),
		Why: "Every statement of the claim path is index-driven on an analyzed table (pgqueuestore's TestPlans_IndexDriven); a miss means a plan that changed with the statistics, or noise: compare the range with the other rows of this run."})
	rows = append(rows, destCostRows(cfg, rates, "PostgreSQL: ", "pg/claim+settle-dests")...)
	return append(rows, pgDrainRows(drains)...)
}

// pgDrainRows are the rows of the PostgreSQL drains, one group per process
// count; a ratio to one process is taken within the round.
func pgDrainRows(drains map[int][]bench.DrainSummary) []bench.Row {
	var rows []bench.Row
	one := drains[1]
	for _, n := range pgDrainCounts {
		ss := drains[n]
		if len(ss) == 0 {
			continue
		}
		var total, ratio, minShare, maxShare, longest, errs []float64
		first := ""
		for i, s := range ss {
			total = append(total, s.Rate)
			minShare = append(minShare, s.MinShare)
			maxShare = append(maxShare, s.MaxShare)
			longest = append(longest, float64(s.MaxWrite)/1e6)
			errs = append(errs, float64(s.OtherErrs))
			if first == "" {
				first = s.FirstError
			}
			if i < len(one) && one[i].Rate > 0 {
				ratio = append(ratio, s.Rate/one[i].Rate)
			}
		}
		label := fmt.Sprintf("PostgreSQL: %d relay process", n)
		if n > 1 {
			label += "es"
		}
		label += fmt.Sprintf(" (SettleClaimBatch of %d, as a relay)", pgDrainBatch)
		rows = append(rows, bench.Row{What: label + ": total", Value: bench.Summarize(total), Unit: "events/s"},
			bench.Row{What: label + ": longest call (wait included)", Value: bench.Summarize(longest), Unit: "ms"})
		if n > 1 {
			r := bench.Summarize(ratio)
			row := bench.Row{What: label + ": total ÷ one process", Value: r, Verb: "%.2f", Unit: "ratio"}
			if n == 4 {
				row.Target, row.Met = "≥ 2", bench.AtLeast(r.Median, 2)
				row.Why = "The contract rules it out on one queue: a claim takes the next global ticket in its own transaction and tickets are consecutive (§2.3), so a claim cannot know its ticket before the claim before it has committed or rolled back, and claims run one after another through their commits whatever the lock (docs/decisions/postgres-one-write-turn.md). One process without a handler already keeps that turn busy (vmstat showed the machine 36-49 % idle in every phase of a drain run, 1 to 8 processes); more processes only queue for it. Processes add throughput when their handlers take time outside the turn; past one turn, partitions (docs/postgres.md)."
			}
			ms := bench.Summarize(minShare)
			rows = append(rows,
				row,
				bench.Row{What: label + ": smallest share ÷ fair share", Value: ms, Verb: "%.2f", Unit: "ratio", Target: "≥ 0.5", Met: bench.AtLeast(ms.Min, 0.5),
					Why: "The turn is the meta row's lock, and every write updates that row, so the transaction that takes it next is not always the one that waited longest: a waiter queues on the row version it found, the holder's commit leaves a newer version, and a transaction that arrives just then (often the process that just committed, starting its next write) can lock that version first. The shorter the drain, the more one such run weighs; see docs/decisions/river-comparison.md."},
				bench.Row{What: label + ": largest share ÷ fair share", Value: bench.Summarize(maxShare), Verb: "%.2f", Unit: "ratio"},
			)
		}
		if e := bench.Summarize(errs); e.Max > 0 {
			rows = append(rows, bench.Row{What: label + ": errors per round", Value: e, Unit: "count", Target: "0", Met: "NO", Why: "First error: " + first})
		}
	}
	return rows
}

// pgHeader is the header's bullet on the PostgreSQL rows and River.
func pgHeader(cfg config, pg pgServer) string {
	if pg.skipped == notThisMode {
		return "- " + notThisMode + ".\n"
	}
	if pg.skipped != "" {
		return fmt.Sprintf("- %s. River on SQLite: River %s (riversqlite) on a file with the stores' pragmas and one connection, InsertMany of %d, %d no-op workers, FetchCooldown %s, FetchPollInterval %s (River's `river bench` settings); a step inserts while at most %d jobs are outstanding and counts the jobs completed within its %s (at least %s); the ratio is taken within the round.\n",
			pg.skipped, bench.RiverVersion, riverBatch, bench.RiverWorkers, bench.RiverFetchCooldown, bench.RiverFetchPoll, bench.RiverWindow, cfg.plan.Slice, bench.RiverMinStep)
	}
	return fmt.Sprintf("- PostgreSQL %s at %s (fsync and synchronous_commit as the server has them), every case in a schema of its own, dropped afterwards. River %s (riverpgxv5 on PostgreSQL, riversqlite on a SQLite file with the stores' pragmas and one connection, as River's CLI opens SQLite), migrated with rivermigrate: InsertMany of %d, %d no-op workers, FetchCooldown %s, FetchPollInterval %s (River's `river bench` settings); a River step inserts while at most %d jobs are outstanding and counts the jobs completed (River's completed events) within its %s (at least %s; at River's best settings, at least %s), then waits untimed for the rest. Our side is one goroutine, three transactions per %d events. PostgreSQL claim+settle backlogs: at least %s events, loaded untimed with EnqueueBatch, then ANALYZE. PostgreSQL drains: %d rounds; in each, 1, 2, 4 and 8 OS processes (order rotated by round) drain a fresh copy of one template (%s flows, enough events for %s events/s over the whole drain) for %s, each making one ClaimBatch(%d) and then looping SettleClaimBatch (ack the last batch, claim the next, one transaction), as a relay does.\n",
		pg.version, pg.url, bench.RiverVersion, riverBatch, bench.RiverWorkers, bench.RiverFetchCooldown, bench.RiverFetchPoll, bench.RiverWindow, cfg.plan.Slice, bench.RiverMinStep, bench.RiverBestMinStep,
		riverBatch, thousands(cfg.pgMinEvents), cfg.drainRnds, thousands(cfg.drainFlow), thousands(pgDrainRate), cfg.drainFor, pgDrainBatch)
}

// runPGOnly measures only the PostgreSQL rows and the River rows (with the
// SQLite cases they are compared with).
func runPGOnly(ctx context.Context, dir string, cfg config) ([]byte, error) {
	start := time.Now()
	pg := findPG(ctx)
	cases := []bench.Case{bench.Goqite(), bench.BatchedRelayCycle(riverBatch)}
	cases = append(cases, riverSQLiteCases(cfg)...)
	// The SQLite runtime cases that the PostgreSQL runtime is set beside.
	cases = append(cases,
		bench.RuntimeCase(bench.RuntimeInProcess, 16, 64, 1000, cfg.runtimePer, cfg.plan.Slice),
		bench.RuntimeCase(bench.RuntimeHTTP, 16, 64, 1000, cfg.runtimePer, cfg.plan.Slice))
	cases = append(cases, pgCases(cfg, pg)...)
	log.Printf("setting up %d cases (loading backlogs)", len(cases))
	rates, err := bench.Measure(ctx, filepath.Join(dir, "cases"), cases, cfg.plan, func(round int, name string, rate float64) {
		log.Printf("round %d %-22s %10.0f/s", round, name, rate)
	})
	if err != nil {
		return nil, err
	}
	drains, err := measurePGDrains(ctx, cfg, pg)
	if err != nil {
		return nil, err
	}
	rows := []bench.Row{{What: "goqite v0.4.0 send → receive → delete", Value: bench.Summarize(rates["goqite"]), Unit: "events/s"},
		{What: fmt.Sprintf("batched relay cycle at %d (EnqueueBatch → ClaimBatch → ReceiveBatch → SettleBatch)", riverBatch), Value: bench.Summarize(rates[fmt.Sprintf("relay/batch-%d", riverBatch)]), Unit: "events/s"}}
	rows = append(rows, riverSQLiteRows(rates)...)
	rows = append(rows, pgRows(cfg, rates, drains, pg)...)
	var b bytes.Buffer
	fmt.Fprintf(&b, "`benchrun -pg-only` (%s mode) on %s UTC; the run took %s. Machine: %s; Go %s.\n\n",
		cfg.name, start.UTC().Format("2006-01-02 15:04"), time.Since(start).Round(time.Second), bench.Machine(), runtime.Version())
	fmt.Fprintf(&b, "- Single-process cases: warmed up for %s, then %s per round, %d rounds, interleaved in an order rotated every round; median (min–max) over the rounds.\n",
		cfg.plan.Warmup, cfg.plan.Slice, cfg.plan.Rounds)
	b.WriteString(pgHeader(cfg, pg))
	b.WriteString("\n")
	if err := bench.WriteTable(&b, rows); err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "\n## Targets missed in this run\n\n")
	if err := bench.WriteMisses(&b, rows); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// pgRuntimeRows set the relay runtime with queue and receiver on
// PostgreSQL beside the same runtime on SQLite, measured in the same rounds.
func pgRuntimeRows(rates bench.Rates) []bench.Row {
	var rows []bench.Row
	for _, k := range []struct {
		kind  bench.RuntimeKind
		label string
		probe string // what relayprobe -pg measured of the case
	}{
		{bench.RuntimeInProcess, "in process", "a PostgreSQL wave of 15.3 to 15.7 events took 2.25 to 2.48 ms in the queue and 1.28 to 1.34 ms in the receiver (medians), where SQLite took 1.06 to 1.38 and 0.67 to 0.96 ms for 15.8"},
		{bench.RuntimeHTTP, "HTTP on loopback to a receiver server", "a PostgreSQL wave of 9.9 to 10.6 events took 2.36 to 2.43 ms in the queue and 1.25 to 1.32 ms in the receiver (medians), where SQLite took 1.28 to 1.64 and 0.75 to 0.93 ms for 11.1 to 12.3"},
	} {
		pg := rates[fmt.Sprintf("runtime-pg/%s/c16-b64", k.kind)]
		lite := rates[fmt.Sprintf("runtime/%s/c16-b64", k.kind)]
		rows = append(rows,
			bench.Row{What: fmt.Sprintf("PostgreSQL: relay runtime, %s, queue and receiver on PostgreSQL, concurrency 16, batch 64", k.label), Value: bench.Summarize(pg), Unit: "events/s"},
			bench.Row{What: fmt.Sprintf("  the same on SQLite (%s)", k.label), Value: bench.Summarize(lite), Unit: "events/s"})
		r := bench.Summarize(bench.Ratio(pg, lite, 1))
		rows = append(rows, bench.Row{What: fmt.Sprintf("PostgreSQL ÷ SQLite: relay runtime, %s", k.label), Value: r, Verb: "%.2f", Unit: "ratio",
			Target: "≥ 0.8", Met: bench.AtLeast(r.Median, 0.8),
			Why: "Each wave is one SettleClaimBatch and then one receive batch, each one call on the server and one commit on the common path (docs/decisions/relay-waves.md, docs/decisions/postgres-server-side-transitions.md). Timed call by call (bench/cmd/relayprobe -pg, 2026-12-06, two alternated runs), " + k.probe + ". So both halves cost about twice SQLite's, and round trips are not the reason: the receive measured the same with two round trips as with one, and inside a wave's settle_claim the server's own statements took 1.55 to 1.68 ms of the 2.24 to 2.40 ms the client saw (pg_stat_user_functions, BenchmarkSettleClaimWave, 16 events). That work is mostly row updates and their index entries (a flows row is updated twice per event and its indexed columns change each time, so never heap-only), then two WAL flushes, on a server that shares the relay's 2 cores. A wave holds at most 16 events here (docs/decisions/postgres-per-event-cost.md). Fewer index writes per flows update were measured and are not the gap: without flows_head_enqueued and flows_ready_due (two of the indexes each update writes; OldestWaiting and OldestDue read them) BenchmarkSettleClaimWave ran about 3 % faster (docs/decisions/postgres-hot-updates.md). Overlapping waves remain to try."})
	}
	return rows
}
