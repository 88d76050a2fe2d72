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

// A batch of receives costs two round trips whatever its size
// (docs/decisions/postgres-per-event-cost.md): BEGIN with the locks and
// the reads, the writes with COMMIT. Accepts of new and known flows, a
// duplicate, a gap and a conflict all in one batch.
func TestRoundTrips_ReceiveBatch(t *testing.T) {
	ctx := context.Background()
	url, schema := pgtest.Schema(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var c tripCounter
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = &c
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := OpenPool(ctx, pool, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	batch := func(k int) []receiver.Message {
		var ms []receiver.Message
		for f := range 32 {
			ms = append(ms, msg(fmt.Sprintf("e%d-%d", f, k), fmt.Sprintf("f%d", f), int64(k+1), 1))
		}
		return append(ms,
			msg(fmt.Sprintf("e0-%d", k), "f0", int64(k+1), 1),          // duplicate
			msg(fmt.Sprintf("g-%d", k), "f1", int64(k+9), 1),           // gap
			msg(fmt.Sprintf("x-%d", k), "f2", int64(k+1), 1),           // seq taken: conflict
			msg(fmt.Sprintf("n-%d", k), fmt.Sprintf("new%d", k), 1, 1), // a new flow
		)
	}
	if _, err := s.ReceiveBatch(ctx, batch(0)); err != nil { // prepares the statements
		t.Fatal(err)
	}
	before := c.n.Load()
	res, err := s.ReceiveBatch(ctx, batch(1))
	if err != nil {
		t.Fatal(err)
	}
	want := map[receiver.Outcome]int{receiver.Accepted: 33, receiver.Duplicate: 1, receiver.Gap: 1, receiver.Conflict: 1}
	got := map[receiver.Outcome]int{}
	for _, r := range res {
		got[r.Outcome]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if n := c.n.Load() - before; n != 2 {
		t.Errorf("ReceiveBatch of %d: %d round trips, want 2", len(res), n)
	}
}
