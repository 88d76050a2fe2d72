package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/fairrelay/fairrelay/bench"
)

var (
	shardBackend = flag.String("shard-backend", "", "internal: the shard drain child's backend (sqlite, pg)")
	shardsOnly   = flag.Bool("shards-only", false, "measure only the shard drains (for working on them)")
	shardOwn     = flag.Bool("shard-own", false, "internal: the shard drain child drains one shard alone")
)

// shardCombos are the shard drains measured: processes = shards on the
// diagonal, each process over every shard and, again, one relay process
// per shard; plus one process on eight shards and eight processes on one
// shard (9 of the combinations of 1, 2, 4, 8, to keep the run short); and
// bigger waves, as a relay run with --concurrency and --batch of 64 or
// 256 claims them: one relay on one shard (each size's baseline), and two
// and four relays one per shard. One relay process per core, each on its
// own shard, at the biggest wave is the best configuration on two cores
// (docs/decisions/river-comparison.md), to set beside River's best.
var shardCombos = []bench.ShardCombo{{Procs: 1, Shards: 1}, {Procs: 2, Shards: 2}, {Procs: 4, Shards: 4}, {Procs: 8, Shards: 8},
	{Procs: 2, Shards: 2, PerShard: true}, {Procs: 4, Shards: 4, PerShard: true}, {Procs: 8, Shards: 8, PerShard: true},
	{Procs: 1, Shards: 8}, {Procs: 8, Shards: 1},
	{Procs: 1, Shards: 1, Batch: shardWave}, {Procs: 2, Shards: 2, PerShard: true, Batch: shardWave}, {Procs: 4, Shards: 4, PerShard: true, Batch: shardWave},
	{Procs: 1, Shards: 1, Batch: shardBigWave}, {Procs: 2, Shards: 2, PerShard: true, Batch: shardBigWave}}

// shardWave and shardBigWave are the claims per SettleClaimBatch of the
// bigger-wave combinations: a relay run with --concurrency 64 (whose
// --batch defaults to 64), and one run with --concurrency 256 --batch 256.
const (
	shardWave    = 64
	shardBigWave = 256
)

// shardBatch is the claims per SettleClaimBatch of a shard drain child, as
// the PostgreSQL drains.
const shardBatch = pgDrainBatch

// shardDrains are the shard drains' results on one backend, or why there
// are none; river is, on PostgreSQL, River's burn-down at its own best
// settings, one per round of the drains (bench.RiverPGBurnDown).
type shardDrains struct {
	backend string
	results map[bench.ShardCombo][]bench.ShardDrainResult
	river   []float64
	skipped string
}

// shardPer is the events per flow (1,000 flows) of a shard drain's
// backlog: enough for 60,000 events/s over the whole drain (one process
// on one SQLite shard drained 45,000 in 1.8 s on a slower machine, and
// 39,275 events/s at a batch of 64 in 2 s; a child that finds its shard
// empty fails the run).
func shardPer(cfg config) int { return max(cfg.drainPer, int(60*cfg.shardFor.Seconds())) }

// measureShards runs the shard drains on SQLite and, when the server is
// there, on PostgreSQL. A backend whose stores cannot be sharded (a store
// that records no shard label) is skipped with a line saying so.
func measureShards(ctx context.Context, dir string, cfg config, pg pgServer) ([]shardDrains, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	backends := []bench.ShardBackend{bench.SQLiteShards()}
	var out []shardDrains
	if pg.skipped == "" {
		backends = append(backends, bench.PGShards(pg.url))
	} else {
		out = append(out, shardDrains{backend: "pg", skipped: pg.skipped})
	}
	for _, b := range backends {
		log.Printf("%s shard drains: %d rounds of %d combinations, %s each, 1,000 flows × %d events", b.Name, cfg.shardRnds, len(shardCombos), cfg.shardFor, shardPer(cfg))
		var peer func(context.Context) (float64, error)
		if b.Name == "pg" {
			peer = func(ctx context.Context) (float64, error) {
				rate, err := bench.RiverPGBurnDown(ctx, pg.url, bench.RiverBurnDownJobs)
				log.Printf("pg shard drains' peer: River burn-down of %d jobs %6.0f/s", bench.RiverBurnDownJobs, rate)
				return rate, err
			}
		}
		res, river, err := bench.MeasureShardDrains(ctx, b, filepath.Join(dir, "shards-"+b.Name), exe, shardCombos, cfg.shardRnds, cfg.drainFlow, shardPer(cfg), shardBatch, cfg.shardFor,
			peer, func(round int, r bench.ShardDrainResult) {
				log.Printf("round %d %s shards %d procs × %d shards %6.0f/s, share %.2f–%.2f, served cv %.3f (%d–%d), errors %d, CPU busy %.0f%% (I/O wait %.0f%%)",
					round, b.Name, r.ShardCombo.Procs, r.Shards, r.Rate, r.MinShare, r.MaxShare, r.ServedCV, r.ServedMin, r.ServedMax, r.OtherErrs, 100*r.CPUBusy, 100*r.CPUIOWait)
			})
		if err != nil {
			// A backend not yet sharded is a line in the report, not a
			// failed run; any other error fails it.
			if s := fmt.Sprint(err); bench.IsShardUnsupported(err) {
				log.Printf("%s shard drains skipped: %s", b.Name, s)
				out = append(out, shardDrains{backend: b.Name, skipped: s})
				continue
			}
			return nil, err
		}
		out = append(out, shardDrains{backend: b.Name, results: res, river: river})
	}
	return out, nil
}

// shardRows are the shard drains' rows: per backend and combination, the
// total, the ratio to one process on one shard (within the round) and the
// served-count spread.
func shardRows(ds []shardDrains) []bench.Row {
	var rows []bench.Row
	for _, d := range ds {
		name := map[string]string{"sqlite": "SQLite", "pg": "PostgreSQL"}[d.backend]
		if d.skipped != "" {
			continue // said in the header (shardHeader)
		}
		for _, c := range shardCombos {
			rs := d.results[c]
			if len(rs) == 0 {
				continue
			}
			// A combination's baseline is one process on one shard at
			// the same batch, so that a ratio measures scaling alone.
			baseCombo := bench.ShardCombo{Procs: 1, Shards: 1, Batch: c.Batch}
			base := d.results[baseCombo]
			var total, ratio, cv, spread, minShare, errs, busy, iowait []float64
			for i, r := range rs {
				if r.CPUBusy >= 0 {
					busy, iowait = append(busy, 100*r.CPUBusy), append(iowait, 100*r.CPUIOWait)
				}
				total = append(total, r.Rate)
				cv = append(cv, r.ServedCV)
				spread = append(spread, float64(r.ServedMax-r.ServedMin))
				minShare = append(minShare, r.MinShare)
				errs = append(errs, float64(r.OtherErrs))
				if i < len(base) && base[i].Rate > 0 {
					ratio = append(ratio, r.Rate/base[i].Rate)
				}
			}
			label := shardLabel(name, c)
			rows = append(rows, bench.Row{What: label + ": total", Value: bench.Summarize(total), Unit: "events/s"})
			if c != baseCombo {
				of := "1 process on 1 shard"
				if c.Batch > 0 {
					of += fmt.Sprintf(" at SettleClaimBatch of %d", c.Batch)
				}
				row := bench.Row{What: label + ": total ÷ " + of, Value: bench.Summarize(ratio), Verb: "%.2f", Unit: "ratio"}
				if c == shardGoalCombo {
					goal, why := shardGoal(name)
					row.Target, row.Met, row.Why = fmt.Sprintf("≥ %g", goal), bench.AtLeast(row.Value.Median, goal), why
				}
				rows = append(rows, row)
			}
			if len(busy) > 0 {
				// What explains a total that does not grow with
				// processes and shards: the machine's CPUs were already
				// busy (or waiting for the disk) at 1 process on 1 shard.
				rows = append(rows,
					bench.Row{What: label + ": machine CPU busy while it ran (every process, the database server's too)", Value: bench.Summarize(busy), Unit: "% of all CPUs"},
					bench.Row{What: label + ": machine CPU waiting for I/O while it ran", Value: bench.Summarize(iowait), Unit: "% of all CPUs"})
			}
			rows = append(rows,
				bench.Row{What: label + ": served-count CV over flows", Value: bench.Summarize(cv), Verb: "%.3f", Unit: "ratio"},
				bench.Row{What: label + ": largest − smallest served count of a flow", Value: bench.Summarize(spread), Unit: "events"})
			if c.Procs > 1 {
				rows = append(rows, bench.Row{What: label + ": smallest process share ÷ fair share", Value: bench.Summarize(minShare), Verb: "%.2f", Unit: "ratio"})
			}
			if e := bench.Summarize(errs); e.Max > 0 {
				rows = append(rows, bench.Row{What: label + ": errors per round", Value: e, Unit: "count", Target: "0", Met: "NO", Why: "First error: " + rs[0].FirstError})
			}
		}
	}
	return rows
}

// shardGoalCombo is the combination the shards' scaling goal is set on:
// four relays on four shards, one per shard, at a relay's default batch.
var shardGoalCombo = bench.ShardCombo{Procs: 4, Shards: 4, PerShard: true}

// shardGoal is the least total ÷ 1 process on 1 shard that
// shardGoalCombo should reach on the backend called name, and why it may
// not on this project's machine.
func shardGoal(name string) (float64, string) {
	if name == "PostgreSQL" {
		return 2, "The cores are the limit, not the shards: one relay on one shard already keeps the machine about half busy (the 1 on 1 CPU row: the relay and the server's backend share the same 2 cores), so no number of relays can do much more than double it, and 4 on 4 runs the cores nearly full (its CPU row). The goal needs the server's backends on cores of their own (docs/scale.md)."
	}
	return 1.5, "One relay per shard gives each shard one writer, and then the total follows the cores: compare the CPU rows of 1 on 1 and 4 on 4. On this project's faster machine the same design gave 1.82 (docs/scale.md)."
}

// shardLabel names combination c on the backend called name.
func shardLabel(name string, c bench.ShardCombo) string { return name + ", " + comboLabel(c) }

// comboLabel names combination c: its processes, shards and batch.
func comboLabel(c bench.ShardCombo) string {
	batch := shardBatch
	if c.Batch > 0 {
		batch = c.Batch
	}
	if c.PerShard {
		return fmt.Sprintf("%d relay processes, one per shard of %d (SettleClaimBatch of %d)", c.Procs, c.Shards, batch)
	}
	return fmt.Sprintf("%d relay process%s on %d shard%s (SettleClaimBatch of %d)", c.Procs, plural(c.Procs, "es"), c.Shards, plural(c.Shards, "s"), batch)
}

// shardRiverRows set the best PostgreSQL shard drain (the combination
// with the highest median total) beside River at its own best settings:
// its burn-down (a backlog inserted untimed, then drained, as our drains
// are), measured in the rounds of the drains, round by round; and, for
// reference, its run with inserts going on (rates, measured in the
// interleaved rounds of the other cases), by medians only, since the two
// phases share no round.
func shardRiverRows(ds []shardDrains, rates bench.Rates) []bench.Row {
	for _, d := range ds {
		if d.backend != "pg" || d.skipped != "" || len(d.river) == 0 {
			continue
		}
		var best bench.ShardCombo
		var bestTotals []float64
		bestMedian := -1.0
		for _, c := range shardCombos {
			var totals []float64
			for _, r := range d.results[c] {
				totals = append(totals, r.Rate)
			}
			if len(totals) == 0 {
				continue
			}
			if m := bench.Summarize(totals).Median; m > bestMedian {
				best, bestTotals, bestMedian = c, totals, m
			}
		}
		if bestMedian < 0 {
			return nil
		}
		burn := bench.Summarize(d.river)
		r := bench.Summarize(bench.Ratio(bestTotals, d.river, 1))
		rows := []bench.Row{
			{What: fmt.Sprintf("PostgreSQL: River %s at its own best settings, burn-down (`river bench -n`): %s jobs inserted untimed (InsertMany of %s), then %s no-op workers → completed; once in each round of the shard drains", bench.RiverVersion, thousands(bench.RiverBurnDownJobs), thousands(bench.RiverBestBatch), thousands(bench.RiverBestWorkers)),
				Value: burn, Unit: "events/s"},
			{What: "PostgreSQL: best shard drain (" + comboLabel(best) + ") ÷ River's burn-down at its own best settings (within each round)", Value: r, Verb: "%.2f", Unit: "ratio",
				Target: "≥ 1", Met: bench.AtLeast(r.Median, 1),
				Why: "Both drain a backlog loaded untimed from the same server on the same 2 shared cores; River completes its jobs in bulk (one UPDATE for thousands of completions), a relay settles and claims at most a batch per transaction, in fair order, with a commit each (docs/decisions/river-comparison.md)."},
		}
		if cont := rates[fmt.Sprintf("river-pg/w%d-batch-%d", bench.RiverBestWorkers, bench.RiverBestBatch)]; len(cont) > 0 {
			m := bestMedian / bench.Summarize(cont).Median
			rows = append(rows, bench.Row{What: "PostgreSQL: best shard drain ÷ River at its own best settings with inserts going on (medians of two phases, not paired by round)",
				Value: bench.Summarize([]float64{m}), Verb: "%.2f", Unit: "ratio"})
		}
		return rows
	}
	return nil
}

func plural(n int, suffix string) string {
	if n == 1 {
		return ""
	}
	return suffix
}

// shardHeader is the header's bullet on the shard drains.
func shardHeader(cfg config, ds []shardDrains) string {
	h := fmt.Sprintf("- Shard drains: %d rounds; in each, for every combination of relay processes × shards (1×1, 2×2, 4×4, 8×8, 1×8, 8×1, and 2, 4 and 8 processes one per shard, and 1×1, 2 and 4 one per shard at SettleClaimBatch of 64, a relay's --concurrency 64, and 1×1 and 2 one per shard at 256, a relay's --concurrency 256 --batch 256; order rotated by round), a fresh set of shards (SQLite: one file each; PostgreSQL: one schema each) is created with shard.Create and loaded through one shard.Store (%s flows × %d events, each flow in its shard; × the shard count when one process drains each shard), untimed; then that many OS processes, each opening its own shard.Store over the same set (or, one per shard, process k opening shard k alone, as a relay over one shard does), are released together and drain it for %s, each making one ClaimBatch(%d) and then looping SettleClaimBatch. A total is events ÷ the longest process's time; its ratio is to 1 process on 1 shard at the same batch in the same round. The spread is over the flows' served counts when the drain ends (docs/decisions/bench-method.md). On PostgreSQL each round ends with River's burn-down at its own best settings, as `river bench -n` runs it: in a fresh schema, %s jobs inserted with InsertMany of %s and analyzed, untimed; then a client of %s no-op workers (riverbench's fetch settings) timed from its start until its completed events have counted every job; the best drain's ratio to it is taken within the round.\n",
		cfg.shardRnds, thousands(cfg.drainFlow), shardPer(cfg), cfg.shardFor, shardBatch, thousands(bench.RiverBurnDownJobs), thousands(bench.RiverBestBatch), thousands(bench.RiverBestWorkers))
	for _, d := range ds {
		if d.skipped != "" {
			h += fmt.Sprintf("- Shard drains on %s not measured: %s\n", d.backend, d.skipped)
		}
	}
	return h
}

// shardsReport is the report of a -shards-only run.
func shardsReport(cfg config, start time.Time, ds []shardDrains) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "`benchrun -shards-only` (%s mode) on %s UTC; the run took %s. Machine: %s; Go %s.\n\n",
		cfg.name, start.UTC().Format("2006-01-02 15:04"), time.Since(start).Round(time.Second), bench.Machine(), runtime.Version())
	b.WriteString(shardHeader(cfg, ds))
	b.WriteString("\n")
	if err := bench.WriteTable(&b, append(shardRows(ds), shardRiverRows(ds, nil)...)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// runShardsOnly measures only the shard drains.
func runShardsOnly(ctx context.Context, dir string, cfg config) ([]byte, error) {
	start := time.Now()
	ds, err := measureShards(ctx, dir, cfg, findPG(ctx))
	if err != nil {
		return nil, err
	}
	return shardsReport(cfg, start, ds)
}
