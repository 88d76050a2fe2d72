// Command soak runs fairrelay's soak test: producers, relays and a receiver
// as real processes on real files, SIGKILLed at random, then drained and
// checked (see package github.com/fairrelay/fairrelay/soak).
//
// Usage, from the repository:
//
//	go run ./soak/cmd/soak [-for 45s] [-seed N] [-backend sqlite|postgres] [-postgres URL | -shared] [-faults KINDS] [-keep]
//	go run ./soak/cmd/soak check -dir DIR   # check a kept run directory again
//	go run ./soak/cmd/soak drop -dir DIR    # drop a kept PostgreSQL run's schemas
//
// SOAK_FOR and SOAK_SEED set -for and -seed when the flags are not given,
// FAIRRELAY_BACKEND (sqlite or postgres) -backend and FAIRRELAY_POSTGRES
// -postgres, as for the experiment, SOAK_FAULTS -faults. On PostgreSQL the
// run starts a private cluster of its own (initdb in a temporary
// directory, a free port; removed at the end) that the restart faults
// restart; with -postgres, FAIRRELAY_POSTGRES or -shared it uses that
// server instead, never restarted, and keeps two fresh schemas there when
// -keep is given or a check failed.
// It builds relayctl (go build) unless -relayctl names a binary, prints one
// summary line and exits 1 when any check failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/soak"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "produce" {
		p, err := soak.ParseProducer(os.Args[2:])
		if err == nil {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			err = soak.Produce(ctx, p)
			stop()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak produce:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(check(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "drop" {
		os.Exit(drop(os.Args[2:]))
	}
	os.Exit(run())
}

// check runs the final checks again on a kept run directory.
func check(args []string) int {
	fs := flag.NewFlagSet("soak check", flag.ExitOnError)
	dir := fs.String("dir", "", "a run directory that soak kept")
	_ = fs.Parse(args)
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "soak check: -dir is required")
		return 2
	}
	res, err := soak.CheckDir(context.Background(), *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak check:", err)
		return 1
	}
	for _, p := range res.Problems {
		fmt.Fprintln(os.Stderr, "soak: problem:", p)
	}
	fmt.Printf("soak check: events=%d flows=%d committed=%d lost=%d duplicated=%d stuck=%d quarantined=%d (injected=%d) retried=%d receipts=%d problems=%d\n",
		res.Events, res.Flows, res.Committed, res.Lost, res.Duplicated, res.Stuck, res.Quarantined, res.Injected, res.Retried, res.Receipts, len(res.Problems))
	if len(res.Problems) > 0 {
		return 1
	}
	return 0
}

// drop drops the PostgreSQL schemas of a kept run directory.
func drop(args []string) int {
	fs := flag.NewFlagSet("soak drop", flag.ExitOnError)
	dir := fs.String("dir", "", "a run directory that soak kept")
	_ = fs.Parse(args)
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "soak drop: -dir is required")
		return 2
	}
	if err := soak.DropStores(context.Background(), *dir); err != nil {
		fmt.Fprintln(os.Stderr, "soak drop:", err)
		return 1
	}
	return 0
}

func run() int {
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	forD := fs.Duration("for", 0, "length of the chaos phase (default $SOAK_FOR or 45s); the drain comes after")
	seed := fs.Int64("seed", 0, "random seed (default $SOAK_SEED or the time)")
	backend := fs.String("backend", soak.BackendSQLite, "where the queue and the receiver live: sqlite or postgres (default $"+soak.BackendEnv+" or sqlite)")
	pgURL := fs.String("postgres", "", "PostgreSQL server of -backend postgres (default $"+soak.PostgresEnv+" or "+soak.DefaultPostgresURL+")")
	relayctl := fs.String("relayctl", "", "relayctl binary (default: go build it)")
	dir := fs.String("dir", "", "run directory (default: a new temporary one)")
	keep := fs.Bool("keep", false, "keep the run directory (and a PostgreSQL run's schemas) even when every check passed")
	relays := fs.Int("relays", 4, "relay processes")
	producers := fs.Int("producers", 2, "producer processes")
	flows := fs.Int("flows", 200, "ordinary flows")
	faults := fs.String("faults", "", "comma-separated fault kinds ("+strings.Join(soak.FaultKinds, ", ")+"; default $SOAK_FAULTS or all the backend can have)")
	retention := fs.Duration("retention", 0, "on postgres, the queue's and the receiver's retention window, pruned every second (0: keep everything)")
	shards := fs.Int("shards", 0, "run on a sharded queue of N shards (default $SOAK_SHARDS or 0: a plain queue; docs/scale.md)")
	shared := fs.Bool("shared", false, "on postgres, use the server of -postgres instead of a private cluster (no restart faults); implied by -postgres or $"+soak.PostgresEnv)
	_ = fs.Parse(os.Args[1:])
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if v := os.Getenv("SOAK_FOR"); v != "" && !set["for"] {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak: SOAK_FOR:", err)
			return 2
		}
		*forD = d
	}
	if v := os.Getenv("SOAK_SHARDS"); v != "" && !set["shards"] {
		n, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak: SOAK_SHARDS:", err)
			return 2
		}
		*shards = n
	}
	if v := os.Getenv("SOAK_SEED"); v != "" && !set["seed"] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak: SOAK_SEED:", err)
			return 2
		}
		*seed = n
	}
	if !set["seed"] && os.Getenv("SOAK_SEED") == "" {
		*seed = time.Now().UnixNano() % 1_000_000_007
	}
	if v := os.Getenv(soak.BackendEnv); v != "" && !set["backend"] {
		*backend = v
	}
	if *backend != soak.BackendSQLite && *backend != soak.BackendPostgres {
		fmt.Fprintf(os.Stderr, "soak: -backend %q: want sqlite or postgres\n", *backend)
		return 2
	}
	// On PostgreSQL the soak runs on a private cluster that it may
	// restart, unless a server is named (never restarted: others use it)
	// or the server binaries are missing.
	private := *backend == soak.BackendPostgres && !*shared && !set["postgres"] && os.Getenv(soak.PostgresEnv) == ""
	if private {
		if _, err := pgtest.ServerBinaries(); err != nil {
			fmt.Fprintf(os.Stderr, "soak: %v: running on the shared server, without restart faults\n", err)
			private = false
		}
	}
	if v := os.Getenv("SOAK_FAULTS"); v != "" && !set["faults"] {
		*faults = v
	}
	faultList, err := soak.ParseFaults(*faults, *backend, private)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: -faults:", err)
		return 2
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "soak-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			return 1
		}
		*dir = d
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	if *relayctl == "" {
		bin := filepath.Join(*dir, "relayctl")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/fairrelay/fairrelay/relayctl")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "soak: go build relayctl:", err)
			return 1
		}
		*relayctl = bin
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := soak.Run(ctx, soak.Config{
		Backend: *backend, Postgres: *pgURL, Keep: *keep, Relayctl: *relayctl, Producer: self, Dir: *dir, For: *forD, Seed: *seed,
		Relays: *relays, Producers: *producers, Flows: *flows, PrivateCluster: private, Faults: faultList, Retention: *retention, Shards: *shards,
		Log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
	})
	for _, p := range sum.Problems {
		fmt.Fprintln(os.Stderr, "soak: problem:", p)
	}
	if err != nil && !errors.Is(err, soak.ErrCheck) {
		fmt.Fprintln(os.Stderr, "soak:", err, "(run directory kept:", *dir+")")
		return 1
	}
	fmt.Println(sum)
	if sum.Failed() {
		fmt.Fprintln(os.Stderr, "soak: run directory kept:", *dir, "(logs/ has every process's output)")
		if sum.Stores.Backend == soak.BackendPostgres && !private {
			fmt.Fprintf(os.Stderr, "soak: schemas kept: %s; 'soak drop -dir %s' drops them\n", sum.Stores, *dir)
		}
		return 1
	}
	if *keep && sum.Stores.Backend == soak.BackendPostgres && !private {
		fmt.Fprintf(os.Stderr, "soak: schemas kept: %s; 'soak drop -dir %s' drops them\n", sum.Stores, *dir)
	}
	if !*keep {
		_ = os.RemoveAll(*dir)
	}
	return 0
}
