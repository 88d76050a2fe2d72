package pgqueuestore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// The destination part of a transplant (docs/contract.md §7.11), as
// queuestore's: a flow keeps its destination (flows.dest and
// flow_seqs.dest), which must be registered in the store it moves to; each
// in-flight event keeps counting against the destination it was claimed
// for (events.dest, ExportedEvent.Dest), which SetFlowDestination may
// have changed since.

// qExportDestCol is the flows column ExportFlow reads the destination
// from, with its leading comma; qExportEventDestCol the events column of
// an in-flight event's destination, empty for an event not in flight.
const (
	qExportDestCol      = `, f.dest`
	qExportEventDestCol = `, CASE WHEN state = 'inflight' THEN dest ELSE '' END`
)

const (
	qImportDestExists = `SELECT EXISTS (SELECT 1 FROM {s}.destinations WHERE name = $1)`
	qImportFlowDest   = `WITH s AS (UPDATE {s}.flow_seqs SET dest = $2 WHERE flow = $1)
UPDATE {s}.flows SET dest = $2 WHERE flow = $1`
)

// importDestinations refuses an export that names a destination not
// registered here (queue.FlowExport.Destinations).
func (s *Store) importDestinations(ctx context.Context, tx pgx.Tx, x queue.FlowExport) error {
	for _, d := range x.Destinations() {
		var ok bool
		if err := tx.QueryRow(ctx, s.q(qImportDestExists), d).Scan(&ok); err != nil {
			return fmt.Errorf("find destination: %w", err)
		}
		if !ok {
			return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, d)
		}
	}
	return nil
}

// importFlowDestination records the flow's destination (flows, flow_seqs).
func (s *Store) importFlowDestination(ctx context.Context, tx pgx.Tx, flow, dest string) error {
	if dest == queue.DefaultDestination {
		return nil
	}
	if _, err := tx.Exec(ctx, s.q(qImportFlowDest), flow, dest); err != nil {
		return fmt.Errorf("set destination: %w", err)
	}
	return nil
}
