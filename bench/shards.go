package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/shard"
)

// A ShardBackend makes and opens the shards of a sharded queue on one
// backend: SQLite files or PostgreSQL schemas.
type ShardBackend struct {
	// Name is "sqlite" or "pg".
	Name string
	// URL is the PostgreSQL server (pg only).
	URL string
}

// SQLiteShards is the SQLite backend: one queuestore file per shard.
func SQLiteShards() ShardBackend { return ShardBackend{Name: "sqlite"} }

// PGShards is the PostgreSQL backend on the server at url: one
// pgqueuestore schema per shard.
func PGShards(url string) ShardBackend { return ShardBackend{Name: "pg", URL: url} }

// names returns n fresh shard names: file paths under dir, or schemas.
func (b ShardBackend) names(dir string, n int) []string {
	out := make([]string, n)
	for i := range out {
		if b.Name == "pg" {
			out[i] = NewPGSchema()
		} else {
			out[i] = filepath.Join(dir, fmt.Sprintf("shard%d.db", i))
		}
	}
	return out
}

// open opens the shards named names, each a complete queue store.
func (b ShardBackend) open(ctx context.Context, names []string) ([]queue.Store, error) {
	var out []queue.Store
	for _, name := range names {
		var (
			s   queue.Store
			err error
		)
		if b.Name == "pg" {
			s, err = pgqueuestore.Open(ctx, b.URL, pgqueuestore.WithSchema(name))
		} else {
			s, err = queuestore.Open(name)
		}
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("open shard %s: %w", name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// drop removes the shards named names (the schemas; files go with their
// directory).
func (b ShardBackend) drop(ctx context.Context, names []string) error {
	if b.Name != "pg" {
		return nil
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, DropPGSchema(ctx, b.URL, n))
	}
	return errors.Join(errs...)
}

func closeAll(ss []queue.Store) {
	for _, s := range ss {
		s.Close()
	}
}

// ShardChildArgs are the arguments that make a benchrun child (-child
// shard) drain the sharded queue of shards names on backend b with
// batches of batch; own: each child drains one shard alone (c.PerShard).
func ShardChildArgs(b ShardBackend, names []string, batch int, own bool) []string {
	return []string{"-child", "shard", "-shard-backend", b.Name, "-pg-url", b.URL, "-db", strings.Join(names, ","), "-batch", strconv.Itoa(batch),
		"-shard-own=" + strconv.FormatBool(own)}
}

// ShardChild is the child side of a shard drain: it opens the shards
// (comma-separated names) as one shard.Store, as a relay process of a
// sharded queue does, and calls [ChildDrain] with a [PGBatchClaimant] of
// batch events (ClaimBatch, then SettleClaimBatch after SettleClaimBatch).
// With own, it opens only shard k mod N instead, k its process number
// (EnvProc), as a relay over one shard does (docs/scale.md "Relays per
// shard").
func ShardChild(ctx context.Context, backend, url, names string, batch int, own bool) error {
	b := ShardBackend{Name: backend, URL: url}
	all := strings.Split(names, ",")
	if own {
		proc, err := strconv.Atoi(os.Getenv(EnvProc))
		if err != nil {
			return fmt.Errorf("shard child: %s: %w", EnvProc, err)
		}
		ss, err := b.open(ctx, []string{all[proc%len(all)]})
		if err != nil {
			return err
		}
		defer ss[0].Close()
		bc, ok := ss[0].(BatchSettleClaimer)
		if !ok {
			return fmt.Errorf("shard child: the %s store has no SettleClaimBatch: %w", backend, errors.ErrUnsupported)
		}
		return ChildDrain(ctx, PGBatchClaimant{Q: bc, N: batch})
	}
	ss, err := b.open(ctx, all)
	if err != nil {
		return err
	}
	s, err := shard.Open(ctx, ss, shard.Options{CloseShards: true})
	if err != nil {
		closeAll(ss)
		return err
	}
	defer s.Close()
	return ChildDrain(ctx, PGBatchClaimant{Q: s, N: batch})
}

// ShardCombo is one shard drain: Procs relay processes on a queue of
// Shards shards, each over every shard (a shard.Store), or with PerShard
// each over one shard alone, process k on shard k mod Shards.
type ShardCombo struct {
	Procs, Shards int
	PerShard      bool
	// Batch is the claims per SettleClaimBatch of this combination's
	// processes; 0: the batch MeasureShardDrains was given.
	Batch int
}

// ShardDrainResult is one shard drain's outcome.
type ShardDrainResult struct {
	ShardCombo
	DrainSummary
	// ServedCV is the coefficient of variation (standard deviation ÷
	// mean) of the flows' served counts when the drain ended: 0 when every
	// flow was served equally often (docs/decisions/bench-method.md).
	ServedCV float64
	// ServedMin and ServedMax are the smallest and largest served count
	// of a flow.
	ServedMin, ServedMax int64
	// CPUBusy and CPUIOWait are the machine's CPU time, all processes
	// (the PostgreSQL server's included), busy and waiting for I/O, as
	// shares of all its CPUs' time from the processes' start to their
	// end; CPUBusy is -1 where the machine does not say (ReadCPUTimes).
	CPUBusy, CPUIOWait float64
}

// MakeShardedQueue creates a set of shards named names (shard.Create),
// opens it and loads flows × perFlow events through it ([LoadBacklog]:
// each flow goes to its shard), then closes it.
func MakeShardedQueue(ctx context.Context, b ShardBackend, names []string, flows, perFlow int) error {
	ss, err := b.open(ctx, names)
	if err != nil {
		return err
	}
	if err := shard.Create(ctx, ss, "bench shard drain", now); err != nil {
		closeAll(ss)
		return fmt.Errorf("create %d shards: %w", len(ss), err)
	}
	s, err := shard.Open(ctx, ss, shard.Options{CloseShards: true})
	if err != nil {
		closeAll(ss)
		return err
	}
	if err := LoadBacklog(ctx, s, "e", flows, perFlow); err != nil {
		s.Close()
		return err
	}
	if b.Name == "pg" {
		for _, n := range names {
			if err := analyzePG(ctx, b.URL, n); err != nil {
				s.Close()
				return err
			}
		}
	}
	return s.Close()
}

// servedSpread reads the flows of the sharded queue names (merged over
// its shards) and returns the coefficient of variation, the smallest and
// the largest of their served counts.
func servedSpread(ctx context.Context, b ShardBackend, names []string) (cv float64, lo, hi int64, err error) {
	ss, err := b.open(ctx, names)
	if err != nil {
		return 0, 0, 0, err
	}
	s, err := shard.Open(ctx, ss, shard.Options{CloseShards: true})
	if err != nil {
		closeAll(ss)
		return 0, 0, 0, err
	}
	defer s.Close()
	fs, err := s.Flows(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(fs) == 0 {
		return 0, 0, 0, fmt.Errorf("served spread: no flows")
	}
	var sum, sq float64
	lo, hi = math.MaxInt64, 0
	for _, f := range fs {
		v := float64(f.Served)
		sum += v
		sq += v * v
		lo, hi = min(lo, f.Served), max(hi, f.Served)
	}
	n := float64(len(fs))
	mean := sum / n
	if mean == 0 {
		return 0, lo, hi, nil
	}
	return math.Sqrt(max(0, sq/n-mean*mean)) / mean, lo, hi, nil
}

// MeasureShardDrains runs rounds rounds; in each, for every combo (in an
// order rotated by one each round), a fresh set of combo.Shards shards is
// made and loaded with flows × perFlow events (untimed), then combo.Procs
// OS processes (exe with [ShardChildArgs], each a [ShardChild] with its own
// shard.Store over the same set) are released together to drain it for d;
// afterwards the flows' served counts give the fairness spread, and the
// set is removed. dir holds the SQLite shards. When peer is not nil it
// runs once in each round, after the combinations (a peer's drain of the
// same kind, so that a ratio to it is taken within the round), and its
// rates are returned in round order.
func MeasureShardDrains(ctx context.Context, b ShardBackend, dir, exe string, combos []ShardCombo, rounds, flows, perFlow, batch int, d time.Duration,
	peer func(ctx context.Context) (float64, error), progress func(round int, r ShardDrainResult)) (map[ShardCombo][]ShardDrainResult, []float64, error) {
	out := map[ShardCombo][]ShardDrainResult{}
	var peers []float64
	for r := range rounds {
		for j := range combos {
			c := combos[(r+j)%len(combos)]
			sub := filepath.Join(dir, fmt.Sprintf("r%d-p%d-s%d", r, c.Procs, c.Shards))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return nil, nil, err
			}
			names := b.names(sub, c.Shards)
			res, err := shardDrain(ctx, b, names, exe, c, flows, perFlow, batch, d)
			if derr := b.drop(ctx, names); err == nil {
				err = derr
			}
			os.RemoveAll(sub)
			if err != nil {
				return nil, nil, fmt.Errorf("%s shard drain, %d processes on %d shards: %w", b.Name, c.Procs, c.Shards, err)
			}
			out[c] = append(out[c], res)
			if progress != nil {
				progress(r+1, res)
			}
		}
		if peer != nil {
			rate, err := peer(ctx)
			if err != nil {
				return nil, nil, fmt.Errorf("%s shard drains' peer, round %d: %w", b.Name, r+1, err)
			}
			peers = append(peers, rate)
		}
	}
	return out, peers, nil
}

// shardDrain is one drain of MeasureShardDrains.
func shardDrain(ctx context.Context, b ShardBackend, names []string, exe string, c ShardCombo, flows, perFlow, batch int, d time.Duration) (ShardDrainResult, error) {
	res := ShardDrainResult{ShardCombo: c}
	if c.Batch > 0 {
		batch = c.Batch
	}
	if c.PerShard {
		// Each process drains a shard alone: each shard holds what the
		// whole set holds for one process.
		perFlow *= c.Shards
	}
	if err := MakeShardedQueue(ctx, b, names, flows, perFlow); err != nil {
		return res, err
	}
	t0, cpuErr := ReadCPUTimes()
	ps, err := SpawnDrain(ctx, exe, ShardChildArgs(b, names, batch, c.PerShard), c.Procs, d)
	if err != nil {
		return res, err
	}
	res.CPUBusy = -1
	if t1, err := ReadCPUTimes(); err == nil && cpuErr == nil {
		res.CPUBusy, res.CPUIOWait = t1.Busy(t0)
	}
	for _, p := range ps {
		if p.Empty {
			return res, fmt.Errorf("process %d found the backlog empty after %s: %w", p.Proc, p.Elapsed, ErrBacklogEmpty)
		}
	}
	res.DrainSummary = SummarizeDrain(ps)
	res.ServedCV, res.ServedMin, res.ServedMax, err = servedSpread(ctx, b, names)
	return res, err
}

// IsShardUnsupported reports whether err says that a backend's stores
// cannot be a shard set (a store that records no shard label, or lacks a
// capability the drain needs), as opposed to a failure of the drain.
func IsShardUnsupported(err error) bool {
	return errors.Is(err, queue.ErrShardLabel) || errors.Is(err, errors.ErrUnsupported)
}
