package bench

import (
	"context"
	"testing"
	"time"
)

// A short outage: the breaker opens, nothing is quarantined, the backlog
// is drained after the return, and the failures charged are bounded by the
// claims in flight, the threshold and the probes.
func TestRuntimeOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2 s outage over HTTP")
	}
	res, err := RuntimeOutage(context.Background(), t.TempDir(), 50, 10, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v, %.0f events/s after the return", res, res.Rate())
	if res.Quarantined != 0 || res.Opens < 1 || res.AfterReturn < 1 || res.AfterReturn > res.Events {
		t.Errorf("result %+v: want no quarantine, the breaker opened, the rest delivered after the return", res)
	}
	if res.Charged > 16+5+res.Probes {
		t.Errorf("%d attempts charged, want at most 16 + 5 + %d probes", res.Charged, res.Probes)
	}
}
