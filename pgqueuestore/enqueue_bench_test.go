package pgqueuestore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// BenchmarkEnqueue prices the enqueue paths on their own, on a store of
// one connection (nothing is claimed; the events pile up): a single
// Enqueue, an EnqueueBatch of 64 events (one per flow of 64), one of
// 1,000 events (over the same 64 flows), and an EnqueueBatchTx of 64 in a
// caller's transaction with its commit. Besides ns/op and events/s it
// reports the CPU time per op of the test process (cpu-ns/op) and of the
// store's server process (server-cpu-ns/op, from /proc when the server
// runs on this machine; 0 otherwise), which a loaded machine disturbs less
// than the wall clock.
func BenchmarkEnqueue(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int  // events per op
		tx   bool // EnqueueBatchTx in a caller's transaction
	}{{"single", 1, false}, {"batch64", 64, false}, {"batch1000", 1000, false}, {"tx64", 64, true}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			s, _ := oneConnStore(b)
			conn, err := s.pool.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			pid := int(conn.Conn().PgConn().PID())
			conn.Release()
			es := make([]queue.Event, c.n)
			b.ResetTimer()
			cpu0, srv0 := cpuTime(b), procCPU(pid)
			for i := range b.N {
				for k := range es {
					es[k] = queue.Event{ID: fmt.Sprintf("e%d-%d", i, k), Flow: fmt.Sprintf("f%02d", (i*len(es)+k)%64), Body: []byte("x")}
				}
				switch {
				case c.tx:
					conn, err := s.pool.Acquire(ctx)
					if err != nil {
						b.Fatal(err)
					}
					tx, err := conn.Begin(ctx)
					if err == nil {
						_, err = s.EnqueueBatchTx(ctx, tx, es, 0)
					}
					if err == nil {
						err = tx.Commit(ctx)
					}
					conn.Release()
					if err != nil {
						b.Fatal(err)
					}
				case c.n == 1:
					if _, err := s.Enqueue(ctx, es[0], 0); err != nil {
						b.Fatal(err)
					}
				default:
					if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(c.n*b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(procCPU(pid)-srv0)/float64(b.N), "server-cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used, in ns.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// procCPU is the CPU time (user and system) process pid has used, in ns,
// from /proc/pid/stat (clock ticks of 10 ms); 0 when it cannot be read
// (a server on another machine).
func procCPU(pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime, stime are fields 14, 15
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return (u + st) * 10_000_000
}
