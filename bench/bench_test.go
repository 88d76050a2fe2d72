package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/queuestore"
)

// The Go benchmarks run the same workloads as cmd/benchrun, one per
// benchmark, for benchstat:
//
//	go test -run '^$' -bench . -count 6 | tee new.txt; benchstat old.txt new.txt
//
// Each reports items/s (commits or events) besides ns/op; one op is one Step.

// setUp sets c up in a temporary directory of tb and closes the workload
// when tb ends, failing tb if Close does.
func setUp(tb testing.TB, c Case) Workload {
	tb.Helper()
	w, err := c.Setup(context.Background(), tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := w.Close(); err != nil {
			tb.Errorf("close %s: %v", c.Name, err)
		}
	})
	return w
}

func benchCase(b *testing.B, c Case) {
	b.Helper()
	ctx := context.Background()
	w := setUp(b, c)
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

// BenchmarkHandover prices what a hand-over between processes costs besides
// the wake-up: claim+settle on one store, against the same work alternating
// between two stores (two connection pools) on one file, where each store
// finds that the other has written the WAL since its last transaction and
// reads its pages again.
func BenchmarkHandover(b *testing.B) {
	for _, stores := range []int{1, 2} {
		b.Run(fmt.Sprintf("stores=%d", stores), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			tmpl := dir + "/queue.db"
			if err := MakeQueueTemplate(ctx, tmpl, 1000, 20); err != nil {
				b.Fatal(err)
			}
			var ws []Workload
			for range stores {
				q, err := queuestore.Open(tmpl)
				if err != nil {
					b.Fatal(err)
				}
				defer q.Close()
				ws = append(ws, &claimSettle{q: q})
			}
			i := 0
			for b.Loop() {
				if _, err := ws[i%stores].Step(ctx); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
