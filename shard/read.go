package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// gather runs read on every shard and returns the answers in shard order.
func gather[T any](s *Store, read func(i int, sh queue.Store) (T, error)) ([]T, error) {
	out := make([]T, len(s.shards))
	for i, sh := range s.shards {
		v, err := read(i, sh)
		if err != nil {
			if len(s.shards) == 1 {
				return nil, err
			}
			return nil, &ShardError{Shard: i, Err: err}
		}
		out[i] = v
	}
	return out, nil
}

// minTick is the least of the ticks whose ok is set.
func minTick(ctx context.Context, s *Store, read func(sh queue.Store) (clock.Tick, bool, error)) (clock.Tick, bool, error) {
	var at clock.Tick
	found := false
	for i, sh := range s.shards {
		t, ok, err := read(sh)
		if err != nil {
			return 0, false, &ShardError{Shard: i, Err: err}
		}
		if ok && (!found || t < at) {
			at, found = t, true
		}
	}
	return at, found, nil
}

// NextDue is the earliest NextDue of the shards.
func (s *Store) NextDue(ctx context.Context) (clock.Tick, bool, error) {
	return minTick(ctx, s, func(sh queue.Store) (clock.Tick, bool, error) { return sh.NextDue(ctx) })
}

// OldestDue is the earliest OldestDue of the shards.
func (s *Store) OldestDue(ctx context.Context, now clock.Tick) (clock.Tick, bool, error) {
	return minTick(ctx, s, func(sh queue.Store) (clock.Tick, bool, error) { return sh.OldestDue(ctx, now) })
}

// OldestWaiting is the earliest OldestWaiting of the shards.
func (s *Store) OldestWaiting(ctx context.Context) (clock.Tick, bool, error) {
	return minTick(ctx, s, func(sh queue.Store) (clock.Tick, bool, error) {
		w, ok := sh.(queue.Waiter)
		if !ok {
			return 0, false, errors.ErrUnsupported
		}
		return w.OldestWaiting(ctx)
	})
}

// Policy is the policy of shard 0 (SetPolicy writes every shard).
func (s *Store) Policy(ctx context.Context) (queue.Policy, error) { return s.shards[0].Policy(ctx) }

// Event reads an event from its shard (the one it was claimed from, or
// the first that has it).
func (s *Store) Event(ctx context.Context, id string) (queue.EventState, error) {
	i, ok, err := s.shardOfEvent(ctx, id)
	if err != nil && !errors.Is(err, queue.ErrInvalid) {
		return queue.EventState{}, err
	}
	if !ok {
		i = 0
	}
	return s.shards[i].Event(ctx, id)
}

// FlowEvents reads the events of a flow from its shard.
func (s *Store) FlowEvents(ctx context.Context, flow string) ([]queue.EventState, error) {
	return s.shards[s.ShardOf(flow)].FlowEvents(ctx, flow)
}

// Quarantined merges the shards' quarantined events in flow and sequence
// order.
func (s *Store) Quarantined(ctx context.Context) ([]queue.QuarantinedEvent, error) {
	all, err := gather(s, func(_ int, sh queue.Store) ([]queue.QuarantinedEvent, error) { return sh.Quarantined(ctx) })
	if err != nil {
		return nil, err
	}
	out := slices.Concat(all...)
	slices.SortStableFunc(out, cmpQuarantined)
	return nonNil(out), nil
}

// QuarantinedMatching merges what each shard's RedriveAll with f would
// redrive, in flow and sequence order (only the flow's shard when f names
// one).
func (s *Store) QuarantinedMatching(ctx context.Context, f queue.RedriveFilter) ([]queue.QuarantinedEvent, error) {
	if f.Flow != "" {
		return s.shards[s.ShardOf(f.Flow)].QuarantinedMatching(ctx, f)
	}
	all, err := gather(s, func(_ int, sh queue.Store) ([]queue.QuarantinedEvent, error) { return sh.QuarantinedMatching(ctx, f) })
	if err != nil {
		return nil, err
	}
	out := slices.Concat(all...)
	slices.SortStableFunc(out, cmpQuarantined)
	return nonNil(out), nil
}

func cmpQuarantined(a, b queue.QuarantinedEvent) int {
	return cmp.Or(cmp.Compare(a.Flow, b.Flow), cmp.Compare(a.Seq, b.Seq))
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// globalID is the ID a sharded read gives audit row local of shard i:
// local × N + i, unique over the set and increasing with local in each
// shard. With one shard it is the row's own ID.
func (s *Store) globalID(local int64, i int) int64 {
	return local*int64(len(s.shards)) + int64(i)
}

// Audit merges the shards' redrive rows by tick, then shard; IDs are
// renumbered (ID × N + shard) to stay unique.
func (s *Store) Audit(ctx context.Context) ([]queue.AuditEntry, error) {
	all, err := gather(s, func(i int, sh queue.Store) ([]queue.AuditEntry, error) {
		rows, err := sh.Audit(ctx)
		for k := range rows {
			rows[k].ID = s.globalID(rows[k].ID, i)
		}
		return rows, err
	})
	if err != nil {
		return nil, err
	}
	out := slices.Concat(all...)
	// Stable: within one tick, shard order, then each shard's own order.
	slices.SortStableFunc(out, func(a, b queue.AuditEntry) int { return cmp.Compare(a.At, b.At) })
	return nonNil(out), nil
}

// AuditAll merges every audit row of the shards by tick, then shard; IDs
// are renumbered as Audit's. A queue-wide change (SetPolicy,
// PutDestination, …) has one row in each shard.
func (s *Store) AuditAll(ctx context.Context) ([]queue.AuditRecord, error) {
	all, err := gather(s, func(i int, sh queue.Store) ([]queue.AuditRecord, error) {
		rows, err := sh.AuditAll(ctx)
		for k := range rows {
			rows[k].ID = s.globalID(rows[k].ID, i)
		}
		return rows, err
	})
	if err != nil {
		return nil, err
	}
	out := slices.Concat(all...)
	slices.SortStableFunc(out, func(a, b queue.AuditRecord) int { return cmp.Compare(a.At, b.At) })
	return nonNil(out), nil
}

// Flows merges the shards' flows by name.
func (s *Store) Flows(ctx context.Context) ([]queue.FlowState, error) {
	all, err := gather(s, func(_ int, sh queue.Store) ([]queue.FlowState, error) { return sh.Flows(ctx) })
	if err != nil {
		return nil, err
	}
	out := slices.Concat(all...)
	slices.SortStableFunc(out, func(a, b queue.FlowState) int { return cmp.Compare(a.Flow, b.Flow) })
	return nonNil(out), nil
}

// Stats sums the shards' stats: counts are summed, Ticket is the sum of
// the shards' tickets (the claims made over the set), ClockMark the
// highest mark, SchemaVersion and Destinations those of shard 0. Each
// shard's stats are read in its own transaction.
func (s *Store) Stats(ctx context.Context) (queue.Stats, error) {
	all, err := gather(s, func(_ int, sh queue.Store) (queue.Stats, error) { return sh.Stats(ctx) })
	if err != nil {
		return queue.Stats{}, err
	}
	sum := all[0]
	for _, st := range all[1:] {
		sum.ClockMark = max(sum.ClockMark, st.ClockMark)
		sum.Ticket += st.Ticket
		sum.Flows += st.Flows
		sum.Events.Pending += st.Events.Pending
		sum.Events.Inflight += st.Events.Inflight
		sum.Events.Acked += st.Events.Acked
		sum.Events.Quarantined += st.Events.Quarantined
		sum.Quarantined += st.Quarantined
		sum.AuditRows += st.AuditRows
		sum.PausedFlows += st.PausedFlows
	}
	return sum, nil
}

// Snapshot is shard 0's snapshot when the set has one shard (so a 1-shard
// queue's golden files are the unsharded queue's). With more shards it
// merges the shards' snapshots, each read in its own transaction: flows
// and events by flow, audit rows by tick then shard with renumbered IDs
// (as Audit), failures by event ID; ClockMark is the highest mark, Ticket
// the sum, Policy, Rotation and Destinations those of shard 0. Shards
// returns the shards for a consistent snapshot of each.
func (s *Store) Snapshot(ctx context.Context) (queue.Snapshot, error) {
	all, err := gather(s, func(_ int, sh queue.Store) (queue.Snapshot, error) { return sh.Snapshot(ctx) })
	if err != nil {
		return queue.Snapshot{}, err
	}
	if len(all) == 1 {
		return all[0], nil
	}
	out := all[0]
	out.Flows, out.Events, out.Audit, out.OperatorAudit, out.Failures = nil, nil, nil, nil, nil
	for i, sn := range all {
		out.ClockMark = max(out.ClockMark, sn.ClockMark)
		if i > 0 {
			out.Ticket += sn.Ticket
		}
		out.Flows = append(out.Flows, sn.Flows...)
		out.Events = append(out.Events, sn.Events...)
		for _, a := range sn.Audit {
			a.ID = s.globalID(a.ID, i)
			out.Audit = append(out.Audit, a)
		}
		for _, a := range sn.OperatorAudit {
			a.ID = s.globalID(a.ID, i)
			out.OperatorAudit = append(out.OperatorAudit, a)
		}
		out.Failures = append(out.Failures, sn.Failures...)
	}
	slices.SortStableFunc(out.Flows, func(a, b queue.SnapshotFlow) int { return cmp.Compare(a.Flow, b.Flow) })
	slices.SortStableFunc(out.Events, func(a, b queue.SnapshotEvent) int {
		return cmp.Or(cmp.Compare(a.Flow, b.Flow), cmp.Compare(a.Seq, b.Seq))
	})
	slices.SortStableFunc(out.Audit, func(a, b queue.AuditEntry) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(out.OperatorAudit, func(a, b queue.AuditRecord) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(out.Failures, func(a, b queue.SnapshotAttempt) int {
		return cmp.Or(cmp.Compare(a.EventID, b.EventID), cmp.Compare(a.Generation, b.Generation))
	})
	out.Flows, out.Events, out.Audit = nonNil(out.Flows), nonNil(out.Events), nonNil(out.Audit)
	return out, nil
}

// RegisteredDestinations lists the registered destinations as shard 0
// records them: every shard registers the same, and PutDestination writes
// shard 0 first, so shard 0 has the newest settings even while a change
// that stopped part way waits for the same call again. One read of one
// shard: the relay's read (docs/contract.md §7.11).
func (s *Store) RegisteredDestinations(ctx context.Context) ([]queue.Destination, error) {
	ds, ok := s.shards[0].(queue.DestinationStore)
	if !ok {
		return nil, unsupported(0, s.shards[0], "queue.DestinationStore")
	}
	out, err := ds.RegisteredDestinations(ctx)
	if err != nil && len(s.shards) > 1 {
		return nil, &ShardError{Shard: 0, Err: err}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Destinations lists the destinations as shard 0 records them (every
// shard registers the same), with Flows, Backlog and Inflight summed over
// the shards. A destination is Paused when any shard has it paused, with
// the PauseReason of the first such shard: a pause or resume that stopped
// part way shows as paused until the same call again finishes it.
func (s *Store) Destinations(ctx context.Context) ([]queue.DestinationState, error) {
	all, err := gather(s, func(i int, sh queue.Store) ([]queue.DestinationState, error) {
		ds, ok := sh.(queue.DestinationStore)
		if !ok {
			return nil, unsupported(i, sh, "queue.DestinationStore")
		}
		return ds.Destinations(ctx)
	})
	if err != nil {
		return nil, err
	}
	out := all[0]
	for i, other := range all[1:] {
		if len(other) != len(out) {
			return nil, fmt.Errorf("%w: shard %d registers %d destinations, shard 0 %d", queue.ErrCorrupt, i+1, len(other), len(out))
		}
		for k := range out {
			if other[k].Name != out[k].Name {
				return nil, fmt.Errorf("%w: shard %d registers destination %q where shard 0 has %q", queue.ErrCorrupt, i+1, other[k].Name, out[k].Name)
			}
			out[k].Flows += other[k].Flows
			out[k].Backlog += other[k].Backlog
			out[k].Inflight += other[k].Inflight
			if other[k].Paused && !out[k].Paused {
				out[k].Paused, out[k].PauseReason = true, other[k].PauseReason
			}
		}
	}
	return out, nil
}
