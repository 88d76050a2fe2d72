// Command writers is the standalone prototype of the multi-process writer
// problem: N OS processes claim and settle rows of one WAL file with
// synchronous=FULL, each write one BEGIN IMMEDIATE transaction, and every
// process reports how many rows it got, its longest write and its SQLITE_BUSY
// count. Each round runs one process alone, then N together, on fresh copies
// of the backlog, for every -turn given (busy_timeout, short_steps,
// writer_queue, writer_keep), interleaved.
//
//	go run ./cmd/writers -procs 8 -for 60s -rounds 1 -turn busy_timeout,writer_keep
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/bench"
)

func main() {
	procs := flag.Int("procs", 8, "claimant processes")
	d := flag.Duration("for", 5*time.Second, "how long the processes drain in each run")
	rounds := flag.Int("rounds", 3, "rounds")
	turns := flag.String("turn", "busy_timeout,short_steps,writer_queue,writer_keep", "comma-separated turn modes")
	backlog := flag.Int("backlog", 100000, "rows in each backlog")
	dbPath := flag.String("db", "", "database (set by the parent for its children)")
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()

	if p := os.Getenv(bench.EnvProc); p != "" {
		proc, _ := strconv.Atoi(p)
		var turn string
		flag.Visit(func(f *flag.Flag) {
			if f.Name == "turn" {
				turn = f.Value.String()
			}
		})
		if err := bench.RawChild(ctx, *dbPath, bench.Turn(turn), proc); err != nil {
			log.Fatal(err)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "fairrelay-writers-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var specs []bench.DrainSpec
	for _, t := range strings.Split(*turns, ",") {
		specs = append(specs, bench.RawDrain(bench.Turn(t), *backlog))
	}
	_, err = bench.MeasureDrains(ctx, dir, exe, specs, *procs, *rounds, *d, func(round int, name string, r bench.DrainRound) {
		m := r.Many
		fmt.Printf("round %d %-18s 1 proc %5.0f/s, %d procs %5.0f/s = %.2f×; share %.2f–%.2f of fair; longest write %s (alone %s); SQLITE_BUSY %d; other errors %d %s\n",
			round, name, r.One.Rate, m.Procs, m.Rate, m.Rate/r.One.Rate, m.MinShare, m.MaxShare,
			m.MaxWrite.Round(time.Millisecond), r.One.MaxWrite.Round(time.Millisecond), m.Busy+r.One.Busy, m.OtherErrs, m.FirstError)
	})
	if err != nil {
		log.Fatal(err)
	}
}
