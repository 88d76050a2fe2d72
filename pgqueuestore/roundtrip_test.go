package pgqueuestore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// tripCounter counts the round trips a pool makes: each query, Exec and
// batch (a batch goes in one round trip once its statements are
// prepared) is one; COMMIT goes in the batch of a write's last
// statements.
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

// openCounted opens a store on a one-connection pool whose round trips c
// counts, with opts.
func openCounted(t *testing.T, c *tripCounter, opts ...Option) *Store {
	return openTraced(t, c, 1, opts...)
}

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

// withGeneralPath keeps a store's every call on the general path: the
// statements sent from Go, never settle_claim (onecall.go).
func withGeneralPath() Option { return func(o *options) { o.general = true } }

// The per-event cost on PostgreSQL is mostly round trips
// (docs/decisions/postgres-per-event-cost.md). On the one-call path a
// settle and claim of 16 events of 16 flows, a Settle and a Claim each
// take one: the call of settle_claim
// (docs/decisions/postgres-server-side-transitions.md). On the general
// path a settle and claim takes three (BEGIN with the locked meta row and
// the settles' read; the settles' writes with the promotion and the
// picks; the claims' writes with COMMIT), a Settle two (BEGIN with the
// read; the writes with COMMIT) and a Claim three (BEGIN with the locked
// meta row; the promotion and the pick; the claim's writes with COMMIT),
// whatever the batch's size.
func TestRoundTrips_SettleAndClaim(t *testing.T) {
	for _, c := range []struct {
		name                string
		opts                []Option
		wave, settle, claim int64
	}{
		{"one call", nil, 1, 1, 1},
		{"general path", []Option{withGeneralPath()}, 3, 2, 3},
	} {
		t.Run(c.name, func(t *testing.T) { roundTrips(t, c.opts, c.wave, c.settle, c.claim) })
	}
}

// roundTrips checks the round trips of a SettleClaimBatch of 16 and 16,
// a Settle and a Claim on a store opened with opts.
func roundTrips(t *testing.T, opts []Option, wave, settle, claim int64) {
	ctx := context.Background()
	var c tripCounter
	s := openCounted(t, &c, opts...)
	var es []queue.Event
	for k := range 3 {
		for f := range 16 {
			es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%d", f), Body: []byte("x")})
		}
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimBatch(ctx, 1, 16)
	if err != nil || len(cs) != 16 {
		t.Fatalf("ClaimBatch = %d claims, %v", len(cs), err)
	}
	items := func(cs []queue.Claim) []queue.SettleItem {
		var its []queue.SettleItem
		for _, c := range cs {
			its = append(its, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}})
		}
		return its
	}
	// Warm the connection's statement cache: a statement's first use
	// prepares it, one more round trip.
	if _, cs, err = s.SettleClaimBatch(ctx, items(cs), 2, 16); err != nil || len(cs) != 16 {
		t.Fatalf("SettleClaimBatch = %d claims, %v", len(cs), err)
	}
	before := c.n.Load()
	rs, cs, err := s.SettleClaimBatch(ctx, items(cs), 3, 16)
	if err != nil || len(cs) != 16 {
		t.Fatalf("SettleClaimBatch = %d claims, %v", len(cs), err)
	}
	for _, r := range rs {
		if r.Err != nil || r.Outcome != queue.Acked {
			t.Fatalf("SettleClaimBatch item = %+v", r)
		}
	}
	if got := c.n.Load() - before; got != wave {
		t.Errorf("SettleClaimBatch of 16 and 16: %d round trips, want %d", got, wave)
	}
	if _, err := s.Settle(ctx, cs[0].EventID, cs[0].Generation, queue.Result{OK: true}, 4); err != nil {
		t.Fatal(err)
	}
	before = c.n.Load()
	if o, err := s.Settle(ctx, cs[1].EventID, cs[1].Generation, queue.Result{OK: true}, 4); err != nil || o != queue.Acked {
		t.Fatalf("Settle = %v, %v", o, err)
	}
	if got := c.n.Load() - before; got != settle {
		t.Errorf("Settle: %d round trips, want %d", got, settle)
	}
	if _, err := s.EnqueueBatch(ctx, []queue.Event{{ID: "n1", Flow: "n1", Body: []byte("x")}, {ID: "n2", Flow: "n2", Body: []byte("x")}}, 4); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the first Claim prepares its statements
		before = c.n.Load()
		if _, ok, err := s.Claim(ctx, 5); err != nil || !ok {
			t.Fatalf("Claim %d = %v, %v", i, ok, err)
		}
		if got := c.n.Load() - before; i == 1 && got != claim {
			t.Errorf("Claim: %d round trips, want %d", got, claim)
		}
	}
}
