package main

import (
	"context"
	"errors"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
)

// queueDB adapts *queuestore.Store to queueStore.
type queueDB struct {
	s *queuestore.Store
}

func openQueueStore(path string) (queueStore, error) {
	s, err := queuestore.Open(path)
	if err != nil {
		return nil, err
	}
	return queueDB{s}, nil
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
	case errors.Is(err, queuestore.ErrInvalid):
		return kindInvalid
	}
	return kindOther
}

func (q queueDB) Close() error { return q.s.Close() }

func (q queueDB) Redrive(ctx context.Context, id string, generation int64, reason string, now clock.Tick) error {
	return q.s.Redrive(ctx, id, generation, reason, now)
}

func (q queueDB) Enqueue(ctx context.Context, ev newEvent, now clock.Tick) (enqueuedRow, error) {
	r, err := q.s.Enqueue(ctx, queuestore.Event{ID: ev.ID, Flow: ev.Flow, Body: ev.Body}, now)
	if err != nil {
		return enqueuedRow{}, err
	}
	return enqueuedRow{ID: ev.ID, Flow: ev.Flow, Seq: r.Seq, Duplicate: r.Duplicate}, nil
}

func (q queueDB) EnqueueBatch(ctx context.Context, evs []newEvent, now clock.Tick) ([]enqueuedRow, error) {
	in := make([]queuestore.Event, len(evs))
	for i, ev := range evs {
		in[i] = queuestore.Event{ID: ev.ID, Flow: ev.Flow, Body: ev.Body}
	}
	rs, err := q.s.EnqueueBatch(ctx, in, now)
	if err != nil {
		return nil, err
	}
	out := make([]enqueuedRow, len(rs))
	for i, r := range rs {
		out[i] = enqueuedRow{ID: evs[i].ID, Flow: evs[i].Flow, Seq: r.Seq, Duplicate: r.Duplicate}
	}
	return out, nil
}

func (q queueDB) Stats(ctx context.Context) (statsRow, error) {
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
	}, nil
}

func (q queueDB) Rotation(ctx context.Context) (bool, error) {
	p, err := q.s.Policy(ctx)
	if err != nil {
		return false, err
	}
	return p.Fairness == queuestore.FairRotation, nil
}

func (q queueDB) SetWeight(ctx context.Context, flow string, weight int, reason string, now clock.Tick) error {
	return q.s.SetWeight(ctx, flow, weight, reason, now)
}

func (q queueDB) Flows(ctx context.Context) ([]flowRow, error) {
	fs, err := q.s.Flows(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]flowRow, 0, len(fs))
	for _, f := range fs {
		r := flowRow{Flow: f.Flow, Served: f.Served, HeadSeq: f.HeadSeq, HeadState: f.HeadState, Backlog: f.Backlog,
			Position: f.Position}
		if f.Weight != 1 || f.Position != 0 {
			r.Weight = f.Weight
		}
		if f.ReadyAt != nil {
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
		Reason: e.Reason, Body: body(e.Body),
	}
}

func (q queueDB) Event(ctx context.Context, id string) (eventRow, error) {
	e, err := q.s.Event(ctx, id)
	if err != nil {
		return eventRow{}, err
	}
	return eventFrom(e), nil
}

func (q queueDB) FlowEvents(ctx context.Context, flow string) ([]eventRow, error) {
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

func (q queueDB) Quarantined(ctx context.Context) ([]quarantinedRow, error) {
	qs, err := q.s.Quarantined(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]quarantinedRow, 0, len(qs))
	for _, e := range qs {
		out = append(out, quarantinedRow{
			ID: e.EventID, Flow: e.Flow, Seq: e.Seq, Generation: e.Generation,
			LifetimeAttempts: e.LifetimeAttempts, Reason: e.Reason,
		})
	}
	return out, nil
}

func (q queueDB) Audit(ctx context.Context) ([]auditRow, error) {
	as, err := q.s.Audit(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]auditRow, 0, len(as))
	for _, a := range as {
		out = append(out, auditRow{EventID: a.EventID, Generation: a.Generation, Reason: a.Reason, Tick: int64(a.At)})
	}
	return out, nil
}

func (q queueDB) Snapshot(ctx context.Context) (any, error) {
	return q.s.Snapshot(ctx)
}
