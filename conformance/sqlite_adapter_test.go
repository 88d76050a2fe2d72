package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// sqliteQueue presents a queuestore.Store with the queue vocabulary. It
// converts values field by field and wraps queuestore's sentinel errors in
// queue's. Once queuestore's types are aliases of queue's, every
// conversion here is the identity and the store can be passed as it is.
type sqliteQueue struct{ s *queuestore.Store }

var errPairs = []struct{ from, to error }{
	{queuestore.ErrConflict, queue.ErrConflict},
	{queuestore.ErrTimeRegression, queue.ErrTimeRegression},
	{queuestore.ErrNotFound, queue.ErrNotFound},
	{queuestore.ErrEmptyReason, queue.ErrEmptyReason},
	{queuestore.ErrNotQuarantined, queue.ErrNotQuarantined},
	{queuestore.ErrStaleGeneration, queue.ErrStaleGeneration},
	{queuestore.ErrInvalid, queue.ErrInvalid},
	{queuestore.ErrSchemaVersion, queue.ErrSchemaVersion},
	{queuestore.ErrCorrupt, queue.ErrCorrupt},
	{queuestore.ErrPolicyMismatch, queue.ErrPolicyMismatch},
	{queuestore.ErrTickOverflow, queue.ErrTickOverflow},
	{queuestore.ErrTimeAhead, queue.ErrTimeAhead},
}

// qerr wraps err in the queue sentinels it matches in queuestore's.
func qerr(err error) error { return wrapSentinels(err, errPairs) }

// wrapSentinels wraps err in every "to" sentinel whose "from" it matches.
func wrapSentinels(err error, pairs []struct{ from, to error }) error {
	if err == nil {
		return nil
	}
	for _, p := range pairs {
		if p.from != p.to && errors.Is(err, p.from) && !errors.Is(err, p.to) {
			err = fmt.Errorf("%w (%w)", p.to, err)
		}
	}
	return err
}

// via converts between structurally equal types through JSON.
func via[T any](v any) T {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func (q sqliteQueue) Enqueue(ctx context.Context, e queue.Event, now clock.Tick) (queue.Enqueued, error) {
	r, err := q.s.Enqueue(ctx, queuestore.Event(e), now)
	return queue.Enqueued(r), qerr(err)
}

func (q sqliteQueue) EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error) {
	in := make([]queuestore.Event, len(es))
	for i, e := range es {
		in[i] = queuestore.Event(e)
	}
	rs, err := q.s.EnqueueBatch(ctx, in, now)
	var out []queue.Enqueued
	if rs != nil {
		out = make([]queue.Enqueued, len(rs))
		for i, r := range rs {
			out[i] = queue.Enqueued(r)
		}
	}
	return out, qerr(err)
}

func claims(cs []queuestore.Claim) []queue.Claim {
	if cs == nil {
		return nil
	}
	out := make([]queue.Claim, len(cs))
	for i, c := range cs {
		out[i] = queue.Claim(c)
	}
	return out
}

func (q sqliteQueue) Claim(ctx context.Context, now clock.Tick) (queue.Claim, bool, error) {
	c, ok, err := q.s.Claim(ctx, now)
	return queue.Claim(c), ok, qerr(err)
}

func (q sqliteQueue) ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error) {
	cs, err := q.s.ClaimBatch(ctx, now, n)
	return claims(cs), qerr(err)
}

func (q sqliteQueue) Settle(ctx context.Context, id string, gen int64, r queue.Result, now clock.Tick) (queue.Outcome, error) {
	o, err := q.s.Settle(ctx, id, gen, queuestore.Result(r), now)
	return queue.Outcome(o), qerr(err)
}

func (q sqliteQueue) SettleBatch(ctx context.Context, items []queue.SettleItem, now clock.Tick) ([]queue.SettleResult, error) {
	in := make([]queuestore.SettleItem, len(items))
	for i, it := range items {
		in[i] = queuestore.SettleItem{EventID: it.EventID, Generation: it.Generation, Result: queuestore.Result(it.Result)}
	}
	rs, err := q.s.SettleBatch(ctx, in, now)
	var out []queue.SettleResult
	if rs != nil {
		out = make([]queue.SettleResult, len(rs))
		for i, r := range rs {
			out[i] = queue.SettleResult{Outcome: queue.Outcome(r.Outcome), Err: qerr(r.Err)}
		}
	}
	return out, qerr(err)
}

func (q sqliteQueue) Redrive(ctx context.Context, id string, gen int64, reason string, now clock.Tick) error {
	return qerr(q.s.Redrive(ctx, id, gen, reason, now))
}

func (q sqliteQueue) Event(ctx context.Context, id string) (queue.EventState, error) {
	e, err := q.s.Event(ctx, id)
	return queue.EventState(e), qerr(err)
}

func (q sqliteQueue) FlowEvents(ctx context.Context, flow string) ([]queue.EventState, error) {
	es, err := q.s.FlowEvents(ctx, flow)
	if err != nil {
		return nil, qerr(err)
	}
	out := make([]queue.EventState, len(es))
	for i, e := range es {
		out[i] = queue.EventState(e)
	}
	return out, nil
}

func (q sqliteQueue) Quarantined(ctx context.Context) ([]queue.QuarantinedEvent, error) {
	qs, err := q.s.Quarantined(ctx)
	if err != nil {
		return nil, qerr(err)
	}
	var out []queue.QuarantinedEvent
	for _, e := range qs {
		out = append(out, queue.QuarantinedEvent(e))
	}
	return out, nil
}

func (q sqliteQueue) Audit(ctx context.Context) ([]queue.AuditEntry, error) {
	as, err := q.s.Audit(ctx)
	if err != nil {
		return nil, qerr(err)
	}
	return via[[]queue.AuditEntry](as), nil
}

func (q sqliteQueue) Flows(ctx context.Context) ([]queue.FlowState, error) {
	fs, err := q.s.Flows(ctx)
	if err != nil {
		return nil, qerr(err)
	}
	var out []queue.FlowState
	for _, f := range fs {
		out = append(out, queue.FlowState(f))
	}
	return out, nil
}

func (q sqliteQueue) Stats(ctx context.Context) (queue.Stats, error) {
	st, err := q.s.Stats(ctx)
	if err != nil {
		return queue.Stats{}, qerr(err)
	}
	return via[queue.Stats](st), nil
}

func (q sqliteQueue) Snapshot(ctx context.Context) (queue.Snapshot, error) {
	sn, err := q.s.Snapshot(ctx)
	if err != nil {
		return queue.Snapshot{}, qerr(err)
	}
	return via[queue.Snapshot](sn), nil
}

func (q sqliteQueue) Extend(ctx context.Context, id string, gen int64, now clock.Tick) (queue.Outcome, error) {
	o, err := q.s.Extend(ctx, id, gen, now)
	return queue.Outcome(o), qerr(err)
}

func (q sqliteQueue) ExtendBatch(ctx context.Context, items []queue.ExtendItem, now clock.Tick) ([]queue.SettleResult, error) {
	in := make([]queuestore.ExtendItem, len(items))
	for i, it := range items {
		in[i] = queuestore.ExtendItem(it)
	}
	rs, err := q.s.ExtendBatch(ctx, in, now)
	var out []queue.SettleResult
	if rs != nil {
		out = make([]queue.SettleResult, len(rs))
		for i, r := range rs {
			out[i] = queue.SettleResult{Outcome: queue.Outcome(r.Outcome), Err: qerr(r.Err)}
		}
	}
	return out, qerr(err)
}

func (q sqliteQueue) RedriveAll(ctx context.Context, f queue.RedriveFilter, reason string, now clock.Tick) ([]queue.Redriven, error) {
	rs, err := q.s.RedriveAll(ctx, queuestore.RedriveFilter(f), reason, now)
	var out []queue.Redriven
	for _, r := range rs {
		out = append(out, queue.Redriven(r))
	}
	return out, qerr(err)
}

func (q sqliteQueue) QuarantinedMatching(ctx context.Context, f queue.RedriveFilter) ([]queue.QuarantinedEvent, error) {
	qs, err := q.s.QuarantinedMatching(ctx, queuestore.RedriveFilter(f))
	if err != nil {
		return nil, qerr(err)
	}
	var out []queue.QuarantinedEvent
	for _, e := range qs {
		out = append(out, queue.QuarantinedEvent(e))
	}
	return out, nil
}

func (q sqliteQueue) NextDue(ctx context.Context) (clock.Tick, bool, error) {
	t, ok, err := q.s.NextDue(ctx)
	return t, ok, qerr(err)
}

func (q sqliteQueue) Policy(ctx context.Context) (queue.Policy, error) {
	p, err := q.s.Policy(ctx)
	return queue.Policy{Lease: p.Lease, MaxAttempts: p.MaxAttempts, BackoffBase: p.BackoffBase, BackoffCap: p.BackoffCap,
		Jitter: p.Jitter, Fairness: queue.Fairness(p.Fairness)}, qerr(err)
}

func (q sqliteQueue) SetPolicy(ctx context.Context, p queue.Policy, reason string, now clock.Tick) error {
	return qerr(q.s.SetPolicy(ctx, sqlitePolicy(p), reason, now))
}

func sqlitePolicy(p queue.Policy) queuestore.Policy {
	return queuestore.Policy{Lease: p.Lease, MaxAttempts: p.MaxAttempts, BackoffBase: p.BackoffBase, BackoffCap: p.BackoffCap,
		Jitter: p.Jitter, Fairness: queuestore.Fairness(p.Fairness)}
}

func (q sqliteQueue) AuditAll(ctx context.Context) ([]queue.AuditRecord, error) {
	as, err := q.s.AuditAll(ctx)
	if err != nil {
		return nil, qerr(err)
	}
	return via[[]queue.AuditRecord](as), nil
}

func (q sqliteQueue) Close() error { return q.s.Close() }

// SetWeight is queuestore.Store.SetWeight with queue's errors (the twin
// tests call it; it is not part of the Queue interface).
func (q sqliteQueue) SetWeight(ctx context.Context, flow string, weight int, reason string, now clock.Tick) error {
	return qerr(q.s.SetWeight(ctx, flow, weight, reason, now))
}
