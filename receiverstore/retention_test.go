package receiverstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
)

// fakeClock is a WithNow clock that a test moves by hand.
type fakeClock struct{ us atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.UnixMicro(c.us.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.us.Add(d.Microseconds()) }

// fileSize is the size of the database file once the WAL is checkpointed
// into it (and truncated), so that pages given back are gone from it.
func fileSize(t *testing.T, s *Store, path string) int64 {
	t.Helper()
	if _, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// receiveRound accepts n messages of 20 flows (long IDs, so that the
// receipts fill pages) in one batch.
func receiveRound(t *testing.T, s *Store, round, n int, next map[string]int64) {
	t.Helper()
	ms := make([]Message, 0, n)
	for i := range n {
		flow := fmt.Sprintf("flow-%02d", i%20)
		next[flow]++
		ms = append(ms, Message{ID: fmt.Sprintf("%s-%06d-%s", flow, next[flow], strings.Repeat("x", 150)),
			Flow: flow, Seq: next[flow], Body: body(1)})
	}
	res, err := s.ReceiveBatch(context.Background(), ms)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Outcome != Accepted {
			t.Fatalf("round %d item %d: %+v", round, i, r)
		}
	}
}

// pruneAll prunes, batch after batch, every receipt accepted before
// before, and returns how many.
func pruneAll(t *testing.T, s *Store, before time.Time) int64 {
	t.Helper()
	var n int64
	for {
		r, err := s.Prune(context.Background(), before, 300)
		if err != nil {
			t.Fatal(err)
		}
		n += r.Receipts
		if !r.More {
			return n
		}
	}
}

// A receiver that prunes as fast as it receives keeps a steady file: each
// round receives 1,000 messages and prunes the round before it, and from
// the third round on the file stays within a quarter above its size then
// (B-tree pages split and merge a little differently each round). Without
// pruning it grows every round (the control).
func TestRetention_FileStopsGrowingUnderSteadyLoad(t *testing.T) {
	t.Parallel()
	var clk fakeClock
	clk.advance(time.Hour)
	s, path := open(t, WithNow(clk.now))
	ctl, ctlPath := open(t, WithNow(clk.now))
	next, ctlNext := map[string]int64{}, map[string]int64{}
	var steady, ctlSteady int64
	for round := 1; round <= 12; round++ {
		receiveRound(t, s, round, 1000, next)
		receiveRound(t, ctl, round, 1000, ctlNext)
		clk.advance(time.Minute)
		// Keep the last round's receipts: prune what is older.
		if n := pruneAll(t, s, clk.now().Add(-time.Minute)); round > 1 && n != 1000 {
			t.Fatalf("round %d pruned %d receipts, want 1000", round, n)
		}
		size, ctlSize := fileSize(t, s, path), fileSize(t, ctl, ctlPath)
		t.Logf("round %2d: pruned file %7d bytes, unpruned %7d bytes", round, size, ctlSize)
		switch {
		case round == 3:
			steady, ctlSteady = size, ctlSize
		case round > 3 && size > steady+steady/4:
			t.Fatalf("round %d: the pruned file has %d bytes, more than 1.25 × the %d of round 3", round, size, steady)
		}
	}
	if last := fileSize(t, ctl, ctlPath); last <= 2*ctlSteady {
		t.Fatalf("the control did not grow past twice its size (%d bytes after round 3, %d after 12): the test shows nothing", ctlSteady, last)
	}
	flows, err := s.Flows(context.Background())
	if err != nil || len(flows) != 20 || flows[0].NextExpected != 601 || flows[0].PrunedThrough != 550 {
		t.Fatalf("Flows() = %+v, %v", flows, err)
	}
}

// Pruning every receipt gives the pages back: the file (auto_vacuum =
// INCREMENTAL, set on every new file) shrinks.
func TestRetention_PruneShrinksTheFile(t *testing.T) {
	t.Parallel()
	var clk fakeClock
	s, path := open(t, WithNow(clk.now))
	var av int
	if err := s.db.QueryRow(`PRAGMA auto_vacuum`).Scan(&av); err != nil || av != 2 {
		t.Fatalf("auto_vacuum = %d, %v; want 2 (incremental)", av, err)
	}
	next := map[string]int64{}
	for round := range 5 {
		receiveRound(t, s, round, 1000, next)
	}
	full := fileSize(t, s, path)
	clk.advance(time.Second)
	if n := pruneAll(t, s, clk.now()); n != 5000 {
		t.Fatalf("pruned %d, want 5000", n)
	}
	if empty := fileSize(t, s, path); empty*4 > full {
		t.Fatalf("after pruning every receipt the file has %d bytes, of %d before; want a quarter at most", empty, full)
	}
}

// A vacuum that fails after the batch's deletes committed (here its
// context ends in between, as when a server stops its prune loop) does
// not hide them: Prune returns what it deleted, with More as for a batch
// without an error, and an error that says only the vacuum failed.
func TestRetention_FailedVacuumKeepsTheCount(t *testing.T) {
	t.Parallel()
	var clk fakeClock
	s, _ := open(t, WithNow(clk.now))
	for i := range 3 {
		mustReceive(t, s, msg(fmt.Sprintf("e%d", i+1), "f", int64(i+1), 1), Accepted)
	}
	clk.advance(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	s.pruneCommitted = cancel
	r, err := s.Prune(ctx, clk.now(), 2)
	if want := (receiver.PruneResult{Receipts: 2, More: true}); r != want || !errors.Is(err, context.Canceled) ||
		!strings.Contains(err.Error(), "2 receipts were deleted; only giving the free pages back failed") {
		t.Fatalf("Prune() with a vacuum that fails = %+v, %v; want %+v and the canceled vacuum's error", r, err, want)
	}
	s.pruneCommitted = nil
	if r, err := s.Prune(context.Background(), clk.now(), 2); err != nil || r != (receiver.PruneResult{Receipts: 1}) {
		t.Fatalf("the next Prune() = %+v, %v; want the one receipt left", r, err)
	}
}

// A read-only store prunes nothing: ErrReadOnly. Prunable reads.
func TestRetention_ReadOnly(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	mustReceive(t, s, msg("a", "f", 1, 1), Accepted)
	ro, err := Open(path, WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	future := time.Now().Add(time.Hour)
	if _, err := ro.Prune(context.Background(), future, 10); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Prune(read-only) error = %v, want ErrReadOnly", err)
	}
	if r, err := ro.Prunable(context.Background(), future); err != nil || r != (receiver.PruneResult{Receipts: 1}) {
		t.Fatalf("Prunable(read-only) = %+v, %v; want 1 receipt", r, err)
	}
}

// A store with an effect prunes as one without: a pruned receipt's
// redelivery is Pruned, in Receive and ReceiveBatch, and does not run the
// effect again; the effect's own rows are the effect's, never pruned.
func TestRetention_WithEffect(t *testing.T) {
	t.Parallel()
	var clk fakeClock
	var runs atomic.Int64
	s, _ := open(t, WithNow(clk.now), WithSchema(orderSchema), WithEffect(func(ctx context.Context, tx Tx, m Message) error {
		runs.Add(1)
		return recordOrder(ctx, tx, m)
	}))
	mustReceive(t, s, opaque("o1", "shop", 1, `{"sku":"a"}`), Accepted)
	mustReceive(t, s, opaque("o2", "shop", 2, `{"sku":"b"}`), Accepted)
	clk.advance(time.Second)
	if r, err := s.Prune(context.Background(), clk.now(), 10); err != nil || r.Receipts != 2 {
		t.Fatalf("Prune() = %+v, %v; want 2 receipts", r, err)
	}
	mustReceive(t, s, opaque("o1", "shop", 1, `{"sku":"a"}`), Pruned)
	res, err := s.ReceiveBatch(context.Background(), []Message{opaque("o2", "shop", 2, `{"sku":"b"}`), opaque("o3", "shop", 3, `{"sku":"c"}`)})
	if err != nil || res[0].Outcome != Pruned || res[1].Outcome != Accepted {
		t.Fatalf("ReceiveBatch() = %+v, %v; want pruned, accepted", res, err)
	}
	if runs.Load() != 3 || orderCount(t, s) != 3 || total(t, s, "shop") != 3 {
		t.Fatalf("effect runs %d, orders %d, total %d; want 3, 3, 3", runs.Load(), orderCount(t, s), total(t, s, "shop"))
	}
}

// Prune gives back the pages its batch freed and up to its limit more,
// never a whole free list at once: a long list (here left by a table
// dropped behind the store's back, as an older build's deletes would
// leave it) drains batch by batch, each vacuum as short as its batch.
func TestRetention_VacuumDrainsALongFreeListByBatches(t *testing.T) {
	t.Parallel()
	var clk fakeClock
	s, _ := open(t, WithNow(clk.now))
	if _, err := s.db.Exec(`CREATE TABLE ballast (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if _, err := s.db.Exec(`INSERT INTO ballast VALUES (zeroblob(16384))`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.Exec(`DROP TABLE ballast`); err != nil {
		t.Fatal(err)
	}
	free := func() (n int64) {
		if err := s.db.QueryRow(`PRAGMA freelist_count`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	long := free()
	if long < 100 {
		t.Fatalf("the dropped table left %d free pages, want a long list", long)
	}
	for i := range 3 {
		mustReceive(t, s, msg(fmt.Sprintf("e%d", i+1), "f", int64(i+1), 1), Accepted)
	}
	clk.advance(time.Second)
	if r, err := s.Prune(context.Background(), clk.now(), 2); err != nil || r.Receipts != 2 {
		t.Fatalf("Prune() = %+v, %v", r, err)
	}
	if got := free(); got < long-10 {
		t.Fatalf("one batch of 2 gave back %d of %d free pages, want what it freed and up to 2 more", long-got, long)
	}
}
