package main

// TEMPORARY: the queue store's read API has not landed yet.

import (
	"context"
	"errors"
)

var errPending = errors.New("queue read API not landed yet")

func (q queueDB) Stats(ctx context.Context) (statsRow, error)     { return statsRow{}, errPending }
func (q queueDB) Flows(ctx context.Context) ([]flowRow, error)    { return nil, errPending }
func (q queueDB) Audit(ctx context.Context) ([]auditRow, error)   { return nil, errPending }
func (q queueDB) Snapshot(ctx context.Context) (any, error)       { return nil, errPending }
func (q queueDB) Event(ctx context.Context, id string) (eventRow, error) { return eventRow{}, errPending }
func (q queueDB) Quarantined(ctx context.Context) ([]eventRow, error) { return nil, errPending }
func (q queueDB) FlowEvents(ctx context.Context, flow string) ([]eventRow, error) { return nil, errPending }
