package pgqueuestore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// callerTx is a caller's open transaction on the store's database, on a
// connection of its own, with its server process ID, and a connection
// that watches the server's locks (outside the store's pool, which
// waiting operations may hold whole).
type callerTx struct {
	conn, obs *pgx.Conn
	tx        pgx.Tx
	pid       uint32
}

func beginCaller(t *testing.T, url string) *callerTx {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	obs, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &callerTx{conn: conn, obs: obs, tx: tx, pid: conn.PgConn().PID()}
}

// outcome is what an operation started by start returned.
type outcome struct {
	done chan error
}

// start runs op in a goroutine.
func start(op func() error) *outcome {
	o := &outcome{done: make(chan error, 1)}
	go func() { o.done <- op() }()
	return o
}

// blockedBy reports how many server processes wait, directly or through
// others that wait, for a lock that pid holds: a write that waits for the
// meta row held by an enqueue that waits for the caller counts.
func blockedBy(t *testing.T, c *callerTx) int {
	t.Helper()
	var n int
	if err := c.obs.QueryRow(context.Background(), `WITH RECURSIVE w AS (
    SELECT a.pid FROM pg_stat_activity AS a WHERE $1 = ANY(pg_blocking_pids(a.pid))
    UNION
    SELECT a.pid FROM pg_stat_activity AS a, w WHERE w.pid = ANY(pg_blocking_pids(a.pid)))
SELECT count(*) FROM w`, int32(c.pid)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// finishesWhileOpen runs op while c stays open and fails the test as soon
// as one more server process than before waits for c (blockedBy): op must
// finish without ever waiting for the caller's transaction. No timing: the
// verdict is the server's lock table, polled until op returns.
func finishesWhileOpen(t *testing.T, s *Store, c *callerTx, what string, op func() error) {
	t.Helper()
	base := blockedBy(t, c)
	o := start(op)
	for {
		select {
		case err := <-o.done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return
		default:
		}
		if blockedBy(t, c) > base {
			t.Fatalf("%s waits for the caller's open transaction", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitsForCaller runs op and returns once the server shows it waiting for
// a lock c holds; op failing or finishing first fails the test. The
// caller ends c, then reads the outcome.
// n is how many processes wait for c once op does (the ones started
// before it, plus one).
func waitsForCaller(t *testing.T, s *Store, c *callerTx, n int, what string, op func() error) *outcome {
	t.Helper()
	o := start(op)
	for blockedBy(t, c) < n {
		select {
		case err := <-o.done:
			t.Fatalf("%s did not wait for the caller's transaction (returned %v)", what, err)
		default:
		}
		time.Sleep(time.Millisecond)
	}
	return o
}

func (o *outcome) wait(t *testing.T, what string) {
	t.Helper()
	if err := <-o.done; err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func ev(id, flow string) queue.Event { return queue.Event{ID: id, Flow: flow, Body: []byte(id)} }

// TestEnqueueTx_OpenTxHoldsUpOnlyItsFlow: with a caller's transaction open
// after EnqueueTx into flow F, (a) claims and settles of every flow, F's
// own head included, go on, as do the other writes and the reads; (b)
// enqueues, plain and transactional, into other flows go on; (c) only a
// later enqueue into F, and one of the same event ID, wait, and they
// finish once the caller commits, with F's numbering unbroken.
func TestEnqueueTx_OpenTxHoldsUpOnlyItsFlow(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t)
	if _, err := s.EnqueueBatch(ctx, []queue.Event{ev("f-1", "F"), ev("f-2", "F"), ev("g-1", "G")}, 1); err != nil {
		t.Fatal(err)
	}
	first, ok, err := s.Claim(ctx, 2) // F's head, in flight
	if err != nil || !ok || first.EventID != "f-1" {
		t.Fatalf("Claim = %+v, %v, %v; want f-1", first, ok, err)
	}

	c := beginCaller(t, url)
	r, err := s.EnqueueTx(ctx, c.tx, ev("f-3", "F"), 3)
	if err != nil || r != (queue.Enqueued{Seq: 3}) {
		t.Fatalf("EnqueueTx = %+v, %v; want seq 3", r, err)
	}

	// (a) F's head settles, F's next head and G's are claimed and settled.
	finishesWhileOpen(t, s, c, "settle of F's head", func() error {
		o, err := s.Settle(ctx, first.EventID, first.Generation, queue.Result{OK: true}, 4)
		if err == nil && o != queue.Acked {
			err = fmt.Errorf("outcome %s, want acked", o)
		}
		return err
	})
	var cs []queue.Claim
	finishesWhileOpen(t, s, c, "claims", func() error {
		var err error
		cs, err = s.ClaimBatch(ctx, 5, 10)
		return err
	})
	if len(cs) != 2 || cs[0].EventID != "g-1" || cs[1].EventID != "f-2" {
		t.Fatalf("ClaimBatch = %+v; want g-1 (served least) and f-2 (f-3 is not committed)", cs)
	}
	finishesWhileOpen(t, s, c, "settles", func() error {
		_, err := s.SettleBatch(ctx, []queue.SettleItem{
			{EventID: "g-1", Generation: cs[0].Generation, Result: queue.Result{OK: true}},
			{EventID: "f-2", Generation: cs[1].Generation, Result: queue.Result{Reason: "unavailable"}},
		}, 6)
		return err
	})
	finishesWhileOpen(t, s, c, "other writes and reads", func() error {
		if err := s.SetWeight(ctx, "G", 3, "ops", 7); err != nil {
			return err
		}
		if err := s.PauseFlow(ctx, "G", "ops", 7); err != nil {
			return err
		}
		if _, err := s.Prune(ctx, 7, 10); err != nil {
			return err
		}
		if _, err := s.Stats(ctx); err != nil {
			return err
		}
		if _, err := s.Flows(ctx); err != nil {
			return err
		}
		_, _, err := s.NextDue(ctx)
		return err
	})

	// (b) other flows, plain and in another caller's transaction.
	finishesWhileOpen(t, s, c, "enqueue into another flow", func() error {
		_, err := s.Enqueue(ctx, ev("h-1", "H"), 8)
		return err
	})
	finishesWhileOpen(t, s, c, "batch into other flows", func() error {
		_, err := s.EnqueueBatch(ctx, []queue.Event{ev("h-2", "H"), ev("g-2", "G")}, 8)
		return err
	})
	other := beginCaller(t, url)
	finishesWhileOpen(t, s, c, "transactional enqueue into another flow", func() error {
		_, err := s.EnqueueBatchTx(ctx, other.tx, []queue.Event{ev("k-1", "K"), ev("h-3", "H")}, 8)
		if err == nil {
			err = other.tx.Commit(ctx)
		}
		return err
	})

	// (c) F, and f-3's ID, wait for the caller.
	var later queue.Enqueued
	waitF := waitsForCaller(t, s, c, 1, "enqueue into F", func() error {
		var err error
		later, err = s.Enqueue(ctx, ev("f-4", "F"), 9)
		return err
	})
	var dup queue.Enqueued
	waitID := waitsForCaller(t, s, c, 2, "enqueue of f-3's ID", func() error {
		var err error
		dup, err = s.Enqueue(ctx, ev("f-3", "F"), 9)
		return err
	})
	conflict := make(chan error, 1)
	waitConflict := waitsForCaller(t, s, c, 3, "enqueue of f-3's ID into another flow", func() error {
		_, err := s.Enqueue(ctx, ev("f-3", "X"), 9)
		conflict <- err
		return nil
	})
	// The enqueues that wait hold nothing a claim or a settle needs.
	finishesWhileOpen(t, s, c, "claim and settle while enqueues wait for F", func() error {
		if _, err := s.Enqueue(ctx, ev("m-1", "M"), 9); err != nil {
			return err
		}
		cl, ok, err := s.Claim(ctx, 9)
		if err != nil || !ok {
			return fmt.Errorf("claim: %v, %v", ok, err)
		}
		_, err = s.Settle(ctx, cl.EventID, cl.Generation, queue.Result{OK: true}, 9)
		return err
	})
	if err := c.tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitF.wait(t, "enqueue into F")
	waitID.wait(t, "enqueue of f-3's ID")
	waitConflict.wait(t, "enqueue of f-3's ID into another flow")
	if later != (queue.Enqueued{Seq: 4}) || dup != (queue.Enqueued{Seq: 3, Duplicate: true}) {
		t.Fatalf("after the commit: f-4 %+v, f-3 again %+v; want seq 4, and seq 3 duplicate", later, dup)
	}
	if err := <-conflict; !errors.Is(err, queue.ErrConflict) {
		t.Fatalf("f-3 into another flow: %v, want ErrConflict", err)
	}
	evs, err := s.FlowEvents(ctx, "F")
	if err != nil || len(evs) != 4 {
		t.Fatalf("FlowEvents(F) = %d events, %v; want 4", len(evs), err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("F's event %d has seq %d", i, e.Seq)
		}
	}
}

// TestEnqueueTx_RollbackLeavesNothing: a rolled-back EnqueueBatchTx leaves
// no event, no flow and no hole: the flow's next enqueue takes seq 1.
func TestEnqueueTx_RollbackLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t)
	c := beginCaller(t, url)
	if rs, err := s.EnqueueBatchTx(ctx, c.tx, []queue.Event{ev("a-1", "A"), ev("a-2", "A")}, 1); err != nil || len(rs) != 2 || rs[1].Seq != 2 {
		t.Fatalf("EnqueueBatchTx = %+v, %v", rs, err)
	}
	if err := c.tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Flows != 0 || st.Events != (queue.EventCounts{}) {
		t.Fatalf("Stats = %+v, %v; want nothing", st, err)
	}
	if _, err := s.FlowEvents(ctx, "A"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("FlowEvents(A): %v, want ErrNotFound", err)
	}
	if r, err := s.Enqueue(ctx, ev("a-3", "A"), 2); err != nil || r.Seq != 1 {
		t.Fatalf("Enqueue after the rollback = %+v, %v; want seq 1", r, err)
	}
	c2 := beginCaller(t, url)
	if r, err := s.EnqueueTx(ctx, c2.tx, ev("a-1", "A"), 3); err != nil || r.Seq != 2 {
		t.Fatalf("EnqueueTx = %+v, %v; want seq 2", r, err)
	}
	if err := c2.tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Enqueue(ctx, ev("a-4", "A"), 4); err != nil || r.Seq != 2 {
		t.Fatalf("Enqueue after the second rollback = %+v, %v; want seq 2", r, err)
	}
}

// TestEnqueueTx_CommitWakesAndIsClaimable: a commit wakes a listener (the
// notification is sent at commit), NextDue answers the clock mark while
// the arrival waits for a write turn, the next claim promotes and claims
// it; a retry is a Duplicate.
func TestEnqueueTx_CommitWakesAndIsClaimable(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t, WithNotifyInterval(0))
	l, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, _, err := s.NextDue(ctx); err != nil {
		t.Fatal(err)
	}
	c := beginCaller(t, url)
	if _, err := s.EnqueueTx(ctx, c.tx, ev("a-1", "A"), 5); err != nil {
		t.Fatal(err)
	}
	if at, ok, err := s.NextDue(ctx); err != nil || ok {
		t.Fatalf("NextDue before the commit = %d, %v, %v; want nothing", at, ok, err)
	}
	if err := c.tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if at, ok, err := s.NextDue(ctx); err != nil || !ok || at != 5 {
		t.Fatalf("NextDue after the commit = %d, %v, %v; want the mark 5", at, ok, err)
	}
	cl, ok, err := s.Claim(ctx, 6)
	if err != nil || !ok || cl.EventID != "a-1" || cl.Seq != 1 {
		t.Fatalf("Claim = %+v, %v, %v; want a-1", cl, ok, err)
	}
	c2 := beginCaller(t, url)
	if r, err := s.EnqueueTx(ctx, c2.tx, ev("a-1", "A"), 7); err != nil || r != (queue.Enqueued{Seq: 1, Duplicate: true}) {
		t.Fatalf("EnqueueTx again = %+v, %v; want a duplicate of seq 1", r, err)
	}
}

// TestEnqueueTx_RefusalsLeaveTheTxUsable: bad input, a conflict, a
// weight, a NotBefore past the policy's ticks, an unknown destination and
// a tick below the mark are refused with their typed errors, move no
// clock mark (those at a tick above it included), nothing of the call
// stays in the caller's transaction, and the transaction goes on.
func TestEnqueueTx_RefusalsLeaveTheTxUsable(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t)
	if _, err := s.Enqueue(ctx, ev("a-1", "A"), 10); err != nil {
		t.Fatal(err)
	}
	c := beginCaller(t, url)
	for _, tc := range []struct {
		name string
		es   []queue.Event
		now  clock.Tick
		want error
	}{
		{"conflict", []queue.Event{ev("b-1", "B"), {ID: "a-1", Flow: "A", Body: []byte("other")}}, 20, queue.ErrConflict},
		{"weight", []queue.Event{{ID: "b-1", Flow: "B", Body: []byte("x"), Weight: 2}}, 20, queue.ErrInvalid},
		{"empty body", []queue.Event{{ID: "b-1", Flow: "B"}}, 20, queue.ErrInvalid},
		{"not before past the policy's ticks", []queue.Event{{ID: "b-1", Flow: "B", Body: []byte("x"), NotBefore: clock.Tick(1<<63 - 1)}}, 20, queue.ErrTickOverflow},
		{"unknown destination", []queue.Event{{ID: "b-1", Flow: "B", Body: []byte("x"), Destination: "nowhere"}}, 20, queue.ErrUnknownDestination},
		{"regression", []queue.Event{ev("b-1", "B")}, 9, queue.ErrTimeRegression},
	} {
		if _, err := s.EnqueueBatchTx(ctx, c.tx, tc.es, tc.now); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		// A refused write does not move the clock mark (docs/contract.md
		// §2.6), even at a tick above it.
		if st, err := s.Stats(ctx); err != nil || st.ClockMark != 10 {
			t.Fatalf("%s: clock mark %d (%v) after the refusal at %d, want 10", tc.name, st.ClockMark, err, tc.now)
		}
	}
	if r, err := s.EnqueueTx(ctx, c.tx, ev("b-1", "B"), 20); err != nil || r.Seq != 1 {
		t.Fatalf("EnqueueTx after the refusals = %+v, %v; want seq 1 of B", r, err)
	}
	if st, err := s.Stats(ctx); err != nil || st.ClockMark != 20 {
		t.Fatalf("clock mark %d (%v) after an accepted enqueue at 20, want 20", st.ClockMark, err)
	}
	if err := c.tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := s.FlowEvents(ctx, "B")
	if err != nil || len(evs) != 1 || evs[0].ID != "b-1" {
		t.Fatalf("FlowEvents(B) = %+v, %v; want b-1 alone", evs, err)
	}
}

// TestEnqueueTx_PromotionJoinsRotationAndKeepsPause: committed arrivals
// become heads as an enqueue would make them: under FairRotation a flow
// that gets a head joins the rotation's tail, in flow order; a paused
// flow's new head is not dispatchable; a scheduled one waits for its
// NotBefore.
func TestEnqueueTx_PromotionJoinsRotationAndKeepsPause(t *testing.T) {
	ctx := context.Background()
	p := queue.DefaultPolicy()
	p.Fairness = queue.FairRotation
	s, url, _ := open(t, WithPolicy(p))
	if _, err := s.Enqueue(ctx, ev("p-1", "P"), 1); err != nil {
		t.Fatal(err)
	}
	cl, _, err := s.Claim(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, cl.EventID, cl.Generation, queue.Result{OK: true}, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseFlow(ctx, "P", "ops", 1); err != nil {
		t.Fatal(err)
	}
	c := beginCaller(t, url)
	if _, err := s.EnqueueBatchTx(ctx, c.tx, []queue.Event{ev("b-1", "B"), ev("a-1", "A"), ev("p-2", "P"),
		{ID: "s-1", Flow: "S", Body: []byte("x"), NotBefore: 50}}, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	joined := map[string]int64{}
	for _, f := range snap.Flows {
		joined[f.Flow] = *f.Joined
		if f.HeadSeq == nil {
			t.Fatalf("flow %s has no head after the promotion: %+v", f.Flow, f)
		}
	}
	if !(joined["P"] > 1 && joined["A"] < joined["B"] && joined["B"] < joined["P"] && joined["P"] < joined["S"]) {
		t.Fatalf("joined = %v; want A, B, P, S joining after P's first turn, in flow order", joined)
	}
	var got []string
	for {
		cl, ok, err := s.Claim(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, cl.EventID)
		if _, err := s.Settle(ctx, cl.EventID, cl.Generation, queue.Result{OK: true}, 3); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[a-1 b-1]" {
		t.Fatalf("claims at 3 = %v; want a-1 and b-1 (P is paused, S scheduled at 50)", got)
	}
	if at, ok, err := s.NextDue(ctx); err != nil || !ok || at != 50 {
		t.Fatalf("NextDue = %d, %v, %v; want 50 (S; P is paused)", at, ok, err)
	}
}

// TestEnqueueTx_OnThePoolOfOneConnection: the caller's transaction may
// come from the pool the store was opened on (examples/outbox does so),
// and EnqueueTx raises the clock mark without asking that pool for a
// second connection: on a pool of one it would wait for ever.
func TestEnqueueTx_OnThePoolOfOneConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, schema := pgtest.Schema(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := OpenPool(ctx, pool, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, now := range []clock.Tick{5, 6, 6} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := s.EnqueueTx(ctx, tx, ev(fmt.Sprintf("o-%d", i), "orders"), now)
			return err
		})
		if err != nil {
			t.Fatalf("EnqueueTx #%d at %d on the pool's only connection: %v", i+1, now, err)
		}
	}
	if st, err := s.Stats(ctx); err != nil || st.ClockMark != 6 || st.Events.Pending != 3 {
		t.Fatalf("Stats = %+v, %v; want mark 6 and 3 pending events", st, err)
	}
}

// TestEnqueueTx_RepeatableReadIDTakenSinceTheSnapshot: at REPEATABLE READ
// the caller's snapshot may predate another transaction's enqueue of the
// same ID into another flow; the insert then meets the ID and the call is
// queue.ErrConflict, as it would be at READ COMMITTED, not a bare
// unique-violation error.
func TestEnqueueTx_RepeatableReadIDTakenSinceTheSnapshot(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, ev("x-1", "A"), 1); err != nil {
		t.Fatal(err)
	}
	_, err = s.EnqueueTx(ctx, tx, ev("x-1", "B"), 20)
	if !errors.Is(err, queue.ErrConflict) {
		t.Fatalf("EnqueueTx(x-1 into B) after x-1 went into A since the snapshot: %v, want ErrConflict", err)
	}
	// Refused: the mark stays where the plain enqueue left it.
	if st, err := s.Stats(ctx); err != nil || st.ClockMark != 1 {
		t.Fatalf("clock mark %d (%v) after the refused EnqueueTx at 20, want 1", st.ClockMark, err)
	}
}

// TestEnqueueTx_MarkConnectionLost: the connection the mark is raised on
// may die between two calls (a server restart, an idle session ended);
// the next raise opens another and the call succeeds.
func TestEnqueueTx_MarkConnectionLost(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t)
	for i, now := range []clock.Tick{5, 6} {
		c := beginCaller(t, url)
		if _, err := s.EnqueueTx(ctx, c.tx, ev(fmt.Sprintf("m-%d", i), "M"), now); err != nil {
			t.Fatalf("EnqueueTx at %d: %v", now, err)
		}
		if err := c.tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			pid := s.markConn.c.PgConn().PID()
			execSQL(t, url, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid))
		}
	}
	if st, err := s.Stats(ctx); err != nil || st.ClockMark != 6 {
		t.Fatalf("clock mark %d (%v), want 6", st.ClockMark, err)
	}
}

// TestEnqueueTx_WaitForTheMarkEndsWithTheContext: a call waiting for its
// turn on the mark connection gives up when its context ends, and leaves
// nothing of itself in the caller's transaction.
func TestEnqueueTx_WaitForTheMarkEndsWithTheContext(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t)
	c := beginCaller(t, url)
	s.markConn.turn <- struct{}{} // another raise holds the connection
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := s.EnqueueTx(short, c.tx, ev("w-1", "W"), 5)
	cancel()
	<-s.markConn.turn
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("EnqueueTx while the mark connection is taken = %v, want the context's deadline", err)
	}
	if r, err := s.EnqueueTx(ctx, c.tx, ev("w-2", "W"), 5); err != nil || r.Seq != 1 {
		t.Fatalf("EnqueueTx after = %+v, %v; want seq 1 of W (nothing of the first call left)", r, err)
	}
	if err := c.tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
