package pgreceiverstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// tripCounter counts the round trips a pool makes: each query, Exec and
// batch is one; COMMIT goes in the batch of the writes.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// openTraced opens a store with opts in a schema of its own, on a pool of
// at most maxConns connections (0: pgxpool's default) traced by tr.
func openTraced(t *testing.T, tr pgx.QueryTracer, maxConns int32, opts ...Option) *Store {
	t.Helper()
	ctx := context.Background()
	url, schema := pgtest.Schema(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := OpenPool(ctx, pool, append([]Option{WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The per-message cost on PostgreSQL is mostly round trips
// (docs/decisions/postgres-per-event-cost.md). A batch whose every message
// is accepted costs one on the one-call path: the call of
// receive_accepted (docs/decisions/postgres-server-side-transitions.md).
// A batch with any other answer costs three there: the call, which finds
// it and writes nothing, then the general path's two (BEGIN with the
// locks and the read, the writes with COMMIT); on the general path every
// batch costs those two, whatever its size. The batches hold accepts of
// known flows and two of a new flow; the mixed one also a duplicate, a gap
// and a conflict. An accepted
// Receive, a batch of one, costs what an all-accepted batch does.
func TestRoundTrips_ReceiveBatch(t *testing.T) {
	accepted := func(k int) []receiver.Message {
		var ms []receiver.Message
		for f := range 32 {
			ms = append(ms, msg(fmt.Sprintf("e%d-%d", f, k), fmt.Sprintf("f%d", f), int64(k+1), 1))
		}
		return append(ms, // a new flow, two of its messages
			msg(fmt.Sprintf("n-%d", k), fmt.Sprintf("new%d", k), 1, 1), msg(fmt.Sprintf("m-%d", k), fmt.Sprintf("new%d", k), 2, 1))
	}
	mixed := func(k int) []receiver.Message {
		return append(accepted(k),
			msg(fmt.Sprintf("e0-%d", k), "f0", int64(k+1), 1), // duplicate
			msg(fmt.Sprintf("g-%d", k), "f1", int64(k+9), 1),  // gap
			msg(fmt.Sprintf("x-%d", k), "f2", int64(k+1), 1),  // seq taken: conflict
		)
	}
	for _, c := range []struct {
		name  string
		opts  []Option
		batch func(k int) []receiver.Message
		trips int64 // the batch's
		one   int64 // a Receive's, accepted
	}{
		{"one call, all accepted", nil, accepted, 1, 1},
		{"one call, mixed", nil, mixed, 3, 1},
		{"general path, all accepted", []Option{withGeneralPath()}, accepted, 2, 2},
		{"general path, mixed", []Option{withGeneralPath()}, mixed, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			var tc tripCounter
			s := openTraced(t, &tc, 1, c.opts...)
			if _, err := s.ReceiveBatch(ctx, c.batch(0)); err != nil { // prepares the statements
				t.Fatal(err)
			}
			ms := c.batch(1)
			before := tc.n.Load()
			res, err := s.ReceiveBatch(ctx, ms)
			if err != nil {
				t.Fatal(err)
			}
			want := map[receiver.Outcome]int{receiver.Accepted: 34}
			if len(ms) > 34 {
				want[receiver.Duplicate], want[receiver.Gap], want[receiver.Conflict] = 1, 1, 1
			}
			got := map[receiver.Outcome]int{}
			for _, r := range res {
				got[r.Outcome]++
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("outcomes %v, want %v", got, want)
			}
			if n := tc.n.Load() - before; n != c.trips {
				t.Errorf("ReceiveBatch of %d: %d round trips, want %d", len(res), n, c.trips)
			}
			before = tc.n.Load()
			if o, err := s.Receive(ctx, msg("r-1", "f0", 3, 1)); err != nil || o != receiver.Accepted {
				t.Fatalf("Receive = %s, %v", o, err)
			}
			if n := tc.n.Load() - before; n != c.one {
				t.Errorf("Receive accepted: %d round trips, want %d", n, c.one)
			}
		})
	}
}
