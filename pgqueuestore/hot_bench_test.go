package pgqueuestore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
)

// BenchmarkBacklogCycle is BenchmarkBatchCycle on flows with a standing
// backlog, the relay's case under load: 64 flows hold three events each
// before the timer starts, and each op enqueues one more event per flow
// (an update of last_seq alone, on a flow that has a head), claims the 64
// heads and acks them. Besides events/s it reports the share of the
// updates of flows and of events that the server made heap-only
// (flows-hot-%, events-hot-%), from pg_stat_user_tables over the timed
// loop; the store runs on one connection so that its statistics can be
// flushed before they are read. It measures what an index on a column
// that these updates write costs (docs/decisions/postgres-paged-reads.md).
func BenchmarkBacklogCycle(b *testing.B) {
	ctx := context.Background()
	s, schema := oneConnStore(b)
	const n = 64
	var es []queue.Event
	for k := range 3 {
		for f := range n {
			es = append(es, queue.Event{ID: fmt.Sprintf("s%d-%d", k, f), Flow: fmt.Sprintf("f%02d", f), Body: []byte("x")})
		}
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		b.Fatal(err)
	}
	stats := func() (fu, fh, eu, eh int64) {
		b.Helper()
		if _, err := s.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			b.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, `SELECT 1`); err != nil {
			b.Fatal(err)
		}
		err := s.pool.QueryRow(ctx, `SELECT
    (SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'flows'),
    (SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'flows'),
    (SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'events'),
    (SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'events')`, schema).Scan(&fu, &fh, &eu, &eh)
		if err != nil {
			b.Fatal(err)
		}
		return
	}
	fu0, fh0, eu0, eh0 := stats()
	es = es[:n]
	b.ResetTimer()
	for i := range b.N {
		for f := range n {
			es[f] = queue.Event{ID: fmt.Sprintf("c%d-%d", i, f), Flow: fmt.Sprintf("f%02d", f), Body: []byte("x")}
		}
		if _, err := s.SettleBatch(ctx, enqueueClaimAll(b, s, es), 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	fu, fh, eu, eh := stats()
	if fu > fu0 {
		b.ReportMetric(100*float64(fh-fh0)/float64(fu-fu0), "flows-hot-%")
	}
	if eu > eu0 {
		b.ReportMetric(100*float64(eh-eh0)/float64(eu-eu0), "events-hot-%")
	}
}

// oneConnStore opens a store in a schema of its own on a pool of one
// connection, so that the session's statistics can be flushed and read
// back, and the server process's CPU read by its PID; closed at cleanup.
// It returns the schema too.
func oneConnStore(b *testing.B) (s *Store, schema string) {
	b.Helper()
	url, schema := pgtest.Schema(b)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := Open(context.Background(), url+sep+"pool_max_conns=1", WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, schema
}
