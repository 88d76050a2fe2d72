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
// to; its in-flight head keeps counting against that destination's
// concurrency (events.dest).

// qExportDestCol is the flows column ExportFlow reads the destination
// from, with its leading comma.
const qExportDestCol = `, f.dest`

const (
	qImportDestExists = `SELECT 1 FROM destinations WHERE name = ?1`
	qImportFlowDest   = `UPDATE flows SET dest = ?2 WHERE flow = ?1`
	qImportEventDest  = `UPDATE events SET dest = ?2 WHERE flow = ?1 AND state = 'inflight'`
)

// importDestination refuses a destination not registered here.
func importDestination(ctx context.Context, tx *txn, dest string) error {
	if dest == queue.DefaultDestination {
		return nil
	}
	var one int
	err := tx.QueryRowContext(ctx, qImportDestExists, dest).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, dest)
	}
	if err != nil {
		return fmt.Errorf("find destination: %w", err)
	}
	return nil
}

// importFlowDestination records the flow's destination (after the flow's
// row is inserted; its in-flight events after they are, by the caller's
// second call with events set).
func importFlowDestination(ctx context.Context, tx *txn, flow, dest string) error {
	if dest == queue.DefaultDestination {
		return nil
	}
	if _, err := tx.ExecContext(ctx, qImportFlowDest, flow, dest); err != nil {
		return fmt.Errorf("set destination: %w", err)
	}
	return nil
}

// importEventDestination marks the flow's in-flight events as claimed for
// its destination.
func importEventDestination(ctx context.Context, tx *txn, flow, dest string) error {
	if dest == queue.DefaultDestination {
		return nil
	}
	if _, err := tx.ExecContext(ctx, qImportEventDest, flow, dest); err != nil {
		return fmt.Errorf("set in-flight destination: %w", err)
	}
	return nil
}
