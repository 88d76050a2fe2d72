package queuestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkEnqueue prices one Enqueue (one transaction) on a memory file
// system (/dev/shm, a disk directory where it is missing), spread over 1,000
// flows: mostly into a flow that already has a head (the event waits
// behind it), and, with drained=true, into flows whose every event is acked
// (the new event becomes the head). It is the enqueue row of the
// before/after measurement of docs/decisions/oldest-waiting.md.
func BenchmarkEnqueue(b *testing.B) {
	for _, drained := range []bool{false, true} {
		b.Run(fmt.Sprintf("drained=%v", drained), func(b *testing.B) {
			const flows = 1000
			dir := b.TempDir()
			if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
				d, err := os.MkdirTemp("/dev/shm", "qs-bench-")
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { os.RemoveAll(d) })
				dir = d
			}
			s, err := Open(filepath.Join(dir, "q.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var es []Event
			for i := range flows {
				es = append(es, Event{ID: fmt.Sprintf("seed-%d", i), Flow: fmt.Sprintf("f%04d", i), Body: []byte(`{"delta":1}`)})
			}
			if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
				b.Fatal(err)
			}
			if drained {
				for {
					cs, err := s.ClaimBatch(ctx, 0, 256)
					if err != nil {
						b.Fatal(err)
					}
					if len(cs) == 0 {
						break
					}
					items := make([]SettleItem, len(cs))
					for i, c := range cs {
						items[i] = SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}}
					}
					if _, err := s.SettleBatch(ctx, items, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			body := []byte(`{"delta":2}`)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Drained: each flow gets one event, so each enqueue makes a
				// head (b.N stays within the flows with -benchtime 1000x).
				f := i % flows
				if _, err := s.Enqueue(ctx, Event{ID: fmt.Sprintf("e-%d", i), Flow: fmt.Sprintf("f%04d", f), Body: body}, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
