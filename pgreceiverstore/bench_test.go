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
			s, _, _ := open(b, p.opts...)
			ms := make([]receiver.Message, 16)
			b.ResetTimer()
			for i := range b.N {
				for k := range ms {
					j := i*16 + k
					ms[k] = msg(fmt.Sprintf("e%d", j), fmt.Sprintf("f%03d", j%1000), int64(j/1000+1), 1)
				}
				receiveAccepted(b, s, ms)
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

// BenchmarkReceiveBatchSize is one ReceiveBatch of n accepted messages of
// n flows that each have a row already (the flows' update moves every one
// of them), at n = 64, 1,000 and 10,000, on each path; an op is one batch,
// and its cost per message must not grow with the batch
// (docs/decisions/postgres-server-side-transitions.md, "Large batches").
func BenchmarkReceiveBatchSize(b *testing.B) {
	for _, p := range benchPaths {
		for _, n := range []int{64, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/%d", p.name, n), func(b *testing.B) {
				s, _, _ := open(b, p.opts...)
				ms := make([]receiver.Message, n)
				receive := func(i int) {
					for f := range ms {
						ms[f] = msg(fmt.Sprintf("e%d-%d", f, i), fmt.Sprintf("f%05d", f), int64(i+1), 1)
					}
					receiveAccepted(b, s, ms)
				}
				receive(0) // untimed: it makes the flows' rows
				b.ResetTimer()
				for i := range b.N {
					receive(i + 1)
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n*b.N), "µs/msg")
			})
		}
	}
}

// receiveAccepted receives ms in one ReceiveBatch and fails b unless every
// message is accepted.
func receiveAccepted(b *testing.B, s *Store, ms []receiver.Message) {
	b.Helper()
	res, err := s.ReceiveBatch(context.Background(), ms)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil || r.Outcome != receiver.Accepted {
			b.Fatalf("%+v", r)
		}
	}
}
