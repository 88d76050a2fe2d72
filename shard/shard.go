package shard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Of is the shard of flow in a set of n shards: the FNV-1a 64-bit hash of
// the flow's bytes, mod n. It never changes: a flow's shard depends on its
// name and n only. n must be 1..queue.MaxShards.
func Of(flow string, n int) int {
	if n < 1 || n > queue.MaxShards {
		panic(fmt.Sprintf("shard.Of: n = %d, want 1..%d", n, queue.MaxShards))
	}
	h := fnv.New64a()
	h.Write([]byte(flow))
	return int(h.Sum64() % uint64(n))
}

// Options configure Open.
type Options struct {
	// CloseShards makes Close close every shard. Without it the caller
	// keeps the shards and closes them itself.
	CloseShards bool
}

// Store is a sharded queue: N shards, each a complete queue.Store, seen
// as one queue (docs/contract.md §7.10). It implements queue.Store and,
// when every shard has them, the capabilities queue.Weighter,
// queue.SettleClaimer, queue.Pager, queue.Waiter, queue.Pauser,
// queue.Pruner and queue.DestinationStore; calling a capability that a
// shard lacks is an error wrapping errors.ErrUnsupported. A Store is safe
// for concurrent use.
//
// A Store remembers the shard of each claim it made, so that the claim's
// settle and extensions go straight to it, until the claim is answered
// for (any answer to its settle; an extension that says the lease is
// lost) or, for a claim never answered for through this Store, at most
// about two leases after it was made (and at once when the clock is set
// back): a long-running relay's Store holds about the claims it made or
// extended in its last two leases (docs/contract.md §7.10). A claim it no
// longer remembers is looked for in each shard.
type Store struct {
	shards []queue.Store
	epoch  int64
	opts   Options

	mu sync.Mutex
	// next is the shard the next claim asks first (the rotation).
	next int
	// claimed is the shard of each event this Store claimed, until the
	// claim is answered for or its lease is long over; settles and
	// extends route by it (a hint: see claimMap).
	claimed claimMap
}

// Label reads the label of one shard. A store that is not a
// queue.ShardMember is ErrShardLabel.
func Label(ctx context.Context, s queue.Store) (l queue.ShardLabel, ok bool, err error) {
	m, isMember := s.(queue.ShardMember)
	if !isMember {
		return queue.ShardLabel{}, false, fmt.Errorf("%w: the store (%T) records no shard label", queue.ErrShardLabel, s)
	}
	return m.ShardLabel(ctx)
}

// checkCount checks the number of shards of a set.
func checkCount(n int) error {
	if n < 1 || n > queue.MaxShards {
		return fmt.Errorf("%w: %d shards, want 1..%d", queue.ErrInvalid, n, queue.MaxShards)
	}
	return nil
}

// Open opens the set shards as one queue. Every shard must be a
// queue.ShardMember labeled {Index: i, Count: len(shards), Epoch: e} with
// the same e for all; anything else (another count, another index, another
// epoch, a shard never labeled) is ErrShardLabel, wrapped with which shard
// holds what. Open writes nothing.
func Open(ctx context.Context, shards []queue.Store, o Options) (*Store, error) {
	if err := checkCount(len(shards)); err != nil {
		return nil, err
	}
	s := &Store{shards: append([]queue.Store(nil), shards...), opts: o}
	for i, sh := range shards {
		l, ok, err := Label(ctx, sh)
		if err != nil {
			return nil, fmt.Errorf("shard %d of %d: %w", i, len(shards), err)
		}
		if !ok {
			return nil, fmt.Errorf("%w: shard %d of %d is not labeled (shard.Create labels a fresh set)", queue.ErrShardLabel, i, len(shards))
		}
		if l.Index != i || l.Count != len(shards) {
			return nil, fmt.Errorf("%w: shard %d of %d holds the label of shard %d of %d (epoch %d)", queue.ErrShardLabel, i, len(shards), l.Index, l.Count, l.Epoch)
		}
		if i > 0 && l.Epoch != s.epoch {
			return nil, fmt.Errorf("%w: shard %d of %d is of epoch %d, shard 0 of epoch %d: shards of two sets", queue.ErrShardLabel, i, len(shards), l.Epoch, s.epoch)
		}
		s.epoch = l.Epoch
	}
	return s, nil
}

// Create labels a fresh set of shards {i, len(shards), epoch 0}, each
// label audited with reason (queue.AuditShard). A shard that holds a label
// already is ErrShardLabel and one that holds a flow is ErrInvalid: Create
// checks every shard before it labels any, so either refusal changes
// nothing. Open the set afterwards.
func Create(ctx context.Context, shards []queue.Store, reason string, now clock.Tick) error {
	return create(ctx, shards, 0, reason, now)
}

func create(ctx context.Context, shards []queue.Store, epoch int64, reason string, now clock.Tick) error {
	if err := checkCount(len(shards)); err != nil {
		return err
	}
	if err := queue.CheckReason(reason); err != nil {
		return err
	}
	members := make([]queue.ShardMember, len(shards))
	for i, sh := range shards {
		m, ok := sh.(queue.ShardMember)
		if !ok {
			return fmt.Errorf("%w: shard %d (%T) records no shard label", queue.ErrShardLabel, i, sh)
		}
		members[i] = m
		l, ok, err := m.ShardLabel(ctx)
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
		if ok {
			return fmt.Errorf("%w: shard %d is labeled already (shard %d of %d, epoch %d)", queue.ErrShardLabel, i, l.Index, l.Count, l.Epoch)
		}
		st, err := sh.Stats(ctx)
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
		if st.Flows > 0 {
			return fmt.Errorf("%w: shard %d holds %d flows: a new set starts empty (shard.Reshard moves a queue)", queue.ErrInvalid, i, st.Flows)
		}
	}
	for i, m := range members {
		if err := m.SetShardLabel(ctx, queue.ShardLabel{Index: i, Count: len(shards), Epoch: epoch}, reason, now); err != nil {
			return fmt.Errorf("labeling shard %d of %d (shards before it are labeled): %w", i, len(shards), err)
		}
	}
	return nil
}

// Shards returns the shards, shard i at index i (for per-shard reads such
// as Snapshot, and for the per-shard capabilities ShardMember and
// Transplanter).
func (s *Store) Shards() []queue.Store { return append([]queue.Store(nil), s.shards...) }

// Count is the number of shards.
func (s *Store) Count() int { return len(s.shards) }

// Epoch is the set's epoch: how many reshards the queue went through.
func (s *Store) Epoch() int64 { return s.epoch }

// ShardOf is the shard of flow in this set.
func (s *Store) ShardOf(flow string) int { return Of(flow, len(s.shards)) }

// Close closes every shard when Options.CloseShards is set, and nothing
// otherwise.
func (s *Store) Close() error {
	if !s.opts.CloseShards {
		return nil
	}
	var errs []error
	for i, sh := range s.shards {
		if err := sh.Close(); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// ShardError reports that the part of a call that went to one shard
// failed. Err is the shard's error; errors.Is and errors.As see through it.
type ShardError struct {
	Shard int
	Err   error
	// Done lists the shards whose part committed before the failure (a
	// batch is atomic per shard only); a pause or resume of a destination
	// counts a shard that had the state already as done.
	Done []int
}

// Error names the shard, the cause and the shards whose parts committed.
func (e *ShardError) Error() string {
	if len(e.Done) > 0 {
		return fmt.Sprintf("shard %d: %v (the parts of shards %v committed)", e.Shard, e.Err, e.Done)
	}
	return fmt.Sprintf("shard %d: %v", e.Shard, e.Err)
}

// Unwrap returns the shard's error, so that errors.Is finds its cause.
func (e *ShardError) Unwrap() error { return e.Err }

// unsupported is the error of a capability a shard lacks.
func unsupported(i int, sh queue.Store, what string) error {
	return fmt.Errorf("shard %d (%T) is not a %s: %w", i, sh, what, errors.ErrUnsupported)
}
