package queuestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/queue"
)

// The destination part of a transplant (docs/contract.md §7.11): a flow
// keeps its destination, which must be registered in the store it moves
// to; each in-flight event keeps counting against the destination it was
// claimed for (events.dest, ExportedEvent.Dest), which SetFlowDestination
// may have changed since.

// qExportDestCol is the flows column ExportFlow reads the destination
// from, with its leading comma; qExportEventDestCol the events column of
// an in-flight event's destination, empty for an event not in flight.
const (
	qExportDestCol      = `, f.dest`
	qExportEventDestCol = `, CASE WHEN state = 'inflight' THEN dest ELSE '' END`
)

const (
	qImportDestExists = `SELECT 1 FROM destinations WHERE name = ?1`
	qImportFlowDest   = `UPDATE flows SET dest = ?2 WHERE flow = ?1`
)

// importDestinations refuses an export that names a destination not
// registered here (queue.FlowExport.Destinations).
func importDestinations(ctx context.Context, tx *txn, x queue.FlowExport) error {
	for _, d := range x.Destinations() {
		var one int
		err := tx.QueryRowContext(ctx, qImportDestExists, d).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, d)
		}
		if err != nil {
			return fmt.Errorf("find destination: %w", err)
		}
	}
	return nil
}

// importFlowDestination records the flow's destination, after the flow's
// row is inserted.
func importFlowDestination(ctx context.Context, tx *txn, flow, dest string) error {
	if dest == queue.DefaultDestination {
		return nil
	}
	if _, err := tx.ExecContext(ctx, qImportFlowDest, flow, dest); err != nil {
		return fmt.Errorf("set destination: %w", err)
	}
	return nil
}
