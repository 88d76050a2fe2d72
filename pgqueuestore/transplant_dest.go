package pgqueuestore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// The destination part of a transplant (docs/contract.md §7.11), as
// queuestore's: a flow keeps its destination (flows.dest and flow_seqs.dest),
// which must be registered in the store it moves to; its in-flight head
// keeps counting against that destination's concurrency (events.dest).

// qExportDestCol is the flows column ExportFlow reads the destination
// from, with its leading comma.
const qExportDestCol = `, f.dest`

const (
	qImportDestExists = `SELECT EXISTS (SELECT 1 FROM {s}.destinations WHERE name = $1)`
	qImportFlowDest   = `WITH s AS (UPDATE {s}.flow_seqs SET dest = $2 WHERE flow = $1)
UPDATE {s}.flows SET dest = $2 WHERE flow = $1`
	qImportEventDest = `UPDATE {s}.events SET dest = $2 WHERE flow = $1 AND state = 'inflight'`
)

// importDestination refuses a destination not registered here.
func (s *Store) importDestination(ctx context.Context, tx pgx.Tx, dest string) error {
	if dest == queue.DefaultDestination {
		return nil
	}
	var ok bool
	if err := tx.QueryRow(ctx, s.q(qImportDestExists), dest).Scan(&ok); err != nil {
		return fmt.Errorf("find destination: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, dest)
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

// importEventDestination marks the flow's in-flight events as claimed for
// its destination.
func (s *Store) importEventDestination(ctx context.Context, tx pgx.Tx, flow, dest string) error {
	if dest == queue.DefaultDestination {
		return nil
	}
	if _, err := tx.Exec(ctx, s.q(qImportEventDest), flow, dest); err != nil {
		return fmt.Errorf("set in-flight destination: %w", err)
	}
	return nil
}
