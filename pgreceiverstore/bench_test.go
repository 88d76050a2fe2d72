package pgreceiverstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/receiver"
)

// benchPaths are the two paths of a receive whose messages are all
// accepted: one call of receive_accepted, and the statements sent from Go
// (docs/decisions/postgres-server-side-transitions.md).
var benchPaths = []struct {
	name string
	opts []Option
}{
	{"one call", nil},
	{"general path", []Option{withGeneralPath()}},
}

// BenchmarkReceiveBatch is the in-process relay's receive: a batch of 16
// accepted messages of 16 flows per op (inbox.Batcher over a relay's
// wave), on 1,000 flows, on each path. Reports messages/s
// (docs/decisions/postgres-per-event-cost.md).
func BenchmarkReceiveBatch(b *testing.B) {
	for _, p := range benchPaths {
		b.Run(p.name, func(b *testing.B) {
			ctx := context.Background()
			s, _, _ := open(b, p.opts...)
			ms := make([]receiver.Message, 16)
			b.ResetTimer()
			for i := range b.N {
				for k := range ms {
					j := i*16 + k
					ms[k] = msg(fmt.Sprintf("e%d", j), fmt.Sprintf("f%03d", j%1000), int64(j/1000+1), 1)
				}
				res, err := s.ReceiveBatch(ctx, ms)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if r.Err != nil || r.Outcome != receiver.Accepted {
						b.Fatalf("%+v", r)
					}
				}
			}
			b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkReceive is one accepted message per op (Receive), on 1,000
// flows, on each path.
func BenchmarkReceive(b *testing.B) {
	for _, p := range benchPaths {
		b.Run(p.name, func(b *testing.B) {
			ctx := context.Background()
			s, _, _ := open(b, p.opts...)
			for i := range b.N {
				m := msg(fmt.Sprintf("e%d", i), fmt.Sprintf("f%03d", i%1000), int64(i/1000+1), 1)
				if o, err := s.Receive(ctx, m); err != nil || o != receiver.Accepted {
					b.Fatalf("Receive = %v, %v", o, err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
