// Command relayprobe runs the relay runtime's bench cases once each with
// every queue call, receive batch and handler run timed, and prints the
// counts: where a runtime row's time goes. It measures no row of
// docs/performance.md; see docs/decisions/relay-waves.md.
//
//	go run ./cmd/relayprobe [-for 3s] [-case in-process/16] [-repeat 3] [-pg URL]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/bench"
	relayrt "github.com/fairrelay/fairrelay/relay"
)

func main() {
	d := flag.Duration("for", 3*time.Second, "how long each relay runs")
	cases := flag.String("case", "in-process/16,in-process/64,sleep-50ms/64", "comma-separated kind/concurrency or kind/concurrency/batch (batch 64 when left out)")
	repeat := flag.Int("repeat", 1, "runs of every case, interleaved")
	linger := flag.Duration("linger", 0, "Options.Linger (0: the default)")
	recvLinger := flag.Duration("receiver-linger", 0, "the in-process receiver's inbox.BatcherOptions.Linger (0, the default: none)")
	per := flag.Int("per", 200, "events per flow (1000 flows)")
	tx := flag.Int("tx", 0, "instead: time transactions of 1, 8, 16, 32 and 64 events, this many times each")
	pgURL := flag.String("pg", "", "run the cases with the queue and the receiver on this PostgreSQL server (a schema each, dropped afterwards), e.g. postgres://postgres@127.0.0.1:5432/test")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole command (backlog loads included) to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	bench.RuntimeLinger = *recvLinger
	log.SetFlags(0)
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "relayprobe-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if *tx > 0 {
		cs, err := bench.TxCosts(ctx, dir, []int{1, 8, 16, 32, 64}, *tx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("size  enqueue  claim  receive  settle (median ms per transaction)")
		for _, c := range cs {
			fmt.Printf("%4d  %7.2f  %5.2f  %7.2f  %6.2f\n", c.Size, ms(c.Enqueue), ms(c.Claim), ms(c.Receive), ms(c.Settle))
		}
		return
	}
	for r := range *repeat {
		for i, c := range strings.Split(*cases, ",") {
			kind, rest, _ := strings.Cut(c, "/")
			conc, batch, hasBatch := strings.Cut(rest, "/")
			n, err := strconv.Atoi(conc)
			if err != nil {
				log.Fatalf("case %q: %v", c, err)
			}
			b := 64
			if hasBatch {
				if b, err = strconv.Atoi(batch); err != nil {
					log.Fatalf("case %q: %v", c, err)
				}
			}
			res, err := bench.RuntimeProbe(ctx, filepath.Join(dir, fmt.Sprintf("r%d-c%d", r, i)), *pgURL, bench.RuntimeKind(kind), n, b, 1000, *per, *d,
				func(o *relayrt.Options) {
					if *linger > 0 {
						o.Linger = *linger
					}
				})
			if err != nil {
				log.Fatalf("%s: %v", c, err)
			}
			res.Write(os.Stdout)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
