package shard

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Report is what Reshard moved.
type Report struct {
	// From and To are the shard counts; Epoch is the new set's epoch.
	From, To int
	Epoch    int64
	// Flows and Events count what was moved (every event the old set
	// kept, acked ones included); FlowsPerShard[i] counts the flows that
	// went to new shard i.
	Flows, Events int64
	FlowsPerShard []int64
	// AuditRows counts the queue-wide audit rows copied into each new
	// shard.
	AuditRows int
}

// reshardPage is how many flow names Reshard reads at a time.
const reshardPage = 1000

// Reshard moves a sharded queue offline from the set from to the fresh set
// to, of any size (docs/contract.md §7.10). from must open (Open) as one
// set; to must be empty and unlabeled (Create's checks). Reshard labels to
// with the next epoch (an AuditShard row in each new shard, with reason),
// copies into every new shard the queue-wide audit rows of from's shard 0,
// the policy and the registered destinations (secrets and pauses
// included), then moves every flow whole (Transplanter.ExportFlow from its
// shard, ImportFlow into to[Of(flow, len(to))]) and verifies that the new
// set holds exactly the flows, events and per-flow sequence counters and
// served counts of the old one. Nothing is deleted from from: it stays the
// operator's backup until they are satisfied. Every shard of both sets
// must be a queue.Transplanter; no process may use either set meanwhile.
//
// A single store never labeled may be from: an unsharded queue becomes a
// sharded one of epoch 0.
//
// A failure part way leaves to partly written: the operator discards it
// (it is a fresh set) and runs Reshard again into another fresh set.
func Reshard(ctx context.Context, from, to []queue.Store, reason string, now clock.Tick) (Report, error) {
	src, err := openFrom(ctx, from)
	if err != nil {
		return Report{}, fmt.Errorf("reshard: the old set: %w", err)
	}
	r := Report{From: len(from), To: len(to), Epoch: src.Epoch() + 1, FlowsPerShard: make([]int64, len(to))}
	tps := make([]queue.Transplanter, len(to))
	for i, sh := range to {
		tp, ok := sh.(queue.Transplanter)
		if !ok {
			return r, fmt.Errorf("reshard: %w", unsupported(i, sh, "queue.Transplanter"))
		}
		tps[i] = tp
	}
	if err := create(ctx, to, r.Epoch, reason, now); err != nil {
		return r, fmt.Errorf("reshard: the new set: %w", err)
	}
	dst, err := Open(ctx, to, Options{})
	if err != nil {
		return r, fmt.Errorf("reshard: the new set: %w", err)
	}
	// Queue-wide state: the audit rows as they were, then the policy and
	// the destinations as they are.
	all, err := from[0].AuditAll(ctx)
	if err != nil {
		return r, fmt.Errorf("reshard: read audit: %w", err)
	}
	var wide []queue.AuditRecord
	for _, a := range all {
		switch a.Kind {
		case queue.AuditPolicy, queue.AuditDestination, queue.AuditDestinationPause, queue.AuditDestinationResume, queue.AuditShard:
			wide = append(wide, a)
		}
	}
	r.AuditRows = len(wide)
	for i, tp := range tps {
		if err := tp.ImportAudit(ctx, wide, now); err != nil {
			return r, fmt.Errorf("reshard: audit into new shard %d: %w", i, err)
		}
	}
	p, err := src.Policy(ctx)
	if err != nil {
		return r, fmt.Errorf("reshard: read policy: %w", err)
	}
	if q, err := dst.Policy(ctx); err != nil || !q.Equal(p) {
		if err := dst.SetPolicy(ctx, p, reason, now); err != nil {
			return r, fmt.Errorf("reshard: policy: %w", err)
		}
	}
	if err := copyDestinations(ctx, from[0], dst, reason, now); err != nil {
		return r, fmt.Errorf("reshard: %w", err)
	}
	// The flows, shard by shard, one index range of names at a time.
	for i, sh := range from {
		tp, ok := sh.(queue.Transplanter)
		if !ok {
			return r, fmt.Errorf("reshard: %w", unsupported(i, sh, "queue.Transplanter"))
		}
		after := ""
		for {
			names, err := tp.FlowNames(ctx, after, reshardPage)
			if err != nil {
				return r, fmt.Errorf("reshard: old shard %d: %w", i, err)
			}
			for _, name := range names {
				x, err := tp.ExportFlow(ctx, name)
				if err != nil {
					return r, fmt.Errorf("reshard: old shard %d: %w", i, err)
				}
				j := Of(name, len(to))
				if err := tps[j].ImportFlow(ctx, x, now); err != nil {
					return r, fmt.Errorf("reshard: flow %q from old shard %d into new shard %d: %w", name, i, j, err)
				}
				r.Flows++
				r.Events += int64(len(x.Events))
				r.FlowsPerShard[j]++
			}
			if len(names) < reshardPage {
				break
			}
			after = names[len(names)-1]
		}
	}
	if err := verify(ctx, src, dst); err != nil {
		return r, fmt.Errorf("reshard: verify: %w", err)
	}
	return r, nil
}

// openFrom opens the old set; a single store never labeled counts as a
// one-shard set before its first reshard (epoch -1, so the new set's is
// 0): that is how an unsharded queue becomes a sharded one.
func openFrom(ctx context.Context, from []queue.Store) (*Store, error) {
	if len(from) == 1 {
		if _, ok, err := Label(ctx, from[0]); err == nil && !ok {
			return &Store{shards: []queue.Store{from[0]}, epoch: -1}, nil
		}
	}
	return Open(ctx, from, Options{})
}

// copyDestinations registers in dst every destination from registers,
// with its secrets and pause.
func copyDestinations(ctx context.Context, from queue.Store, dst *Store, reason string, now clock.Tick) error {
	ds, ok := from.(queue.DestinationStore)
	if !ok {
		return nil
	}
	list, err := ds.Destinations(ctx)
	if err != nil {
		return fmt.Errorf("read destinations: %w", err)
	}
	for _, d := range list {
		if err := dst.PutDestination(ctx, d.Destination, reason, now); err != nil {
			return fmt.Errorf("destination %s: %w", d.Name, err)
		}
		if d.Paused {
			if err := dst.PauseDestination(ctx, d.Name, d.PauseReason, now); err != nil {
				return fmt.Errorf("destination %s: %w", d.Name, err)
			}
		}
	}
	return nil
}

// verify checks that dst holds what src holds: the same flows with the
// same sequence counters, served counts, weights and pauses, and the same
// number of events in each state.
func verify(ctx context.Context, src, dst *Store) error {
	a, err := src.Flows(ctx)
	if err != nil {
		return err
	}
	b, err := dst.Flows(ctx)
	if err != nil {
		return err
	}
	key := func(fs []queue.FlowState) []queue.FlowState {
		out := make([]queue.FlowState, len(fs))
		for k, f := range fs {
			out[k] = queue.FlowState{Flow: f.Flow, Served: f.Served, LastSeq: f.LastSeq, HeadSeq: f.HeadSeq, Backlog: f.Backlog,
				Weight: f.Weight, Paused: f.Paused, PauseReason: f.PauseReason, Destination: f.Destination}
		}
		return out
	}
	ka, kb := key(a), key(b)
	if len(ka) != len(kb) {
		return fmt.Errorf("%w: %d flows moved into %d", queue.ErrCorrupt, len(ka), len(kb))
	}
	for k := range ka {
		if ka[k] != kb[k] {
			return fmt.Errorf("%w: flow %+v arrived as %+v", queue.ErrCorrupt, ka[k], kb[k])
		}
	}
	sa, err := src.Stats(ctx)
	if err != nil {
		return err
	}
	sb, err := dst.Stats(ctx)
	if err != nil {
		return err
	}
	if sa.Events != sb.Events || sa.Flows != sb.Flows || sa.PausedFlows != sb.PausedFlows {
		return fmt.Errorf("%w: events %+v, flows %d, paused %d moved into events %+v, flows %d, paused %d",
			queue.ErrCorrupt, sa.Events, sa.Flows, sa.PausedFlows, sb.Events, sb.Flows, sb.PausedFlows)
	}
	return nil
}
