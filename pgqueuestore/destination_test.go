package pgqueuestore

import (
	"context"
	"errors"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
)

// putTestDest registers a destination named name without limits.
func putTestDest(t *testing.T, s *Store, name string, now clock.Tick) {
	t.Helper()
	d := queue.Destination{Name: name, URL: "http://127.0.0.1:9/" + name, Secrets: []string{"k-" + name}}
	if err := s.PutDestination(context.Background(), d, "test", now); err != nil {
		t.Fatal(err)
	}
}

// A transactional enqueue (EnqueueTx) stays off meta and flows: the
// destination its flow's first event names is recorded in the flow's
// sequence counter (flow_seqs, which the enqueue locks anyway), and the
// write turn that promotes the committed arrival gives the new flows row
// that destination; the claim then carries it. A later transactional
// enqueue checks against the counter: another destination is
// ErrDestinationMismatch, an unregistered one ErrUnknownDestination, and
// either leaves the caller's transaction usable with nothing of the event
// in it. A flow whose first event came in a transaction that rolled back
// takes the destination of the next first event.
func TestEnqueueTxRecordsTheFirstEventsDestination(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t)
	putTestDest(t, s, "alpha", 1)
	putTestDest(t, s, "beta", 1)

	// Rolled back: the flow's destination goes with it.
	c := beginCaller(t, url)
	if _, err := s.EnqueueTx(ctx, c.tx, queue.Event{ID: "r1", Flow: "f", Body: []byte("x"), Destination: "beta"}, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	c = beginCaller(t, url)
	if _, err := s.EnqueueTx(ctx, c.tx, queue.Event{ID: "e1", Flow: "f", Body: []byte("x"), Destination: "alpha"}, 2); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		e    queue.Event
		want error
	}{
		{queue.Event{ID: "e2", Flow: "f", Body: []byte("x"), Destination: "beta"}, queue.ErrDestinationMismatch},
		{queue.Event{ID: "e2", Flow: "f", Body: []byte("x"), Destination: "gamma"}, queue.ErrUnknownDestination},
		{queue.Event{ID: "g1", Flow: "g", Body: []byte("x"), Destination: "gamma"}, queue.ErrUnknownDestination},
	} {
		if _, err := s.EnqueueTx(ctx, c.tx, bad.e, 2); !errors.Is(err, bad.want) {
			t.Fatalf("EnqueueTx(%+v) = %v, want %v", bad.e, err, bad.want)
		}
	}
	// The transaction is still usable: the same flow, its own destination
	// or none.
	if r, err := s.EnqueueTx(ctx, c.tx, queue.Event{ID: "e2", Flow: "f", Body: []byte("x")}, 2); err != nil || r.Seq != 2 {
		t.Fatalf("EnqueueTx(e2) = %+v, %v; want seq 2", r, err)
	}
	if err := c.tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Not promoted yet: the flows row does not exist, the counter knows.
	var n int
	if err := s.pool.QueryRow(ctx, s.q(`SELECT count(*) FROM {s}.flows`)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("flows rows before the write turn: %d, %v; want 0", n, err)
	}
	// A plain enqueue checks the same destination (after the promotion).
	if _, err := s.Enqueue(ctx, queue.Event{ID: "e3", Flow: "f", Body: []byte("x"), Destination: "beta"}, 3); !errors.Is(err, queue.ErrDestinationMismatch) {
		t.Fatalf("Enqueue(e3 to beta) = %v, want ErrDestinationMismatch", err)
	}
	fs, err := s.Flows(ctx)
	if err != nil || len(fs) != 1 || fs[0].Destination != "alpha" || fs[0].LastSeq != 2 {
		t.Fatalf("Flows() = %+v, %v; want f to alpha with 2 events", fs, err)
	}
	cs, err := s.ClaimBatch(ctx, 4, 5)
	if err != nil || len(cs) != 1 || cs[0].EventID != "e1" || cs[0].Destination != "alpha" {
		t.Fatalf("ClaimBatch() = %+v, %v; want e1 to alpha", cs, err)
	}
	ds, err := s.Destinations(ctx)
	if err != nil || len(ds) != 2 || ds[0].Name != "alpha" || ds[0].Flows != 1 || ds[0].Backlog != 2 || ds[0].Inflight != 1 ||
		ds[1].Flows != 0 || ds[1].Inflight != 0 {
		t.Fatalf("Destinations() = %+v, %v; want alpha with 1 flow, backlog 2, 1 in flight", ds, err)
	}
}

// SetFlowDestination moves the flow in flows and in its sequence counter
// alike, so that a later transactional enqueue checks the new one.
func TestSetFlowDestinationMovesTheCounterToo(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t)
	putTestDest(t, s, "alpha", 1)
	putTestDest(t, s, "beta", 1)
	if _, err := s.Enqueue(ctx, queue.Event{ID: "e1", Flow: "f", Body: []byte("x"), Destination: "alpha"}, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFlowDestination(ctx, "f", "beta", "moved", 3); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFlowDestination(ctx, "nope", "beta", "moved", 3); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("SetFlowDestination(unknown flow) = %v, want ErrNotFound", err)
	}
	if err := s.SetFlowDestination(ctx, "f", "gamma", "moved", 3); !errors.Is(err, queue.ErrUnknownDestination) {
		t.Fatalf("SetFlowDestination(unknown destination) = %v, want ErrUnknownDestination", err)
	}
	c := beginCaller(t, url)
	defer c.tx.Rollback(ctx)
	if _, err := s.EnqueueTx(ctx, c.tx, queue.Event{ID: "e2", Flow: "f", Body: []byte("x"), Destination: "alpha"}, 4); !errors.Is(err, queue.ErrDestinationMismatch) {
		t.Fatalf("EnqueueTx(e2 to alpha) = %v, want ErrDestinationMismatch", err)
	}
	if _, err := s.EnqueueTx(ctx, c.tx, queue.Event{ID: "e2", Flow: "f", Body: []byte("x"), Destination: "beta"}, 4); err != nil {
		t.Fatalf("EnqueueTx(e2 to beta) = %v", err)
	}
}

// A default-destination claim and ack stay heap-only when destinations
// exist (the in-flight index reads generated columns that stay NULL for
// them), and a named destination's claim enters events_inflight_dest.
func TestDefaultDestinationClaimStaysHeapOnly(t *testing.T) {
	ctx := context.Background()
	s, _, schema := open(t)
	putTestDest(t, s, "alpha", 1)
	var es []queue.Event
	for _, id := range []string{"e0", "e1", "e2", "e3"} {
		es = append(es, queue.Event{ID: id, Flow: "f" + id, Body: []byte("x")})
	}
	es = append(es, queue.Event{ID: "n0", Flow: "named", Body: []byte("x"), Destination: "alpha"})
	if _, err := s.EnqueueBatch(ctx, es, 1); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ids := []string{"e0", "e1", "e2", "e3"}
	if _, err := tx.Exec(ctx, s.q(qClaimEventsDest), ids, int64(6), int64(1), []string{"", "", "", ""}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, s.q(qAckMany), ids, int64(6)); err != nil {
		t.Fatal(err)
	}
	var upd, hot int64
	if err := tx.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND relname = 'events'`, schema).Scan(&upd, &hot); err != nil {
		t.Fatal(err)
	}
	if upd != 8 || hot != 8 {
		t.Fatalf("default-destination claims and acks updated %d rows, %d heap-only; want 8 and 8", upd, hot)
	}
	if _, err := tx.Exec(ctx, s.q(qClaimEventsDest), []string{"n0"}, int64(6), int64(5), []string{"alpha"}); err != nil {
		t.Fatal(err)
	}
	var inflight int
	if err := tx.QueryRow(ctx, s.q(`SELECT count(*) FROM {s}.events WHERE inflight_dest = 'alpha' AND inflight_lease > 5`)).Scan(&inflight); err != nil || inflight != 1 {
		t.Fatalf("in flight to alpha: %d, %v; want 1", inflight, err)
	}
}

// A queue of the version-7 build (before destinations) migrates with
// every flow on the default destination and claims as before.
func TestMigrationFromVersion7(t *testing.T) {
	ctx := context.Background()
	schema := oldBuild(7)(t)
	s, err := OpenPool(ctx, pgtest.Pool(t), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs, err := s.Flows(ctx)
	if err != nil || len(fs) != 4 {
		t.Fatalf("Flows() = %+v, %v; want 4", fs, err)
	}
	for _, f := range fs {
		if f.Destination != "" {
			t.Fatalf("flow %+v: want the default destination", f)
		}
	}
	if ds, err := s.Destinations(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("Destinations() = %+v, %v; want none", ds, err)
	}
	c, ok, err := s.Claim(ctx, 20)
	if err != nil || !ok || c.EventID != "d-1" || c.Destination != "" {
		t.Fatalf("Claim() = %+v, %v, %v; want d-1 (served 0) to the default destination", c, ok, err)
	}
	putTestDest(t, s, "alpha", 21)
	if _, err := s.Enqueue(ctx, queue.Event{ID: "e-1", Flow: "e", Body: []byte("x"), Destination: "alpha"}, 21); err != nil {
		t.Fatal(err)
	}
	c, ok, err = s.Claim(ctx, 21)
	if err != nil || !ok || c.EventID != "e-1" || c.Destination != "alpha" {
		t.Fatalf("Claim() = %+v, %v, %v; want e-1 (served 0) to alpha", c, ok, err)
	}
	c, ok, err = s.Claim(ctx, 21)
	if err != nil || !ok || c.EventID != "c-1" || c.Destination != "" {
		t.Fatalf("Claim() = %+v, %v, %v; want c-1 (served 1)", c, ok, err)
	}
}
