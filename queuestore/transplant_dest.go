package queuestore

import (
	"context"
	"fmt"

	"github.com/fairrelay/fairrelay/queue"
)

// The destination part of a transplant. Until flows record a destination
// (the sqdest branch's migration), only the default destination moves.

// qExportDestCol is the flows column ExportFlow reads the destination
// from, with its leading comma; "" while flows have none.
const qExportDestCol = ""

// importDestination refuses a destination not registered here.
func importDestination(ctx context.Context, tx *txn, dest string) error {
	if dest != queue.DefaultDestination {
		return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, dest)
	}
	return nil
}

// importFlowDestination records the flow's destination.
func importFlowDestination(ctx context.Context, tx *txn, flow, dest string) error { return nil }
