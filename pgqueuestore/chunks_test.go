package pgqueuestore

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// enqueueChunks enqueues es in batches of at most 2,000 events, in order. An
// EnqueueBatch takes one transaction-level advisory lock per event ID (the
// transactional enqueue's lock order, docs/postgres.md), and the server's
// lock table is shared by every session: the plan tests' 12,000-event
// setups in one batch ran it out ("out of shared memory") whenever other
// tests held locks at the same time.
func enqueueChunks(t testing.TB, s *Store, es []queue.Event) {
	t.Helper()
	for len(es) > 0 {
		n := min(len(es), 2000)
		if _, err := s.EnqueueBatch(context.Background(), es[:n], 0); err != nil {
			t.Fatal(err)
		}
		es = es[n:]
	}
}
