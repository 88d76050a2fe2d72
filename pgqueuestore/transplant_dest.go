package pgqueuestore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// The destination part of a transplant. Until flows record a destination
// (the pgdest branch's migration), only the default destination moves.

// qExportDestCol is the flows column ExportFlow reads the destination
// from, with its leading comma; "" while flows have none.
const qExportDestCol = ""

// importDestination refuses a destination not registered here.
func (s *Store) importDestination(ctx context.Context, tx pgx.Tx, dest string) error {
	if dest != queue.DefaultDestination {
		return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, dest)
	}
	return nil
}

// importFlowDestination records the flow's destination.
func (s *Store) importFlowDestination(ctx context.Context, tx pgx.Tx, flow, dest string) error {
	return nil
}
