package bench

import (
	"context"
	"testing"
	"time"
)

// TestRuntimeProbeCountsAgree: after a graceful stop every claimed event was
// handled, received and settled once, and the probe's counts say so. The
// backlog (4,000 events) outlasts the 150 ms run on a quiet machine, which
// drained 400 within it.
func TestRuntimeProbeCountsAgree(t *testing.T) {
	res, err := RuntimeProbe(context.Background(), t.TempDir(), "", RuntimeInProcess, 8, 8, 40, 100, 150*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	claim := res.Ops["claim"]
	if res.Delivered == 0 || claim == nil || res.Ops["settle_claim"] == nil {
		t.Fatalf("RuntimeProbe() = %+v, want deliveries, claims and SettleClaimBatch calls", res)
	}
	if res.Claimed() != res.Delivered || res.Settled() != res.Delivered || res.Handler.Calls != res.Delivered || res.Receive.Items != res.Delivered {
		t.Fatalf("claimed %d, settled %d, handled %d, received %d; want all %d", res.Claimed(), res.Settled(), res.Handler.Calls, res.Receive.Items, res.Delivered)
	}
	if len(claim.Took) != claim.Calls || claim.Items > 8*claim.Calls {
		t.Fatalf("claim stats %d calls, %d times, %d items; want one time per call and at most 8 items each", claim.Calls, len(claim.Took), claim.Items)
	}
}

// TestTxCostsTimesEveryKind: every kind and size gets a median.
func TestTxCostsTimesEveryKind(t *testing.T) {
	cs, err := TxCosts(context.Background(), t.TempDir(), []int{1, 4}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[1].Size != 4 {
		t.Fatalf("TxCosts() = %+v, want sizes 1 and 4", cs)
	}
	for _, c := range cs {
		if c.Enqueue <= 0 || c.Claim <= 0 || c.Receive <= 0 || c.Settle <= 0 {
			t.Fatalf("TxCosts() size %d = %+v, want every kind timed", c.Size, c)
		}
	}
}
