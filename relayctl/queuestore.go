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
