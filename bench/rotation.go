package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/queuestore"
)

// ClaimSettleRotation is [ClaimSettle] on a queue created with the opt-in
// rotation order (queuestore.FairRotation, docs/contract.md §7.6): the same
// backlog of flows × perFlow events, one Claim and one successful Settle
// per Step, so that its rows sit next to the min_served ones.
func ClaimSettleRotation(flows, perFlow int) Case {
	return Case{
		Name: fmt.Sprintf("claim+settle-rotation/%d", flows),
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			p := queuestore.DefaultPolicy()
			p.Fairness = queuestore.FairRotation
			q, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithPolicy(p))
			if err != nil {
				return nil, err
			}
			if err := LoadBacklog(ctx, q, "e", flows, perFlow); err != nil {
				q.Close()
				return nil, err
			}
			return &claimSettle{q: q}, nil
		},
	}
}
