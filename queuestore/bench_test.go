package queuestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// benchTemplates caches a loaded store file per (directory kind, flows,
// events per flow), so that each benchmark run copies it instead of loading
// 100,000 flows again.
var benchTemplates sync.Map // string -> []byte

func benchTemplate(b *testing.B, flows, perFlow int) []byte {
	key := fmt.Sprintf("%d/%d", flows, perFlow)
	if v, ok := benchTemplates.Load(key); ok {
		return v.([]byte)
	}
	dir, err := os.MkdirTemp("", "queuestore-bench-template-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "template.db")
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const chunk = 10000
	var es []Event
	flush := func() {
		if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
			b.Fatalf("EnqueueBatch() error = %v", err)
		}
		es = es[:0]
	}
	for k := 0; k < perFlow; k++ {
		for f := 0; f < flows; f++ {
			es = append(es, Event{ID: fmt.Sprintf("f%06d-%06d", f, k), Flow: fmt.Sprintf("f%06d", f), Body: []byte(`{"delta": 1}`)})
			if len(es) == chunk {
				flush()
			}
		}
	}
	if len(es) > 0 {
		flush()
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	benchTemplates.Store(key, data)
	return data
}

// benchClaimSettle measures one Claim plus one successful Settle on a
// backlog of the given number of flows (loaded with EnqueueBatch, copied
// from a template before the timer starts). dir is where the store lives.
func benchClaimSettle(b *testing.B, dir string, flows int) {
	perFlow := max(2, (b.N+flows-1)/flows+1) // the backlog never runs dry
	data := benchTemplate(b, flows, perFlow)
	path := filepath.Join(dir, fmt.Sprintf("bench-%d-%d.db", flows, b.N))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(path + suffix)
		}
	}()
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, ok, err := s.Claim(ctx, 0)
		if err != nil || !ok {
			b.Fatalf("Claim() = %v, %v", ok, err)
		}
		if o, err := s.Settle(ctx, c.EventID, c.Generation, Result{OK: true}, 0); err != nil || o != Acked {
			b.Fatalf("Settle() = %q, %v", o, err)
		}
	}
}

// BenchmarkClaimSettle is the cost check: one claim and one ack at
// 10, 1,000 and 100,000 flows, on a real file with synchronous=FULL (two
// durable commits per op). The cost at 100,000 flows should be within 1.5×
// of the cost at 10.
func BenchmarkClaimSettle(b *testing.B) {
	for _, flows := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) {
			benchClaimSettle(b, b.TempDir(), flows)
		})
	}
}

// BenchmarkClaimSettleMemory is the same on a memory file system
// (/dev/shm), where an fsync costs nothing: it shows the CPU cost of the
// SQL alone, which the fsync hides on disk. Skipped where /dev/shm is
// missing.
func BenchmarkClaimSettleMemory(b *testing.B) {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		b.Skip("no /dev/shm")
	}
	for _, flows := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) {
			benchClaimSettle(b, memTempDir(b), flows)
		})
	}
}

// quarantinedTemplate returns the bytes of a store file with n flows whose
// single event is quarantined (reason "unavailable"), made once per n.
func quarantinedTemplate(b *testing.B, n int) []byte {
	key := fmt.Sprintf("quarantined/%d", n)
	if v, ok := benchTemplates.Load(key); ok {
		return v.([]byte)
	}
	dir, err := os.MkdirTemp("", "queuestore-bench-template-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "template.db")
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var es []Event
	for f := 0; f < n; f++ {
		es = append(es, Event{ID: fmt.Sprintf("q%06d", f), Flow: fmt.Sprintf("f%06d", f), Body: []byte(`{"delta": 1}`)})
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		b.Fatal(err)
	}
	now := Lease // unused leases never matter: every claim is settled at once
	for k := 1; k <= MaxAttempts; k++ {
		cs, err := s.ClaimBatch(ctx, now, n)
		if err != nil || len(cs) != n {
			b.Fatalf("ClaimBatch() = %d, %v", len(cs), err)
		}
		items := make([]SettleItem, n)
		for i, c := range cs {
			items[i] = SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{Reason: "unavailable"}}
		}
		if _, err := s.SettleBatch(ctx, items, now); err != nil {
			b.Fatal(err)
		}
		now += Backoff(k)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	benchTemplates.Store(key, data)
	return data
}

// BenchmarkRedrive1000 redrives 1,000 quarantined events per op: one
// Redrive call per event ("each"), or one RedriveAll ("all": two
// transactions of RedriveChunk). The store is copied from a template
// before the timer starts; real file, synchronous=FULL.
func BenchmarkRedrive1000(b *testing.B) {
	const n = 1000
	for _, mode := range []string{"each", "all"} {
		b.Run(mode, func(b *testing.B) {
			data := quarantinedTemplate(b, n)
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				path := filepath.Join(b.TempDir(), "q.db")
				if err := os.WriteFile(path, data, 0o600); err != nil {
					b.Fatal(err)
				}
				s, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				qs, err := s.Quarantined(ctx)
				if err != nil || len(qs) != n {
					b.Fatalf("Quarantined() = %d, %v", len(qs), err)
				}
				b.StartTimer()
				if mode == "each" {
					for _, q := range qs {
						if err := s.Redrive(ctx, q.EventID, q.Generation, "bench", 100); err != nil {
							b.Fatal(err)
						}
					}
				} else if got, err := s.RedriveAll(ctx, RedriveFilter{}, "bench", 100); err != nil || len(got) != n {
					b.Fatalf("RedriveAll() = %d, %v", len(got), err)
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkClaimPath prices the claim path alone: per op, n claims (Claim
// for n = 1, ClaimBatch otherwise) and one SettleBatch that acks them, on
// 1,000 flows, in each flow order, on a memory file system (/dev/shm, so
// that no fsync hides the SQL's CPU cost; a disk directory where it is
// missing). The store is copied from a template before the timer starts.
// Run it with a fixed -benchtime (for example 300x) so that every count
// copies the same template instead of loading a new one.
func BenchmarkClaimPath(b *testing.B) {
	const flows = 1000
	for _, fair := range []Fairness{FairMinServed, FairRotation} {
		for _, n := range []int{1, 64} {
			b.Run(fmt.Sprintf("order=%s/n=%d", fair, n), func(b *testing.B) {
				perFlow := max(2, (b.N*n+flows-1)/flows+1) // the backlog never runs dry
				data := benchTemplate(b, flows, perFlow)
				path := filepath.Join(memTempDir(b), "q.db")
				if err := os.WriteFile(path, data, 0o600); err != nil {
					b.Fatal(err)
				}
				s, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				if fair != FairMinServed {
					p := DefaultPolicy()
					p.Fairness = fair
					if err := s.SetPolicy(ctx, p, "bench", 0); err != nil {
						b.Fatal(err)
					}
				}
				items := make([]SettleItem, 0, n)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var cs []Claim
					if n == 1 {
						c, ok, err := s.Claim(ctx, 0)
						if err != nil || !ok {
							b.Fatalf("Claim() = %v, %v", ok, err)
						}
						cs = append(cs, c)
					} else if cs, err = s.ClaimBatch(ctx, 0, n); err != nil || len(cs) != n {
						b.Fatalf("ClaimBatch() = %d claims, %v; want %d", len(cs), err, n)
					}
					items = items[:0]
					for _, c := range cs {
						items = append(items, SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}})
					}
					rs, err := s.SettleBatch(ctx, items, 0)
					if err != nil || len(rs) != len(items) || rs[0].Outcome != Acked {
						b.Fatalf("SettleBatch() = %+v, %v", rs, err)
					}
				}
			})
		}
	}
}
