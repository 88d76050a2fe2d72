package queuestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// costStore opens a store on /dev/shm (a temporary directory where it is
// missing) with flows flows of perFlow events each.
func costStore(b *testing.B, flows, perFlow int, opts ...Option) *Store {
	dir := b.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "qs-cost-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	s, err := Open(filepath.Join(dir, "q.db"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for k := 0; k < perFlow; k++ {
		var es []Event
		for i := range flows {
			es = append(es, Event{ID: fmt.Sprintf("s-%d-%d", i, k), Flow: fmt.Sprintf("f%04d", i), Body: []byte(`{"delta":1}`)})
		}
		if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkCost prices the hot paths in CPU time per operation (cpu-ns/op,
// from getrusage around the timed loop), which a shared, loaded machine
// disturbs far less than wall time: an Enqueue behind a head, a Claim and
// its ack, a ClaimBatch of 64 and their SettleBatch ack, on 1,000 flows on
// /dev/shm. It is the before/after measurement of
// docs/decisions/oldest-waiting.md (run the same file on the build before).
func BenchmarkCost(b *testing.B) {
	ctx := context.Background()
	report := func(b *testing.B, start time.Duration, n int) {
		b.ReportMetric(float64(cpuTime(b)-start)/float64(n), "cpu-ns/op")
	}
	b.Run("enqueue", func(b *testing.B) {
		s := costStore(b, 1000, 1)
		body := []byte(`{"delta":2}`)
		b.ResetTimer()
		start := cpuTime(b)
		for i := 0; i < b.N; i++ {
			if _, err := s.Enqueue(ctx, Event{ID: fmt.Sprintf("e-%d", i), Flow: fmt.Sprintf("f%04d", i%1000), Body: body}, 0); err != nil {
				b.Fatal(err)
			}
		}
		report(b, start, b.N)
	})
	b.Run("claim+ack", func(b *testing.B) {
		s := costStore(b, 1000, max(2, b.N/1000+2))
		b.ResetTimer()
		start := cpuTime(b)
		for i := 0; i < b.N; i++ {
			c, ok, err := s.Claim(ctx, 0)
			if err != nil || !ok {
				b.Fatalf("Claim() = %v, %v", ok, err)
			}
			if o, err := s.Settle(ctx, c.EventID, c.Generation, Result{OK: true}, 0); err != nil || o != Acked {
				b.Fatalf("Settle() = %v, %v", o, err)
			}
		}
		report(b, start, b.N)
	})
	b.Run("claim64+ack64", func(b *testing.B) {
		s := costStore(b, 1000, max(2, b.N*64/1000+2))
		items := make([]SettleItem, 0, 64)
		b.ResetTimer()
		start := cpuTime(b)
		for i := 0; i < b.N; i++ {
			cs, err := s.ClaimBatch(ctx, 0, 64)
			if err != nil || len(cs) != 64 {
				b.Fatalf("ClaimBatch() = %d, %v", len(cs), err)
			}
			items = items[:0]
			for _, c := range cs {
				items = append(items, SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}})
			}
			if _, err := s.SettleBatch(ctx, items, 0); err != nil {
				b.Fatal(err)
			}
		}
		report(b, start, b.N)
	})
	b.Run("claim+fail", func(b *testing.B) {
		p := DefaultPolicy()
		p.MaxAttempts = MaxPolicyAttempts // every failure is a retry
		s := costStore(b, 1000, 1, WithPolicy(p))
		now := clock.Tick(0)
		b.ResetTimer()
		start := cpuTime(b)
		for i := 0; i < b.N; i++ {
			c, ok, err := s.Claim(ctx, now)
			if err == nil && !ok {
				now += BackoffCap // every head backs off: move on in time
				c, ok, err = s.Claim(ctx, now)
			}
			if err != nil || !ok {
				b.Fatalf("Claim(%d) = %v, %v", now, ok, err)
			}
			if _, err := s.Settle(ctx, c.EventID, c.Generation, Result{Reason: "unavailable"}, now); err != nil {
				b.Fatal(err)
			}
		}
		report(b, start, b.N)
	})
}
