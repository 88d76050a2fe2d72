package bench

import (
	"context"
	"fmt"
	"testing"
)

// The Go benchmarks run the same workloads as cmd/benchrun, one per
// benchmark, for benchstat:
//
//	go test -run '^$' -bench . -count 6 | tee new.txt; benchstat old.txt new.txt
//
// Each reports items/s (commits or events) besides ns/op; one op is one Step.

func benchCase(b *testing.B, c Case) {
	b.Helper()
	ctx := context.Background()
	w, err := c.Setup(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	items := 0
	for b.Loop() {
		n, err := w.Step(ctx)
		if err != nil {
			b.Fatal(err)
		}
		items += n
	}
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
}

func BenchmarkCeiling(b *testing.B)     { benchCase(b, Ceiling()) }
func BenchmarkGoqiteCycle(b *testing.B) { benchCase(b, Goqite()) }
func BenchmarkRelayCycle(b *testing.B)  { benchCase(b, RelayCycle()) }

func BenchmarkBatchedRelayCycle(b *testing.B) {
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprint(size), func(b *testing.B) { benchCase(b, BatchedRelayCycle(size)) })
	}
}

// BenchmarkClaimSettle loads 20,000 events (at least one per flow) before the
// timer starts; a run longer than the backlog fails with ErrBacklogEmpty.
func BenchmarkClaimSettle(b *testing.B) {
	for _, flows := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) {
			benchCase(b, ClaimSettle(flows, (20000+flows-1)/flows))
		})
	}
}
