package soak

import (
	"errors"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
)

// ErrConfig reports a configuration the soak cannot run with.
var ErrConfig = errors.New("soak: bad configuration")

// ErrCheck reports a run whose final state breaks a guarantee: an event
// lost, duplicated or stuck, an unexpected quarantine, a wrong total, a
// receipt out of order or a database that fails its integrity check.
var ErrCheck = errors.New("soak: check failed")

// Backends the soak knows.
const (
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// Config is one soak run.
type Config struct {
	Backend string // BackendSQLite (the default) or BackendPostgres
	// Postgres is the server of BackendPostgres, a postgres:// URL
	// (default: PostgresURL()). Each run makes two new schemas on it and
	// drops them when it ends, unless Keep is set or a check failed.
	Postgres string
	// PrivateCluster runs a PostgreSQL run on a cluster of its own
	// (pgtest.NewCluster: initdb in a temporary directory, a free port),
	// which the restart faults may restart; Postgres is then ignored. The
	// cluster is removed when the run ends. Cluster, when set, is such a
	// cluster already running (a test's), used and left running.
	PrivateCluster bool
	Cluster        *pgtest.Cluster
	// Faults are the fault kinds the chaos injects (FaultKinds; nil:
	// DefaultFaults). Without FaultKill nothing is killed.
	Faults []string
	// FaultMin and FaultMax bound the wait between two faults other than
	// kills (one at a time; each lasts up to a few seconds).
	FaultMin, FaultMax time.Duration
	// Retention, when set, is the retention window of the queue
	// (Policy.Retention, pruned by the relays every second: relayctl relay
	// --prune-every 1s) and of the receiver (relayctl receive --retention,
	// --prune-every 1s). PostgreSQL only: there the check reads what was
	// pruned from logs the soak keeps (pgEnqueueLog, pgCommitLog).
	Retention time.Duration
	// Shards, when above 0, runs on a sharded queue of that many shards
	// (docs/scale.md): the relays and the producers treat it as one queue.
	Shards int
	// Keep leaves a PostgreSQL run's schemas on the server after a run
	// that passed (CheckDir and DropStores find them in StoresFile).
	Keep      bool
	Relayctl  string // the relayctl binary (built without the race detector)
	Producer  string // the binary that runs a producer: Producer is given as its arguments after "produce"
	Dir       string // the run's directory: logs/, the producers' logs, queue.db and receiver.db on SQLite
	For       time.Duration
	Seed      int64
	Relays    int
	Producers int
	Flows     int
	Batch     int // events per producer batch
	// PoisonEvery: one injected failure every PoisonEvery batches of each producer.
	PoisonEvery int
	// ProducerPause is the wait between two batches of one producer.
	ProducerPause time.Duration
	// MaxBacklog holds the producers back while more ordinary events than
	// this are not yet acked (Producer.MaxBacklog; -1: never).
	MaxBacklog int
	// KillMin and KillMax bound the wait between two kills.
	KillMin, KillMax time.Duration
	// RestartMax bounds the pause before a killed process is restarted.
	RestartMax time.Duration
	// RecoverTimeout bounds the recovery: once the faults and the
	// producers stop, the relays of the chaos must leave nothing pending
	// or in flight within it (default: DrainTimeout).
	RecoverTimeout time.Duration
	// DrainTimeout is the watchdog of the drain phase.
	DrainTimeout time.Duration
	// Log receives progress lines (nil: none).
	Log func(format string, args ...any)
}

// Defaults fills the zero fields of c with the CI-length defaults: 45 s of
// chaos with 4 relays and 2 producers over 200 flows.
func (c Config) Defaults() Config {
	if c.Backend == "" {
		c.Backend = BackendSQLite
	}
	if c.Cluster != nil {
		c.PrivateCluster = true
	}
	if c.Backend == BackendPostgres && c.Postgres == "" && !c.PrivateCluster {
		c.Postgres = PostgresURL()
	}
	if c.Faults == nil {
		c.Faults = DefaultFaults(c.Backend, c.PrivateCluster)
	}
	if c.FaultMin == 0 {
		c.FaultMin = 500 * time.Millisecond
	}
	if c.FaultMax == 0 {
		c.FaultMax = 2 * time.Second
	}
	if c.For == 0 {
		c.For = 45 * time.Second
	}
	if c.Relays == 0 {
		c.Relays = 4
	}
	if c.Producers == 0 {
		c.Producers = 2
	}
	if c.Flows == 0 {
		c.Flows = 200
	}
	if c.Batch == 0 {
		c.Batch = 40
	}
	if c.PoisonEvery == 0 {
		c.PoisonEvery = 25
	}
	if c.ProducerPause == 0 {
		c.ProducerPause = 100 * time.Millisecond
	}
	if c.MaxBacklog == 0 {
		c.MaxBacklog = 2000
	}
	if c.KillMin == 0 {
		c.KillMin = 50 * time.Millisecond
	}
	if c.KillMax == 0 {
		c.KillMax = 500 * time.Millisecond
	}
	if c.RestartMax == 0 {
		c.RestartMax = 200 * time.Millisecond
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 3 * time.Minute
	}
	if c.RecoverTimeout == 0 {
		c.RecoverTimeout = c.DrainTimeout
	}
	return c
}

func (c Config) validate() error {
	switch c.Backend {
	case BackendSQLite:
	case BackendPostgres:
		if !c.PrivateCluster && !isPostgres(c.Postgres) {
			return fmt.Errorf("%w: Postgres %q is not a postgres:// URL", ErrConfig, redact(c.Postgres))
		}
	default:
		return fmt.Errorf("%w: unknown backend %q (sqlite or postgres)", ErrConfig, c.Backend)
	}
	switch {
	case c.Relayctl == "" || c.Producer == "" || c.Dir == "":
		return fmt.Errorf("%w: Relayctl, Producer and Dir are required", ErrConfig)
	case c.For <= 0 || c.DrainTimeout <= 0 || c.RecoverTimeout <= 0:
		return fmt.Errorf("%w: For, RecoverTimeout and DrainTimeout must be positive", ErrConfig)
	case c.Shards < 0 || c.Shards > queue.MaxShards:
		return fmt.Errorf("%w: Shards %d: want 0 (a plain queue) or 1..%d", ErrConfig, c.Shards, queue.MaxShards)
	case c.Relays < 1 || c.Producers < 1 || c.Flows < 1 || c.Batch < 1 || c.Batch > 10000 || c.PoisonEvery < 0:
		return fmt.Errorf("%w: Relays, Producers, Flows and Batch (1..10000) must be positive, PoisonEvery not negative", ErrConfig)
	case c.KillMin <= 0 || c.KillMax < c.KillMin || c.RestartMax < 0 || c.ProducerPause < 0:
		return fmt.Errorf("%w: want 0 < KillMin <= KillMax, RestartMax and ProducerPause not negative", ErrConfig)
	case c.FaultMin <= 0 || c.FaultMax < c.FaultMin:
		return fmt.Errorf("%w: want 0 < FaultMin <= FaultMax", ErrConfig)
	case c.Retention < 0 || c.Retention > 0 && c.Backend != BackendPostgres:
		return fmt.Errorf("%w: Retention needs the postgres backend (the check reads pruned events from its logs) and may not be negative", ErrConfig)
	case c.PrivateCluster && c.Backend != BackendPostgres:
		return fmt.Errorf("%w: a private cluster is for the postgres backend", ErrConfig)
	}
	return checkFaults(c.Faults, c.Backend, c.PrivateCluster)
}
