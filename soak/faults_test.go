package soak

import (
	"context"
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
)

var faultFor = flag.Duration("soak.faultfor", 4*time.Second, "chaos phase of each TestSoakFault case and of TestSoakRetention")

// Each fault kind alone, as a short soak: no process is killed, so every
// process must ride out the faults by itself (no restart, no exit), and
// then the drain and every check of Check must pass: nothing lost,
// nothing applied twice, every flow in order, nothing stuck once the
// faults stop. The database faults run on a private cluster (restarted by
// the restart kinds), the HTTP faults on SQLite.
func TestSoakFault(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: real processes, about 15 s per fault kind")
	}
	// One private cluster for every database kind (each run makes its own
	// schemas); without the binaries each such case skips, or fails with
	// FAIRRELAY_REQUIRE_POSTGRES=1 (StartCluster).
	cluster, clusterErr := pgtest.NewCluster(context.Background())
	if clusterErr == nil {
		t.Cleanup(func() { cluster.Close() })
	}
	for _, kind := range FaultKinds {
		if kind == FaultKill {
			continue // TestSoak
		}
		t.Run(kind, func(t *testing.T) {
			c := Config{Backend: BackendSQLite}
			if dbFault(kind) {
				cl := cluster
				if clusterErr != nil {
					cl = pgtest.StartCluster(t) // skips or fails with the reason
				}
				c = Config{Backend: BackendPostgres, Cluster: cl}
			}
			c.Faults = []string{kind}
			sum := faultSoak(t, c)
			if sum.Faults[kind] == 0 {
				t.Errorf("no %s fault injected: %v", kind, sum.Faults)
			}
			if sum.Restarts != 0 || sum.StartRefused != 0 || sum.Crashes != 0 {
				t.Errorf("a process had to be started again: %d restarts (%d refused starts, %d crashes)", sum.Restarts, sum.StartRefused, sum.Crashes)
			}
		})
	}
}

// faultSoak runs a short soak with c's faults and fails t on any problem.
func faultSoak(t *testing.T, c Config) Summary {
	t.Helper()
	relayctl, soakBin := buildBinaries(t)
	c.Relayctl, c.Producer, c.Dir, c.For, c.Seed = relayctl, soakBin, t.TempDir(), *faultFor, time.Now().UnixNano()%1_000_000_007
	c.Relays, c.Producers, c.Flows = 2, 1, 50
	c.MaxBacklog, c.PoisonEvery = 300, 3
	c.FaultMin, c.FaultMax = 300*time.Millisecond, 800*time.Millisecond
	c.RecoverTimeout = time.Minute // reply timeouts are 5 s: a relay hung on a dead connection fails it
	c.Log = t.Logf
	sum, err := Run(context.Background(), c)
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
		logTails(t, c.Dir)
		t.Fatalf("soak with faults %v failed (seed %d): %v", c.Faults, c.Seed, err)
	}
	if errors.Is(err, ErrCheck) || sum.Events == 0 || sum.Receipts+sum.Injected != sum.Events {
		t.Fatalf("%d receipts + %d injected, %d events", sum.Receipts, sum.Injected, sum.Events)
	}
	return sum
}

// Retention on (docs/contract.md §7.9): the relays prune the queue's acked
// events and the receiver its receipts, 2 s after they were acked or
// accepted, while connections are cut; nothing is lost or applied twice,
// which the check sees through the enqueue and commit logs that pruning
// does not touch. No kills: a producer re-sending a batch whose events were
// already pruned would enqueue them anew, as the contract allows.
func TestSoakRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: real processes")
	}
	cl := pgtest.StartCluster(t)
	sum := faultSoak(t, Config{Backend: BackendPostgres, Cluster: cl, Retention: 2 * time.Second,
		Faults: []string{FaultDBCut, FaultHTTPCut}})
	if sum.Pruned == 0 {
		t.Fatalf("retention on, yet nothing was pruned: %v", sum)
	}
}
