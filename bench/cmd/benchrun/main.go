// Command benchrun measures fairrelay side by side with the storage ceiling and
// goqite and writes one markdown table, with a short header saying how it was
// measured, to stdout and to the -out file. Progress goes to stderr.
//
//	go run ./cmd/benchrun -out ../docs/performance.md [-quick]
//	go run ./cmd/benchrun -bulk-redrive-only [-quick]   # only the bulk redrive rows
//	go run ./cmd/benchrun -pg-only [-quick]             # only the PostgreSQL and River rows
//	go run ./cmd/benchrun -outage-only [-quick]         # only the outage rows
//	go run ./cmd/benchrun -retention-only [-quick]      # only the retention rows
//
// The PostgreSQL rows run against FAIRRELAY_POSTGRES, else
// postgres://postgres@127.0.0.1:5432/test; with no server they are skipped
// with one line saying so.
//
// It re-runs itself as the claimant processes of the multi-process drains.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/bench"
	"github.com/fairrelay/fairrelay/queue"
)

// notes is the prose under the table: the fair-writers analysis and how to run.
//
//go:embed notes.md
var notes string

func main() {
	out := flag.String("out", "", "file to write the report to (stdout only when empty)")
	quick := flag.Bool("quick", false, "a short smoke run: fewer rounds, shorter slices, smaller backlogs")
	keep := flag.Bool("keep", false, "keep the temporary directory with the databases")
	child := flag.String("child", "", "internal: run as a drain child of this kind (queue, raw, pg)")
	db := flag.String("db", "", "internal: the drain child's database (for pg: its schema)")
	pgURL := flag.String("pg-url", "", "internal: the pg drain child's server")
	batch := flag.Int("batch", 16, "internal: the pg drain child's ClaimBatch size")
	turn := flag.String("turn", "", "internal: the raw drain child's turn mode")
	drainsOnly := flag.Bool("drains-only", false, "measure only the multi-process drains (for working on them)")
	drainFor := flag.Duration("drain-for", 0, "how long each drain runs (0: the mode's default)")
	drainRounds := flag.Int("drain-rounds", 0, "drain rounds (0: the mode's default)")
	drainOnly := flag.String("drain", "", "run only this drain (queuestore, raw-busy_timeout, raw-writer_queue, raw-writer_keep, pg)")
	redriveOnly := flag.Bool("bulk-redrive-only", false, "measure only the bulk redrive rows (for working on them)")
	runtimeOnly := flag.Bool("runtime-only", false, "measure only the relay runtime and the batched cycles it is compared with (for working on it)")
	claimSettleOnly := flag.Bool("claim-settle-only", false, "measure only the claim+settle rows, min_served and rotation (for working on them)")
	pgOnly := flag.Bool("pg-only", false, "measure only the PostgreSQL rows and River (on PostgreSQL and SQLite, with the cases they are compared with)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("benchrun: ")
	ctx := context.Background()

	if *child != "" {
		var err error
		switch *child {
		case "queue":
			err = bench.QueueChild(ctx, *db)
		case "pg":
			err = bench.PGQueueChild(ctx, *pgURL, *db, *batch)
		case "shard":
			err = bench.ShardChild(ctx, *shardBackend, *pgURL, *db, *batch, *shardOwn)
		case "wake":
			err = bench.RuntimeWakeChild(ctx)
		case "raw":
			var proc int
			fmt.Sscan(os.Getenv(bench.EnvProc), &proc)
			err = bench.RawChild(ctx, *db, bench.Turn(*turn), proc)
		default:
			err = fmt.Errorf("unknown child kind %q", *child)
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}

	cfg := full
	if *quick {
		cfg = quickCfg
	}
	dir, err := os.MkdirTemp("", "fairrelay-bench-")
	if err != nil {
		log.Fatal(err)
	}
	if !*keep {
		defer os.RemoveAll(dir)
	} else {
		log.Printf("databases in %s", dir)
	}
	cfg.drainsOnly = *drainsOnly
	if *drainFor > 0 {
		cfg.drainFor = *drainFor
	}
	if *drainRounds > 0 {
		cfg.drainRnds = *drainRounds
	}
	cfg.drainOnly = *drainOnly
	cfg.redriveOnly = *redriveOnly
	if cfg.redriveOnly && (cfg.drainsOnly || cfg.drainOnly != "") {
		log.Fatal("-bulk-redrive-only measures no drain: leave out -drains-only and -drain")
	}
	cfg.runtimeOnly = *runtimeOnly
	cfg.claimSettleOnly = *claimSettleOnly
	cfg.pgOnly = *pgOnly
	if cfg.pgOnly && (cfg.drainsOnly || cfg.redriveOnly || cfg.runtimeOnly || cfg.claimSettleOnly || cfg.drainOnly != "") {
		log.Fatal("-pg-only measures nothing else: leave out the other -*-only flags and -drain")
	}
	if cfg.claimSettleOnly && (cfg.drainsOnly || cfg.redriveOnly || cfg.runtimeOnly || cfg.drainOnly != "") {
		log.Fatal("-claim-settle-only measures nothing else: leave out the other -*-only flags and -drain")
	}
	report, err := run(ctx, dir, cfg)
	if err != nil {
		log.Fatal(err)
	}
	os.Stdout.Write(report)
	if *out != "" {
		if err := os.WriteFile(*out, report, 0o644); err != nil {
			log.Fatal(err)
		}
		log.Printf("wrote %s", *out)
	}
}

// config sizes one run.
type config struct {
	name      string
	plan      bench.Plan
	flows     []int // claim+settle backlogs: number of flows
	minEvents int   // events loaded at least, per claim+settle backlog
	batches   []int
	procs     int
	drainFor  time.Duration
	drainRnds int
	drainFlow int // flows × perFlow in the drain backlog
	drainPer  int

	redriveN   int // quarantined events of the bulk redrive rows
	redriveRnd int

	runtimePer int           // events per flow (1000 flows) in the runtime backlogs
	wakeN      int           // same-process wake-up samples
	wakeOtherN int           // other-process wake-up samples
	idleFor    time.Duration // idle CPU measurement

	drainsOnly  bool
	drainOnly   string
	redriveOnly bool
	runtimeOnly bool

	claimSettleOnly bool
	pgOnly          bool

	pgFlows     []int // PostgreSQL claim+settle backlogs: the smallest and the largest number of flows
	pgMinEvents int   // events loaded at least, per PostgreSQL claim+settle backlog

	steadyEvents int           // events of each steady-load run of the retention rows
	shardFor     time.Duration // how long each shard drain runs
	shardRnds    int           // shard drain rounds
	pgSteadyBoth bool          // the PostgreSQL steady load without retention too (-retention-only)
}

var (
	full = config{
		name:  "full",
		plan:  bench.Plan{Rounds: 5, Slice: 1500 * time.Millisecond, Warmup: 200 * time.Millisecond},
		flows: []int{10, 1000, 100000}, minEvents: 30000,
		batches: []int{1, 16, 64},
		procs:   8, drainFor: 5 * time.Second, drainRnds: 3, drainFlow: 1000, drainPer: 40,
		redriveN: 10000, redriveRnd: 5,
		// runtimePer: a backlog has to outlast 5 rounds of warm-up and
		// slice; at 100 a flow the in-process case at concurrency 16 drained
		// its 100,000 events within a run on a quiet machine (10,300/s).
		runtimePer: 250, wakeN: 50, wakeOtherN: 10, idleFor: 3 * time.Second,
		pgFlows: []int{10, 100000}, pgMinEvents: 10000,
		steadyEvents: 200000,
		shardFor:     2 * time.Second, shardRnds: 3,
	}
	quickCfg = config{
		name:  "quick",
		plan:  bench.Plan{Rounds: 2, Slice: 250 * time.Millisecond, Warmup: 50 * time.Millisecond},
		flows: []int{10, 1000, 10000}, minEvents: 4000,
		batches: []int{1, 16, 64},
		procs:   8, drainFor: time.Second, drainRnds: 1, drainFlow: 1000, drainPer: 5,
		redriveN: 1000, redriveRnd: 1,
		runtimePer: 15, wakeN: 10, wakeOtherN: 3, idleFor: time.Second,
		pgFlows: []int{10, 10000}, pgMinEvents: 2000,
		steadyEvents: 20000,
		shardFor:     time.Second, shardRnds: 1,
	}
)

func run(ctx context.Context, dir string, cfg config) ([]byte, error) {
	if cfg.pgOnly {
		return runPGOnly(ctx, dir, cfg)
	}
	if *outageOnly {
		return runOutageOnly(ctx, dir, cfg)
	}
	if *retentionOnly {
		return runRetentionOnly(ctx, dir, cfg)
	}
	if *shardsOnly {
		return runShardsOnly(ctx, dir, cfg)
	}
	if *destinationsOnly {
		return runDestinationsOnly(ctx, dir, cfg)
	}
	start := time.Now()
	version, err := sqliteVersion(ctx, dir)
	if err != nil {
		return nil, err
	}
	progress := func(round int, name string, rate float64) {
		log.Printf("round %d %-18s %10.0f/s", round, name, rate)
	}

	// Single-process cases, interleaved.
	cases := []bench.Case{bench.Ceiling(), bench.Goqite(), bench.RelayCycle()}
	for _, n := range cfg.flows {
		cases = append(cases, bench.ClaimSettle(n, (cfg.minEvents+n-1)/n))
	}
	// The opt-in rotation order at the smallest and the largest backlog.
	rotLo, rotHi := cfg.flows[0], cfg.flows[len(cfg.flows)-1]
	rotCases := []bench.Case{
		bench.ClaimSettleRotation(rotLo, (cfg.minEvents+rotLo-1)/rotLo),
		bench.ClaimSettleRotation(rotHi, (cfg.minEvents+rotHi-1)/rotHi),
	}
	cases = append(cases, rotCases...)
	cases = append(cases, destCostCases(cfg)...)
	cases = append(cases, pruneCostCases(cfg)...)
	if cfg.claimSettleOnly {
		cases = nil
		for _, n := range cfg.flows {
			cases = append(cases, bench.ClaimSettle(n, (cfg.minEvents+n-1)/n))
		}
		cases = append(cases, rotCases...)
		cases = append(cases, destCostCases(cfg)...)
		log.Printf("setting up %d cases (loading backlogs)", len(cases))
		rates, err := bench.Measure(ctx, filepath.Join(dir, "cases"), cases, cfg.plan, progress)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := bench.WriteTable(&b, claimSettleRows(cfg, rates)); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	for _, b := range cfg.batches {
		cases = append(cases, bench.BatchedRelayCycle(b))
	}
	// The batched cycle at 64 once more with its files in memory: what
	// its CPU alone allows, the bound of its ratio to goqite.
	if c, ok := bench.OnTmpfs(bench.BatchedRelayCycle(64)); ok {
		cases = append(cases, c)
	}
	if cfg.runtimeOnly {
		cases = []bench.Case{bench.BatchedRelayCycle(16), bench.BatchedRelayCycle(64)}
	}
	pg := pgServer{skipped: notThisMode}
	if !cfg.runtimeOnly && !cfg.redriveOnly && (cfg.drainOnly == "" || cfg.drainOnly == "pg") {
		pg = findPG(ctx)
	}
	if !cfg.runtimeOnly {
		cases = append(cases, riverSQLiteCases(cfg)...)
		cases = append(cases, pgCases(cfg, pg)...)
	}

	sleepTimes := &bench.HandlerTimes{}
	cases = append(cases, runtimeCases(cfg, sleepTimes)...)
	rates := bench.Rates{}
	var once runtimeOnce
	if !cfg.drainsOnly && !cfg.redriveOnly {
		log.Printf("setting up %d cases (loading backlogs)", len(cases))
		rates, err = bench.Measure(ctx, filepath.Join(dir, "cases"), cases, cfg.plan, progress)
		if err != nil {
			return nil, err
		}
		if once, err = measureRuntimeOnce(ctx, filepath.Join(dir, "runtime"), cfg); err != nil {
			return nil, err
		}
	}
	if cfg.runtimeOnly {
		var b bytes.Buffer
		if err := bench.WriteTable(&b, runtimeRows(rates, once, sleepTimes.Means())); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\nbatched relay cycle at 16: %.0f events/s, at 64: %.0f events/s\n",
			bench.Summarize(rates["relay/batch-16"]).Median, bench.Summarize(rates["relay/batch-64"]).Median)
		return b.Bytes(), nil
	}

	// What each cycle's commits write to the WAL: part of the
	// explanations of the single-event and goqite goals.
	var pages walPageSets
	if !cfg.drainsOnly && !cfg.redriveOnly {
		if pages, err = measureWALPages(ctx, filepath.Join(dir, "walpages")); err != nil {
			return nil, err
		}
	}

	// Bulk redrive against one Redrive call per event.
	var redrives []bench.BulkRedriveRound
	if !cfg.drainsOnly {
		log.Printf("quarantining %d events for the bulk redrive template", cfg.redriveN)
		tmpl := filepath.Join(dir, "quarantined-template.db")
		if err := bench.MakeQuarantinedTemplate(ctx, tmpl, cfg.redriveN); err != nil {
			return nil, err
		}
		redrives, err = bench.MeasureBulkRedrive(ctx, filepath.Join(dir, "redrive"), tmpl, cfg.redriveN, cfg.redriveRnd,
			func(round int, r bench.BulkRedriveRound) {
				log.Printf("round %d bulk redrive %8.0f/s, one at a time %6.0f/s, ratio %.1f", round, r.Bulk, r.OneByOne, r.Bulk/r.OneByOne)
			})
		if err != nil {
			return nil, err
		}
	}

	// Multi-process drains, interleaved.
	drains := map[string][]bench.DrainRound{}
	if !cfg.redriveOnly && cfg.drainOnly != "pg" {
		if drains, err = measureDrains(ctx, dir, cfg); err != nil {
			return nil, err
		}
	}
	var pgDrains map[int][]bench.DrainSummary
	if !cfg.redriveOnly {
		if pgDrains, err = measurePGDrains(ctx, cfg, pg); err != nil {
			return nil, err
		}
	}

	var shards []shardDrains
	if !cfg.drainsOnly && !cfg.redriveOnly {
		if shards, err = measureShards(ctx, filepath.Join(dir, "shards"), cfg, pg); err != nil {
			return nil, err
		}
	}

	var outages []bench.OutageResult
	if !cfg.drainsOnly && !cfg.redriveOnly {
		if outages, err = measureOutage(ctx, filepath.Join(dir, "outage"), cfg); err != nil {
			return nil, err
		}
	}

	var steady []steadyRun
	if !cfg.drainsOnly && !cfg.redriveOnly {
		if steady, err = measureRetention(ctx, filepath.Join(dir, "steady"), cfg, pg); err != nil {
			return nil, err
		}
	}

	var rows []bench.Row
	if !cfg.drainsOnly && !cfg.redriveOnly {
		rows = singleRows(cfg, rates, pages)
		rows = append(rows, retentionRows(cfg, steady, rates)...)
		rows = append(rows, runtimeRows(rates, once, sleepTimes.Means())...)
		rows = append(rows, outageRows(outages)...)
		rows = append(rows, bench.DestinationsRows(ctx, filepath.Join(dir, "destinations"), pg.url, pg.skipped, cfg.name == "quick", logDestinationsRound)...)
		rows = append(rows, riverSQLiteRows(rates)...)
	}
	if !cfg.drainsOnly {
		rows = append(rows, redriveRows(cfg, redrives)...)
	}
	rows = append(rows, drainRows(cfg, drains)...)
	rows = append(rows, pgRows(cfg, rates, pgDrains, pg)...)
	rows = append(rows, shardRows(shards)...)
	rows = append(rows, shardRiverRows(shards, rates)...)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Performance\n\n")
	fmt.Fprintf(&b, "Generated by `mage bench` (bench/cmd/benchrun, %s mode) on %s UTC; the run took %s.\n\n",
		cfg.name, start.UTC().Format("2006-01-02 15:04"), time.Since(start).Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s; shared and noisy, so read ranges, not single numbers.\n", bench.Machine())
	fmt.Fprintf(&b, "- Go %s, SQLite %s (modernc.org/sqlite v1.62.0, pure Go), real files under %s (the batched cycle at 64 also on %s, where fsync costs nothing, as the bound of its ratio to goqite).\n", runtime.Version(), version, os.TempDir(), bench.TmpfsDir)
	fmt.Fprintf(&b, "- Every case uses the stores' pragmas: WAL, synchronous=FULL, busy_timeout 10000 ms, foreign_keys ON, write transactions BEGIN IMMEDIATE.\n")
	fmt.Fprintf(&b, "- Single-process cases: each is set up first (backlogs loaded untimed with EnqueueBatch), warmed up for %s, then run for %s per round, %d rounds, the cases interleaved in an order rotated every round. A rate is items done ÷ wall time of the slice. A ratio is taken within one round, so both sides share that round's noise; the table gives median (min–max) over the rounds, and `met` judges the median.\n",
		cfg.plan.Warmup, cfg.plan.Slice, cfg.plan.Rounds)
	fmt.Fprintf(&b, "- Bulk redrive: %d rounds; in each, two fresh copies of one queue holding %s quarantined events (one per flow, quarantined untimed by a policy of MaxAttempts 1) are redriven, one with a single `RedriveAll` (every quarantined head, %s events and their audit rows per transaction), the other with `Quarantined` then one `Redrive` call (one transaction) per event; the two alternate which goes first. A rate is events redriven ÷ wall time of the redrive alone; the ratio is taken within the round.\n",
		cfg.redriveRnd, thousands(cfg.redriveN), thousands(queue.RedriveChunk))
	fmt.Fprintf(&b, "- Drains: %d rounds; in each, one OS process alone, then %d OS processes started together, drain a fresh copy of the same backlog (%d flows × %d events) for %s each, every event one Claim and one Settle. `met` for shares and SQLITE_BUSY judges the worst round. The raw rows are the prototype (cmd/writers): one-row claim/settle-like transactions on a bare table, with SQLite's busy_timeout alone (busy_timeout), with the writerlock module handing the turn over after every write (writer_queue), and with the writerlock module as the stores use it, kept runs of turns (writer_keep).\n",
		cfg.drainRnds, cfg.procs, cfg.drainFlow, cfg.drainPer, cfg.drainFor)
	b.WriteString(retentionHeader(cfg))
	b.WriteString(pgHeader(cfg, pg))
	if shards != nil {
		b.WriteString(shardHeader(cfg, shards))
	}
	b.WriteString("\n")
	if err := bench.WriteTable(&b, rows); err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "\n## Targets missed in this run\n\n")
	if err := bench.WriteMisses(&b, rows); err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "\n%s", notes)
	return b.Bytes(), nil
}

// measureDrains runs the multi-process drains.
func measureDrains(ctx context.Context, dir string, cfg config) (map[string][]bench.DrainRound, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// Enough for 3,000 events/s over the whole drain: it must not run dry.
	cfg.drainPer = max(cfg.drainPer, int(3*cfg.drainFor.Seconds()))
	tmpl := filepath.Join(dir, "drain-template.db")
	if err := bench.MakeQueueTemplate(ctx, tmpl, cfg.drainFlow, cfg.drainPer); err != nil {
		return nil, err
	}
	rawBacklog := cfg.drainFlow * cfg.drainPer * 2
	specs := []bench.DrainSpec{
		bench.QueueDrain("queuestore", tmpl, "-child", "queue"),
		bench.RawDrain(bench.TurnBusyTimeout, rawBacklog, "-child", "raw"),
		bench.RawDrain(bench.TurnWriterQueue, rawBacklog, "-child", "raw"),
		bench.RawDrain(bench.TurnWriterKeep, rawBacklog, "-child", "raw"),
	}
	if cfg.drainOnly != "" {
		var only []bench.DrainSpec
		for _, sp := range specs {
			if sp.Name == cfg.drainOnly {
				only = append(only, sp)
			}
		}
		if len(only) == 0 {
			return nil, fmt.Errorf("no drain named %q", cfg.drainOnly)
		}
		specs = only
	}
	drains, err := bench.MeasureDrains(ctx, filepath.Join(dir, "drains"), exe, specs, cfg.procs, cfg.drainRnds, cfg.drainFor,
		func(round int, name string, r bench.DrainRound) {
			log.Printf("round %d drain %-24s 1 proc %5.0f/s, %d procs %5.0f/s, share %.2f–%.2f, longest write %s, busy %d, errors %d",
				round, name, r.One.Rate, r.Many.Procs, r.Many.Rate, r.Many.MinShare, r.Many.MaxShare,
				r.Many.MaxWrite.Round(time.Millisecond), r.Many.Busy, r.Many.OtherErrs)
		})
	return drains, err
}

// singleRows are the rows of the single-process cases, with what their
// commits write to the WAL (pages).
func singleRows(cfg config, rates bench.Rates, pages walPageSets) []bench.Row {
	ceil := rates["ceiling"]
	goq := rates["goqite"]
	rows := []bench.Row{
		{What: "storage ceiling: one-row `BEGIN IMMEDIATE; INSERT; COMMIT`", Value: bench.Summarize(ceil), Unit: "commits/s"},
		{What: "goqite v0.4.0 send → receive → delete", Value: bench.Summarize(goq), Unit: "events/s"},
		{What: "goqite cycle ÷ (ceiling/4)", Value: bench.Summarize(bench.Ratio(goq, ceil, 4)), Verb: "%.2f", Unit: "ratio"},
	}
	rows = append(rows, claimSettleRows(cfg, rates)...)

	relay := rates["relay/1-by-1"]
	rows = append(rows, bench.Row{What: "single-event relay cycle (enqueue → claim → receive → settle)", Value: bench.Summarize(relay), Unit: "events/s"})
	r := bench.Summarize(bench.Ratio(relay, ceil, 4))
	rows = append(rows, bench.Row{What: "single-event relay cycle ÷ (ceiling/4)", Value: r, Verb: "%.2f", Unit: "ratio", Target: "≥ 0.8", Met: bench.AtLeast(r.Median, 0.8),
		Why: singleWhy(pages)})
	for _, size := range cfg.batches {
		name := fmt.Sprintf("relay/batch-%d", size)
		rows = append(rows, bench.Row{What: fmt.Sprintf("batched relay cycle at %d (EnqueueBatch → ClaimBatch → ReceiveBatch → SettleBatch)", size), Value: bench.Summarize(rates[name]), Unit: "events/s"})
		g := bench.Summarize(bench.Ratio(rates[name], goq, 1))
		row := bench.Row{What: fmt.Sprintf("batched relay cycle at %d ÷ goqite cycle", size), Value: g, Verb: "%.2f", Unit: "ratio"}
		var extra []bench.Row
		if size == 64 {
			// The same cycle on /dev/shm, when measured: the bound of
			// its ratio to goqite.
			shm := rates[bench.TmpfsName(name)]
			bound := bench.Summarize(bench.Ratio(shm, goq, 1))
			row.Target, row.Met = "≥ 10", bench.AtLeast(g.Median, 10)
			row.Why = goqiteWhy(bound, bench.Summarize(rates[name]), bench.Summarize(shm), pages)
			if bound.N > 0 {
				extra = []bench.Row{
					{What: "batched relay cycle at 64 with its files on /dev/shm (fsync costs nothing)", Value: bench.Summarize(shm), Unit: "events/s"},
					{What: "batched relay cycle at 64 on /dev/shm ÷ goqite cycle (on disk)", Value: bound, Verb: "%.2f", Unit: "ratio"}}
			}
		}
		rows = append(append(rows, row), extra...)
	}
	return append(rows, walPageRows(pages)...)
}

// singleWhy explains a miss of the single-event cycle's goal with the
// pages its commits wrote in this run.
func singleWhy(pages walPageSets) string {
	return fmt.Sprintf("The cycle's four commits write %s WAL pages an event (%s; the WAL page rows below) where a ceiling commit writes %s, "+
		"and run about 250 µs of SQLite CPU (on /dev/shm: enqueue 69, claim 68, receive 55, settle 55 µs, docs/decisions/write-transactions-on-the-driver.md) where a ceiling commit runs about 30; "+
		"on 2 shared cores that CPU is not hidden behind the fsync. The wider the range, the more of the gap is noise.",
		medianOf(pagesPer(pages.single, false)), opPages(pages.single), medianOf(pagesPer(pages.ceiling, false)))
}

// goqiteWhy explains a miss of the goqite goal with this run's figures:
// the bound the same cycle on /dev/shm sets (bound, its ratio to goqite),
// the time a batch of 64 took on disk and on /dev/shm (from their rates),
// and the pages each commit wrote.
func goqiteWhy(bound, disk, shm bench.Summary, pages walPageSets) string {
	var b strings.Builder
	b.WriteString("At 64 events a transaction the stores are bound by CPU on per-event SQL and by what their commits write, goqite by fsync (three commits per event), so the ratio moves with the machine. ")
	if bound.N == 0 {
		b.WriteString("The same cycle on /dev/shm, where fsync costs nothing, was not measured in this run (no /dev/shm here). ")
	} else {
		fmt.Fprintf(&b, "In this run the same cycle with its files on /dev/shm, where fsync costs nothing, ran %.2f× goqite (the rows after this one): the most the stores' CPU allows against this run's goqite. ", bound.Median)
		fmt.Fprintf(&b, "On disk a batch took %.1f ms, on /dev/shm %.1f ms (medians): the difference is its four fsyncs and the %s pages its commits write to the WAL (%s), %s of them leaves of the (flow, seq) indexes of events and receipts. "+
			"The enqueue and the receive each add one entry to each flow of the batch and a flow's entries sit together, so a batch of 64 flows dirties at least one leaf per flow in each file, a whole page written for an entry of a few bytes; goqite writes %s pages an event in three commits (%s). ",
			64e3/disk.Median, 64e3/shm.Median, medianOf(pagesPer(pages.batch64, false)), opPages(pages.batch64),
			medianOf(pagesPer(pages.batch64, true)), medianOf(pagesPer(pages.goqite, false)), opPages(pages.goqite))
	}
	b.WriteString("Multi-row statements are in: ClaimBatch and SettleBatch run set statements; EnqueueBatch as set statements was tried twice and saved about 2% of its cost, so it stays per event (docs/decisions/sqlite-batch-statements.md). " +
		"What is left: on disk, a layout whose new entries do not take one leaf per flow (it must keep the per-flow lookups that the index serves: a head's successor, a flow's events in order); in CPU, the B-tree work of each event's rows and index entries (the queue's migration 8 took four of them off each event's path, docs/decisions/operator-reads-off-the-claim-path.md; those left serve the claim, the head lookup, OldestWaiting and retention).")
	return b.String()
}

// medianOf formats the median of xs as a whole number.
func medianOf(xs []float64) string { return fmt.Sprintf("%.0f", bench.Summarize(xs).Median) }

// claimSettleRows are the claim+settle rows: the default order at every
// backlog and its cost ratio, then the rotation order (docs/contract.md
// §7.6) at the smallest and the largest backlog and its cost ratio.
func claimSettleRows(cfg config, rates bench.Rates) []bench.Row {
	var rows []bench.Row
	lo, hi := cfg.flows[0], cfg.flows[len(cfg.flows)-1]
	for _, n := range cfg.flows {
		rows = append(rows, bench.Row{What: fmt.Sprintf("claim+settle at %d flows", n), Value: bench.Summarize(rates[fmt.Sprintf("claim+settle/%d", n)]), Unit: "events/s"})
	}
	cost := bench.Summarize(bench.Ratio(rates[fmt.Sprintf("claim+settle/%d", lo)], rates[fmt.Sprintf("claim+settle/%d", hi)], 1))
	rows = append(rows, bench.Row{What: fmt.Sprintf("claim+settle cost at %d flows ÷ at %d flows", hi, lo), Value: cost, Verb: "%.2f", Unit: "ratio",
		Target: "≤ 1.5", Met: bench.AtMost(cost.Median, 1.5),
		Why: "A claim is meant to be index-driven at any number of flows (queuestore's query-plan tests); a miss means either a plan regression there or noise: compare the range with the other rows of this run."})
	for _, n := range []int{lo, hi} {
		rows = append(rows, bench.Row{What: fmt.Sprintf("claim+settle at %d flows, rotation order", n), Value: bench.Summarize(rates[fmt.Sprintf("claim+settle-rotation/%d", n)]), Unit: "events/s"})
	}
	rcost := bench.Summarize(bench.Ratio(rates[fmt.Sprintf("claim+settle-rotation/%d", lo)], rates[fmt.Sprintf("claim+settle-rotation/%d", hi)], 1))
	rows = append(rows, bench.Row{What: fmt.Sprintf("claim+settle cost at %d flows ÷ at %d flows, rotation order", hi, lo), Value: rcost, Verb: "%.2f", Unit: "ratio",
		Target: "≤ 1.5", Met: bench.AtMost(rcost.Median, 1.5),
		Why: "The rotation's pick walks flows_rotation (ready, pass, joined) and its clamps read meta by key (queuestore's query-plan tests cover every rotation statement); a miss means a plan regression there or noise."})
	return append(rows, destCostRows(cfg, rates, "", "claim+settle-dests")...)
}

// destCostCases are the claim+settle cases over bench.CostDestinations
// registered destinations (docs/contract.md §7.11) at the smallest and the
// largest backlog.
func destCostCases(cfg config) []bench.Case {
	lo, hi := cfg.flows[0], cfg.flows[len(cfg.flows)-1]
	return []bench.Case{
		bench.ClaimSettleDests(lo, (cfg.minEvents+lo-1)/lo, bench.CostDestinations),
		bench.ClaimSettleDests(hi, (cfg.minEvents+hi-1)/hi, bench.CostDestinations),
	}
}

// destCostRows are the rows of the destination claim cases named
// prefix/<flows> (label: "" or "PostgreSQL: "): the rates at both backlogs
// and the cost ratio.
func destCostRows(cfg config, rates bench.Rates, label, prefix string) []bench.Row {
	flows := cfg.flows
	if label != "" {
		flows = cfg.pgFlows
	}
	lo, hi := flows[0], flows[len(flows)-1]
	var rows []bench.Row
	for _, n := range []int{lo, hi} {
		rows = append(rows, bench.Row{What: fmt.Sprintf("%sclaim+settle at %s flows over %d destinations", label, thousands(n), bench.CostDestinations),
			Value: bench.Summarize(rates[fmt.Sprintf("%s/%d", prefix, n)]), Unit: "events/s"})
	}
	cost := bench.Summarize(bench.Ratio(rates[fmt.Sprintf("%s/%d", prefix, lo)], rates[fmt.Sprintf("%s/%d", prefix, hi)], 1))
	return append(rows, bench.Row{What: fmt.Sprintf("%sclaim+settle cost at %s flows ÷ at %s flows, over %d destinations", label, thousands(hi), thousands(lo), bench.CostDestinations),
		Value: cost, Verb: "%.2f", Unit: "ratio", Target: "≤ 1.5", Met: bench.AtMost(cost.Median, 1.5),
		Why: "Each claim reads one index range per destination with room (the stores' plan tests), so both sizes read 100 ranges; what grows is the depth of each range's index and the pages a commit writes. A miss means a plan regression or noise: compare the range with the rows above."})
}

// redriveRows are the rows of the bulk redrive: both rates and their ratio.
func redriveRows(cfg config, rounds []bench.BulkRedriveRound) []bench.Row {
	var bulk, each, ratio []float64
	for _, r := range rounds {
		bulk = append(bulk, r.Bulk)
		each = append(each, r.OneByOne)
	}
	ratio = bench.Ratio(bulk, each, 1)
	n := thousands(cfg.redriveN)
	rs := bench.Summarize(ratio)
	return []bench.Row{
		{What: fmt.Sprintf("bulk redrive of %s quarantined events (`RedriveAll`, %s a transaction, one audit row each)", n, thousands(queue.RedriveChunk)), Value: bench.Summarize(bulk), Unit: "events/s"},
		{What: fmt.Sprintf("one-at-a-time `Redrive` of the same %s events", n), Value: bench.Summarize(each), Unit: "events/s"},
		{What: "bulk redrive ÷ one-at-a-time `Redrive`", Value: rs, Verb: "%.1f", Unit: "ratio", Target: "≥ 20", Met: bench.AtLeast(rs.Median, 20),
			Why: "One-at-a-time pays one durable commit (an fsync) per event, the bulk redrive one per 1,000 events, so the ratio is about the commit's cost over the per-event B-tree work of the bulk transaction (each chunk of 1,000 is one read and three set statements: events, flows, audit); a fast disk or busy cores shrink it. Compare the one-at-a-time rate with the storage ceiling of the same run."},
	}
}

// thousands writes n with a comma every three digits (10000 → "10,000").
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// drainRows are the rows of the multi-process drains.
func drainRows(cfg config, drains map[string][]bench.DrainRound) []bench.Row {
	var rows []bench.Row
	for _, name := range []string{"queuestore", "raw-busy_timeout", "raw-writer_queue", "raw-writer_keep"} {
		rounds := drains[name]
		if len(rounds) == 0 {
			continue
		}
		var one, many, ratio, minShare, maxShare, longest, longestAlone, busy, errs []float64
		for _, d := range rounds {
			one = append(one, d.One.Rate)
			many = append(many, d.Many.Rate)
			if d.One.Rate > 0 {
				ratio = append(ratio, d.Many.Rate/d.One.Rate)
			}
			minShare = append(minShare, d.Many.MinShare)
			maxShare = append(maxShare, d.Many.MaxShare)
			longest = append(longest, float64(d.Many.MaxWrite)/1e6)
			longestAlone = append(longestAlone, float64(d.One.MaxWrite)/1e6)
			busy = append(busy, float64(d.Many.Busy+d.One.Busy))
			errs = append(errs, float64(d.Many.OtherErrs+d.One.OtherErrs))
		}
		label := fmt.Sprintf("%d claimant processes, %s", cfg.procs, name)
		if name == "queuestore" {
			label += " (writerlock, DefaultKeep)"
		}
		why := map[string]string{
			"queuestore":       "See Fair writers below: the store takes turns, so a miss here is a wait the turn order did not bound, worth a look at the longest write.",
			"raw-busy_timeout": "Expected: this is the control, SQLite's busy handling alone (see Fair writers below).",
			"raw-writer_queue": "See Fair writers below.",
			"raw-writer_keep":  "See Fair writers below.",
		}[name]
		whyTotal := map[string]string{
			"queuestore":       handoverWhy,
			"raw-writer_keep":  handoverWhy,
			"raw-writer_queue": "Expected: this is the control for kept runs, the turn handed over after every write. " + handoverWhy,
		}[name]
		rs, ms, bs := bench.Summarize(ratio), bench.Summarize(minShare), bench.Summarize(busy)
		rows = append(rows,
			bench.Row{What: label + ": one process alone", Value: bench.Summarize(one), Unit: "events/s"},
			bench.Row{What: label + ": all together", Value: bench.Summarize(many), Unit: "events/s"},
			bench.Row{What: label + ": total ÷ one process", Value: rs, Verb: "%.2f", Unit: "ratio", Target: "≥ 0.8", Met: bench.AtLeast(rs.Median, 0.8), Why: whyTotal},
			bench.Row{What: label + ": smallest share ÷ fair share", Value: ms, Verb: "%.2f", Unit: "ratio", Target: "≥ 0.5", Met: bench.AtLeast(ms.Min, 0.5), Why: why},
			bench.Row{What: label + ": largest share ÷ fair share", Value: bench.Summarize(maxShare), Verb: "%.2f", Unit: "ratio"},
			bench.Row{What: label + ": longest write (wait included)", Value: bench.Summarize(longest), Unit: "ms", Target: "reported"},
			bench.Row{What: label + ": longest write, one process alone", Value: bench.Summarize(longestAlone), Unit: "ms"},
			bench.Row{What: label + ": SQLITE_BUSY errors per round", Value: bs, Unit: "count", Target: "0", Met: bench.AtMost(bs.Max, 0), Why: why},
		)
		if e := bench.Summarize(errs); e.Max > 0 {
			rows = append(rows, bench.Row{What: label + ": other errors per round", Value: e, Unit: "count", Target: "0", Met: "NO",
				Why: fmt.Sprintf("First error: %s", firstError(rounds))})
		}
	}
	return rows
}

func sqliteVersion(ctx context.Context, dir string) (string, error) {
	db, err := bench.OpenDB(filepath.Join(dir, "version.db"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	return bench.SQLiteVersion(ctx, db)
}

func firstError(rounds []bench.DrainRound) string {
	for _, d := range rounds {
		for _, e := range []string{d.One.FirstError, d.Many.FirstError} {
			if e != "" {
				return e
			}
		}
	}
	return "none recorded"
}

// handoverWhy explains a drain's total below one process.
const handoverWhy = "Every hand-over of the write turn between processes costs the next process a cold SQLite page cache and a slower first commit (measured: the first commit after a hand-over takes about twice as long as the next ones), which one process alone never pays; kept runs of turns (writerlock.DefaultKeep) pay it once per run instead of once per write. See Fair writers below."
