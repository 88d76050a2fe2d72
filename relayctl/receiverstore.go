package main

import (
	"context"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// receiverLib is what receiverDB uses of a receiver store library: the
// receiver contract (receiver.Store). *receiverstore.Store (sqliteReceiver)
// and *pgreceiverstore.Store (pgReceiver, pg.go) both are one.
type receiverLib = receiver.Store

// receiverDB is relayctl's receiver: a receiverLib read into relayctl's
// own rows (json tags included), so that the output format is fixed here,
// not by the library's field names.
type receiverDB struct {
	s receiverLib
}

// readReceiverStore opens the receiver read-only, creating no file (see
// readQueueStore).
func readReceiverStore(path string) (*receiverDB, error) {
	s, err := receiverstore.Open(path, receiverstore.WithReadOnly())
	if err != nil {
		return nil, err
	}
	return &receiverDB{s}, nil
}

func openReceiverStore(path string) (*receiverDB, error) {
	s, err := receiverstore.Open(path)
	if err != nil {
		return nil, err
	}
	return &receiverDB{s}, nil
}

func (r *receiverDB) Close() error { return r.s.Close() }

// Totals lists every flow's total without reading the receipts.
func (r *receiverDB) Totals(ctx context.Context) ([]totalRow, error) {
	flows, err := r.s.Flows(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]totalRow, 0, len(flows))
	for _, f := range flows {
		out = append(out, totalRow{Flow: f.Flow, Total: f.Total, NextSeq: f.NextExpected})
	}
	return out, nil
}

func (r *receiverDB) Total(ctx context.Context, flow string) (int64, error) {
	return r.s.Total(ctx, flow)
}

func (r *receiverDB) Conflicts(ctx context.Context) ([]conflictRow, error) {
	cs, err := r.s.Conflicts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]conflictRow, 0, len(cs))
	for _, c := range cs {
		out = append(out, conflictRow{
			ID: c.ID, Flow: c.Flow, Seq: c.Seq, Body: body(c.Body), Rule: c.Rule,
			WithID: c.WithID, WithFlow: c.WithFlow, WithSeq: c.WithSeq, NextExpected: c.NextExpected,
		})
	}
	return out, nil
}

func (r *receiverDB) Snapshot(ctx context.Context) (any, error) {
	return r.s.Snapshot(ctx)
}
