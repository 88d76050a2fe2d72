package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// The rotation case runs on a rotation queue and steps through its whole
// backlog, one event per step, then reports ErrBacklogEmpty.
func TestClaimSettleRotationStepsThroughTheWholeBacklog(t *testing.T) {
	ctx := context.Background()
	w := setUp(t, ClaimSettleRotation(3, 2))
	p, err := w.(*claimSettle).q.(queue.Store).Policy(ctx)
	if err != nil || p.Fairness != queuestore.FairRotation {
		t.Fatalf("policy = %+v, %v; want rotation", p, err)
	}
	for i := 0; i < 6; i++ {
		if n, err := w.Step(ctx); err != nil || n != 1 {
			t.Fatalf("step %d = %d, %v", i, n, err)
		}
	}
	if _, err := w.Step(ctx); !errors.Is(err, ErrBacklogEmpty) {
		t.Fatalf("step 7 error = %v, want ErrBacklogEmpty", err)
	}
}
