package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// maxBodyBytes is the largest event body the queue takes.
const maxBodyBytes = queuestore.MaxBodyLen

// queueLib is what queueDB uses of a queue store library: the whole queue
// contract with flow weights. *queuestore.Store (sqliteQueue) and
// *pgqueuestore.Store (pgQueue, pg.go) both are one.
type queueLib interface {
	queue.Store
	queue.Weighter
}

// sqliteQueue is *queuestore.Store as a queueLib.
type sqliteQueue struct{ *queuestore.Store }

// queueDB is relayctl's queue: a queueLib (either backend) read into
// relayctl's own rows (json tags included), so that the output format is
// fixed here, not by the library's field names, and written at the tick
// relayctl's clock mode gives.
type queueDB struct {
	s queueLib
	// reopen opens the queue again in real time (UseRealTime). It takes
	// old over: old is closed whether or not reopen succeeds (it may close
	// old first), so that a failed reopen leaves nothing to close twice.
	reopen func(old queueLib, src clock.Source, skew clock.Tick) (queueLib, error)
	// follow, when set, is the wall clock that every write acts at, or later
	// (UseRealTime with follow).
	follow clock.Source
}

// at is the tick a write acts at: now, or the clock when following it and
// the clock has moved past now (a long bulk enqueue).
func (q *queueDB) at(now clock.Tick) clock.Tick {
	if q.follow != nil {
		if w := q.follow.Now(); w > now {
			return w
		}
	}
	return now
}

// readQueueStore opens the queue read-only: it creates no file (no lock
// file, no -wal or -shm), so an operator can run a read command on a
// service's queue without write permission and without leaving files the
// service could not open.
func readQueueStore(path string) (*queueDB, error) {
	s, err := queuestore.Open(path, queuestore.WithReadOnly())
	if err != nil {
		return nil, err
	}
	return &queueDB{s: sqliteQueue{s}, reopen: reopenSQLite(path, true)}, nil
}

func openQueueStore(path string) (*queueDB, error) {
	s, err := queuestore.Open(path)
	if err != nil {
		return nil, err
	}
	return &queueDB{s: sqliteQueue{s}, reopen: reopenSQLite(path, false)}, nil
}

// reopenSQLite closes the store and opens the file at path again in real
// time, read-only again when it was.
func reopenSQLite(path string, readOnly bool) func(old queueLib, src clock.Source, skew clock.Tick) (queueLib, error) {
	return func(old queueLib, src clock.Source, skew clock.Tick) (queueLib, error) {
		if err := old.Close(); err != nil {
			return nil, err
		}
		opts := []queuestore.Option{queuestore.WithRealTime(src, skew)}
		if readOnly {
			opts = append(opts, queuestore.WithReadOnly())
		}
		s, err := queuestore.Open(path, opts...)
		if err != nil {
			return nil, err
		}
		return sqliteQueue{s}, nil
	}
}

// UseRealTime opens the queue again in real time. When it fails, q is
// closed: its command stops there, and Close does nothing.
func (q *queueDB) UseRealTime(src clock.Source, skew clock.Tick, follow bool) error {
	if follow {
		q.follow = src
	}
	s, err := q.reopen(q.s, src, skew)
	if err != nil {
		// reopen closed the old store: q holds none now, and Close does
		// nothing. A command stops at this error; closing the old store
		// again would release a sharded queue's hold twice.
		q.s = nil
		return err
	}
	q.s = s
	return nil
}

// kindOf classifies an error of either store. ErrEmptyReason comes before
// ErrInvalid: the queue reports an empty reason as both.
func kindOf(err error) errKind {
	switch {
	case errors.Is(err, queuestore.ErrNotFound):
		return kindNotFound
	case errors.Is(err, queuestore.ErrNotQuarantined):
		return kindNotQuarantined
	case errors.Is(err, queuestore.ErrStaleGeneration):
		return kindStaleGeneration
	case errors.Is(err, queuestore.ErrEmptyReason):
		return kindEmptyReason
	case errors.Is(err, queuestore.ErrTimeRegression):
		return kindTimeRegression
	case errors.Is(err, queuestore.ErrConflict):
		return kindConflict
	case errors.Is(err, queuestore.ErrTimeAhead):
		return kindTimeAhead
	case errors.Is(err, queuestore.ErrTickOverflow):
		return kindTickOverflow
	case errors.Is(err, queuestore.ErrPolicyMismatch):
		return kindPolicyMismatch
	case errors.Is(err, queue.ErrFlowPaused):
		return kindFlowPaused
	case errors.Is(err, queue.ErrFlowNotPaused):
		return kindFlowNotPaused
	case errors.Is(err, queuestore.ErrInvalid):
		return kindInvalid
	}
	return kindOther
}

// Close closes the store; after a failed UseRealTime there is none left
// to close.
func (q *queueDB) Close() error {
	if q.s == nil {
		return nil
	}
	return q.s.Close()
}

// event is ev as the queue's type.
func (ev newEvent) event() queue.Event {
	return queue.Event{ID: ev.ID, Flow: ev.Flow, Body: ev.Body, NotBefore: clock.Tick(ev.NotBefore), Destination: ev.To}
}

func (q *queueDB) Redrive(ctx context.Context, id string, generation int64, reason string, now clock.Tick) error {
	return q.s.Redrive(ctx, id, generation, reason, q.at(now))
}

func (q *queueDB) Enqueue(ctx context.Context, ev newEvent, now clock.Tick) (enqueuedRow, error) {
	r, err := q.s.Enqueue(ctx, ev.event(), q.at(now))
	if err != nil {
		return enqueuedRow{}, err
	}
	return enqueuedRow{ID: ev.ID, Flow: ev.Flow, Seq: r.Seq, Duplicate: r.Duplicate}, nil
}

func (q *queueDB) EnqueueBatch(ctx context.Context, evs []newEvent, now clock.Tick) ([]enqueuedRow, error) {
	in := make([]queue.Event, len(evs))
	for i, ev := range evs {
		in[i] = ev.event()
	}
	rs, err := q.s.EnqueueBatch(ctx, in, q.at(now))
	if err != nil {
		return nil, err
	}
	out := make([]enqueuedRow, len(rs))
	for i, r := range rs {
		out[i] = enqueuedRow{ID: evs[i].ID, Flow: evs[i].Flow, Seq: r.Seq, Duplicate: r.Duplicate}
	}
	return out, nil
}

func (q *queueDB) Stats(ctx context.Context) (statsRow, error) {
	st, err := q.s.Stats(ctx)
	if err != nil {
		return statsRow{}, err
	}
	return statsRow{
		ClockMark:    int64(st.ClockMark),
		GlobalTicket: st.Ticket,
		Flows:        st.Flows,
		EventsByState: eventCounts{
			Pending:     st.Events.Pending,
			Inflight:    st.Events.Inflight,
			Acked:       st.Events.Acked,
			Quarantined: st.Events.Quarantined,
		},
		Quarantined: st.Quarantined,
		PausedFlows: st.PausedFlows,
	}, nil
}

func (q *queueDB) SetWeight(ctx context.Context, flow string, weight int, reason string, now clock.Tick) error {
	return q.s.SetWeight(ctx, flow, weight, reason, now)
}

func (q *queueDB) Flows(ctx context.Context) ([]flowRow, error) {
	fs, err := q.s.Flows(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]flowRow, 0, len(fs))
	for _, f := range fs {
		r := flowRow{Flow: f.Flow, Served: f.Served, HeadSeq: f.HeadSeq, HeadState: f.HeadState, Backlog: f.Backlog,
			Position: f.Position, Paused: f.Paused, PauseReason: f.PauseReason, Destination: f.Destination}
		if f.Weight != 1 || f.Position != 0 {
			r.Weight = f.Weight
		}
		// A paused flow's head is not dispatchable at any tick until it is
		// resumed: no ready tick, whichever tick the backend reports.
		if f.ReadyAt != nil && !f.Paused {
			t := int64(*f.ReadyAt)
			r.ReadyTick = &t
		}
		out = append(out, r)
	}
	return out, nil
}

func eventFrom(e queuestore.EventState) eventRow {
	return eventRow{
		ID: e.ID, Flow: e.Flow, Seq: e.Seq, State: e.State,
		Generation: e.Generation, Attempts: e.Attempts, LifetimeAttempts: e.LifetimeAttempts,
		AvailableAt: int64(e.AvailableAt), LeaseUntil: int64(e.LeaseUntil),
		Reason: e.Reason, AckedAt: int64(e.AckedAt), Error: e.Error, Body: body(e.Body),
	}
}

func (q *queueDB) Event(ctx context.Context, id string) (eventRow, error) {
	e, err := q.s.Event(ctx, id)
	if err != nil {
		return eventRow{}, err
	}
	return eventFrom(e), nil
}

// EventDetail reads one event with the history of its failed attempts.
func (q *queueDB) EventDetail(ctx context.Context, id string) (eventDetailRow, error) {
	e, err := q.s.Event(ctx, id)
	if err != nil {
		return eventDetailRow{}, err
	}
	r := eventDetailRow{eventRow: eventFrom(e), History: make([]attemptRow, 0, len(e.History))}
	for _, a := range e.History {
		r.History = append(r.History, attemptRow{
			At: int64(a.At), Generation: a.Generation, Attempt: a.Attempt,
			Outcome: string(a.Outcome), Reason: a.Reason, Error: a.Error,
		})
	}
	return r, nil
}

func (q *queueDB) FlowEvents(ctx context.Context, flow string) ([]eventRow, error) {
	es, err := q.s.FlowEvents(ctx, flow)
	if err != nil {
		return nil, err
	}
	out := make([]eventRow, 0, len(es))
	for _, e := range es {
		out = append(out, eventFrom(e))
	}
	return out, nil
}

func (q *queueDB) Quarantined(ctx context.Context) ([]quarantinedRow, error) {
	qs, err := q.s.Quarantined(ctx)
	if err != nil {
		return nil, err
	}
	return quarantinedRows(qs), nil
}

func quarantinedRows(qs []queuestore.QuarantinedEvent) []quarantinedRow {
	out := make([]quarantinedRow, 0, len(qs))
	for _, e := range qs {
		out = append(out, quarantinedRow{
			ID: e.EventID, Flow: e.Flow, Seq: e.Seq, Generation: e.Generation,
			LifetimeAttempts: e.LifetimeAttempts, Reason: e.Reason, Error: e.Error,
		})
	}
	return out
}

func (q *queueDB) Audit(ctx context.Context) ([]auditRow, error) {
	as, err := q.s.AuditAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]auditRow, 0, len(as))
	for _, a := range as {
		r := auditRow{Kind: string(a.Kind), EventID: a.EventID, Generation: a.Generation, Reason: a.Reason, Tick: int64(a.At)}
		if a.Kind == queuestore.AuditPolicy {
			var ch queuestore.PolicyChange
			if err := json.Unmarshal([]byte(a.Detail), &ch); err == nil {
				old, new := policyFrom(ch.Old), policyFrom(ch.New)
				r.Policy = &policyChangeRow{Old: old, New: new}
				r.Change = policyDiff(old, new, a.At >= wallFloor)
			}
		}
		if a.Kind == queuestore.AuditWeight {
			var ch queuestore.WeightChange
			if err := json.Unmarshal([]byte(a.Detail), &ch); err == nil {
				r.Change = fmt.Sprintf("weight of flow %q %d -> %d", ch.Flow, ch.Old, ch.New)
			}
		}
		if a.Kind == queue.AuditPause || a.Kind == queue.AuditResume {
			var ch queue.FlowChange
			if err := json.Unmarshal([]byte(a.Detail), &ch); err == nil && ch.Flow != "" {
				r.Change = fmt.Sprintf("%s flow %q", a.Kind, ch.Flow)
			}
		}
		if r.Change == "" {
			r.Change = destinationChange(a) // destination.go
		}
		if r.Change == "" && a.Detail != "" {
			r.Change = a.Detail
		}
		out = append(out, r)
	}
	return out, nil
}

// Snapshot reads the queue's snapshot. A sharded queue has one per shard,
// each read in its own transaction (shardSnapshots): not a consistent cut
// across the shards.
func (q *queueDB) Snapshot(ctx context.Context) (any, error) {
	if s, ok := q.sharded(); ok {
		return shardSnapshots(ctx, s)
	}
	return q.s.Snapshot(ctx)
}

func policyFrom(p queuestore.Policy) policyRow {
	f := p.Fairness
	if f == "" {
		f = queuestore.FairMinServed
	}
	r := policyRow{
		Lease: int64(p.Lease), MaxAttempts: p.MaxAttempts,
		BackoffBase: int64(p.BackoffBase), BackoffCap: int64(p.BackoffCap),
		Jitter: p.Jitter, Fairness: string(f),
		Schedule: []int64{}, RetryAfterCap: int64(p.RetryAfterCap),
		Retention: int64(p.Retention),
	}
	for _, w := range p.Schedule {
		r.Schedule = append(r.Schedule, int64(w))
	}
	return r
}

func (q *queueDB) Policy(ctx context.Context) (policyRow, error) {
	p, err := q.s.Policy(ctx)
	if err != nil {
		return policyRow{}, err
	}
	return policyFrom(p), nil
}

// SetPolicy records p (every field policyRow shows, the schedule and the
// fairness order included; an empty fairness keeps the recorded one).
func (q *queueDB) SetPolicy(ctx context.Context, p policyRow, reason string, now clock.Tick) error {
	next := p.policy()
	if p.Fairness == "" {
		cur, err := q.s.Policy(ctx)
		if err != nil {
			return err
		}
		next.Fairness = cur.Fairness
	}
	return q.s.SetPolicy(ctx, next, reason, q.at(now))
}

func (q *queueDB) RedriveAll(ctx context.Context, f redriveFilter, reason string, now clock.Tick) ([]redrivenRow, error) {
	rs, err := q.s.RedriveAll(ctx, queuestore.RedriveFilter{Flow: f.Flow, Reason: f.Reason}, reason, q.at(now))
	out := make([]redrivenRow, 0, len(rs))
	for _, r := range rs {
		out = append(out, redrivenRow{ID: r.EventID, Flow: r.Flow, Seq: r.Seq, Generation: r.Generation})
	}
	return out, err
}

func (q *queueDB) QuarantinedMatching(ctx context.Context, f redriveFilter) ([]quarantinedRow, error) {
	qs, err := q.s.QuarantinedMatching(ctx, queuestore.RedriveFilter{Flow: f.Flow, Reason: f.Reason})
	if err != nil {
		return nil, err
	}
	return quarantinedRows(qs), nil
}

// errNoCapability reports a queue store that lacks a capability of the
// queue contract (queue.Pauser, queue.Pruner). Both backends of this
// repository have them all; a store wrapped by a test may not.
var errNoCapability = errors.New("this queue's store cannot do it")

// pauser is the queue's store as a queue.Pauser.
func (q *queueDB) pauser() (queue.Pauser, error) {
	p, ok := q.s.(queue.Pauser)
	if !ok {
		return nil, fmt.Errorf("pause and resume: %w", errNoCapability)
	}
	return p, nil
}

// PauseFlow pauses flow (docs/contract.md §7.9), audited with reason.
func (q *queueDB) PauseFlow(ctx context.Context, flow, reason string, now clock.Tick) error {
	p, err := q.pauser()
	if err != nil {
		return err
	}
	return p.PauseFlow(ctx, flow, reason, q.at(now))
}

// ResumeFlow resumes a paused flow, audited with reason.
func (q *queueDB) ResumeFlow(ctx context.Context, flow, reason string, now clock.Tick) error {
	p, err := q.pauser()
	if err != nil {
		return err
	}
	return p.ResumeFlow(ctx, flow, reason, q.at(now))
}

// pruner is the queue's store as a queue.Pruner.
func (q *queueDB) pruner() (queue.Pruner, error) {
	p, ok := q.s.(queue.Pruner)
	if !ok {
		return nil, fmt.Errorf("prune: %w", errNoCapability)
	}
	return p, nil
}

// Prune deletes one batch of what the retention window no longer keeps.
func (q *queueDB) Prune(ctx context.Context, now clock.Tick, limit int) (queue.PruneResult, error) {
	p, err := q.pruner()
	if err != nil {
		return queue.PruneResult{}, err
	}
	return p.Prune(ctx, q.at(now), limit)
}

// Prunable counts what Prune at now would delete, in all its batches.
func (q *queueDB) Prunable(ctx context.Context, now clock.Tick) (queue.PruneResult, error) {
	p, err := q.pruner()
	if err != nil {
		return queue.PruneResult{}, err
	}
	return p.Prunable(ctx, q.at(now))
}
