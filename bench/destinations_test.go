package bench

import (
	"context"
	"testing"
)

// TestDestinationsCase runs the destinations case once, with a tiny
// backlog, on SQLite and (when a server answers) PostgreSQL: both drains
// finish (the healthy seven drain beside a blackholed, a slow and a 503
// destination) and each gives a rate. Speed is the report's business.
func TestDestinationsCase(t *testing.T) {
	ctx := context.Background()
	backends := []string{"sqlite"}
	if PGCheck(ctx, PGURL()) == nil {
		backends = append(backends, "postgres")
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			rs, err := MeasureDestinations(ctx, backend, t.TempDir(), PGURL(), 1, 4, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].Alone <= 0 || rs[0].WithBad <= 0 {
				t.Fatalf("rounds %+v", rs)
			}
			t.Logf("%s: alone %.0f/s, with the bad three %.0f/s, ratio %.2f", backend, rs[0].Alone, rs[0].WithBad, rs[0].Ratio())
		})
	}
}
