package soak

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
)

var soakFor = flag.Duration("soak.for", 12*time.Second, "chaos phase of TestSoak (SOAK_FOR=30m with go run ./soak/cmd/soak for a long run)")

var soakShards = flag.Int("soak.shards", 0, "run TestSoak and TestSoakPostgres on a sharded queue of N shards (0: a plain queue; SOAK_SHARDS=N with go run ./soak/cmd/soak)")

var (
	buildOnce           sync.Once
	builtDir, buildFail string
)

// buildBinaries builds relayctl and the soak command (no race detector:
// they are the real child processes) once for the whole test binary.
func buildBinaries(t *testing.T) (relayctl, soakBin string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "soak-bin-")
		if err != nil {
			buildFail = err.Error()
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
			"github.com/fairrelay/fairrelay/relayctl", "github.com/fairrelay/fairrelay/soak/cmd/soak")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildFail = fmt.Sprintf("go build: %v\n%s", err, out)
			return
		}
		builtDir = dir
	})
	if buildFail != "" {
		t.Fatal(buildFail)
	}
	return filepath.Join(builtDir, "relayctl"), filepath.Join(builtDir, "soak")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// The soak at CI length: a receiver, four relays and two producers as real
// processes, one SIGKILLed every 50-500 ms and restarted, then the drain
// and every check of Check. Any lost, duplicated or stuck event, any
// quarantine that was not injected, any wrong total, receipt out of order,
// audit row, crash or integrity failure fails it.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: real processes for about 30 s")
	}
	soakTest(t, Config{Backend: BackendSQLite})
}

// The same soak with the queue and the receiver in PostgreSQL (two fresh
// schemas, dropped at the end): relays, receiver and producers are killed,
// the server stays up. It skips without a server, and fails instead with
// FAIRRELAY_REQUIRE_POSTGRES=1 (pgtest).
func TestSoakPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: real processes for about 30 s")
	}
	soakTest(t, Config{Backend: BackendPostgres, Postgres: pgtest.Require(t)})
}

// soakTest runs the soak at test length on c's backend and asserts what
// every run must show.
func soakTest(t *testing.T, c Config) {
	relayctl, soakBin := buildBinaries(t)
	dir := t.TempDir()
	seed := time.Now().UnixNano() % 1_000_000_007
	c.Relayctl, c.Producer, c.Dir, c.For, c.Seed = relayctl, soakBin, dir, *soakFor, seed
	if c.Shards == 0 {
		c.Shards = *soakShards
	}
	c.MaxBacklog = 300 // a short drain: at most this many ordinary events wait when the chaos ends
	c.PoisonEvery = 3  // a few injected failures even in a short run on a slow machine
	c.Log = t.Logf
	sum, err := Run(context.Background(), c)
	// A failed run keeps its PostgreSQL schemas for a person; a test's go.
	t.Cleanup(func() {
		if err := dropStores(context.Background(), sum.Stores); err != nil {
			t.Error(err)
		}
	})
	t.Log(sum)
	if err != nil {
		for _, p := range sum.Problems {
			t.Log("problem:", p)
		}
		logTails(t, dir)
		t.Fatalf("soak failed (replay with SOAK_SEED=%d %sgo run ./soak/cmd/soak): %v", seed, envFor(c.Backend), err)
	}
	switch {
	case sum.Backend != c.Backend || sum.Stores.Backend != c.Backend:
		t.Errorf("ran on %s (stores %s), want %s", sum.Backend, sum.Stores.Backend, c.Backend)
	case sum.Kills == 0 || sum.Restarts == 0:
		t.Errorf("no chaos: %d kills, %d restarts", sum.Kills, sum.Restarts)
	case sum.Events == 0 || sum.Receipts == 0:
		t.Errorf("nothing relayed: %d events, %d receipts", sum.Events, sum.Receipts)
	case sum.Injected == 0 || sum.Quarantined != sum.Injected:
		t.Errorf("injected failures: %d quarantined of %d injected", sum.Quarantined, sum.Injected)
	case sum.Receipts+sum.Injected != sum.Events:
		t.Errorf("%d receipts + %d injected != %d events", sum.Receipts, sum.Injected, sum.Events)
	}
	if c.Backend == BackendPostgres {
		// A run that passed dropped its schemas itself.
		for _, target := range []string{sum.Stores.Queue, sum.Stores.Receiver} {
			if _, schema, err := pgTarget(target); err != nil {
				t.Error(err)
			} else if n := pgtest.SchemasWithPrefix(t, schema); n != 0 {
				t.Errorf("schema %s is still there after a run that passed", schema)
			}
		}
	}
}

// logTails logs the end of the main processes' logs of a run in dir.
func logTails(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{"receiver", "relay1", "drain1", "producer1"} {
		if b, err := os.ReadFile(filepath.Join(dir, "logs", name+".log")); err == nil {
			t.Logf("logs/%s.log (tail):\n%s", name, tail(string(b), 20))
		}
	}
}

// envFor is the environment that selects backend for the soak command.
func envFor(backend string) string {
	if backend == BackendPostgres {
		return BackendEnv + "=postgres "
	}
	return ""
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestRun_RefusesWhatItCannotRun(t *testing.T) {
	base := Config{Relayctl: "relayctl", Producer: "soak", Dir: t.TempDir()}
	cases := map[string]struct {
		mod  func(*Config)
		want error
	}{
		"postgres without a postgres:// URL": {func(c *Config) { c.Backend, c.Postgres = BackendPostgres, "host=db" }, ErrConfig},
		"unknown backend":                    {func(c *Config) { c.Backend = "mysql" }, ErrConfig},
		"no relayctl":                        {func(c *Config) { c.Relayctl = "" }, ErrConfig},
		"negative duration":                  {func(c *Config) { c.For = -time.Second }, ErrConfig},
		"kill window upside down":            {func(c *Config) { c.KillMin, c.KillMax = time.Second, time.Millisecond }, ErrConfig},
		"batch too large":                    {func(c *Config) { c.Batch = 10001 }, ErrConfig},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := base
			c.mod(&cfg)
			if _, err := Run(context.Background(), cfg); !errors.Is(err, c.want) {
				t.Fatalf("Run = %v, want %v", err, c.want)
			}
			if entries, _ := os.ReadDir(cfg.Dir); len(entries) != 0 {
				t.Fatalf("a refused run left files behind: %v", entries)
			}
		})
	}
}

// A drain that outlives its watchdog is a failure, and Run still returns
// with every child stopped: here the watchdog is far too short to drain
// even a second of chaos.
func TestSoak_DrainWatchdog(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: real processes")
	}
	relayctl, soakBin := buildBinaries(t)
	sum, err := Run(context.Background(), Config{
		Relayctl: relayctl, Producer: soakBin, Dir: t.TempDir(), For: time.Second, Seed: 1,
		DrainTimeout: time.Millisecond, RecoverTimeout: time.Minute, Log: t.Logf,
	})
	if !errors.Is(err, ErrCheck) {
		t.Fatalf("Run = %v, want ErrCheck", err)
	}
	if len(sum.Problems) == 0 || !strings.HasPrefix(sum.Problems[0], "drain: relays still running after 1ms") {
		t.Fatalf("problems = %q, want the watchdog's first", sum.Problems)
	}
}
