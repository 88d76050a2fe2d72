package pgqueuestore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// advisoryLocks are the advisory locks c's server process holds, by mode
// (ShareLock, ExclusiveLock), and every lock of it in the server's shared
// lock table (the ones not held on its fast path).
func advisoryLocks(t *testing.T, c *callerTx) (byMode map[string]int, shared int) {
	t.Helper()
	ctx := context.Background()
	rows, err := c.obs.Query(ctx, `SELECT mode, count(*) FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' GROUP BY mode`, int32(c.pid))
	if err != nil {
		t.Fatal(err)
	}
	byMode = map[string]int{}
	for rows.Next() {
		var m string
		var n int
		if err := rows.Scan(&m, &n); err != nil {
			t.Fatal(err)
		}
		byMode[m] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.obs.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT fastpath`, int32(c.pid)).Scan(&shared); err != nil {
		t.Fatal(err)
	}
	return byMode, shared
}

// batch is n events of flows f00..f15, IDs prefix-0 on.
func batch(prefix string, n int) []queue.Event {
	es := make([]queue.Event, n)
	for i := range es {
		es[i] = ev(fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("f%02d", i%16))
	}
	return es
}

// TestEnqueue_LockEscalation: an enqueue of at most maxIDLocks distinct
// IDs holds the enqueue key shared and one lock per ID; one of more holds
// the key exclusive and no other advisory lock, whatever its size: a
// caller's transaction that enqueued 20,000 events holds one advisory
// lock, and its whole share of the server's lock table stays within
// maxIDLocks and a few (the relations it touched beyond its fast path).
// While it is open every other enqueue waits for it (claims do not); at
// its commit they go on and see its events.
func TestEnqueue_LockEscalation(t *testing.T) {
	ctx := context.Background()
	s, url, _ := open(t)

	small := beginCaller(t, url)
	if _, err := s.EnqueueBatchTx(ctx, small.tx, batch("s", maxIDLocks), 1); err != nil {
		t.Fatal(err)
	}
	m, n := advisoryLocks(t, small)
	t.Logf("a batch of %d IDs: advisory locks %v, %d locks in the shared table", maxIDLocks, m, n)
	if m["ShareLock"] != 1 || m["ExclusiveLock"] != maxIDLocks || n > maxIDLocks+1+16 {
		t.Fatalf("a batch of %d IDs holds %v advisory locks, %d in the shared table; want the key shared and %d IDs", maxIDLocks, m, n, maxIDLocks)
	}
	// The same IDs again add none: the locks count distinct IDs.
	if _, err := s.EnqueueBatchTx(ctx, small.tx, append(batch("s", maxIDLocks), batch("s", maxIDLocks)...), 1); err != nil {
		t.Fatal(err)
	}
	if m, _ := advisoryLocks(t, small); m["ShareLock"] != 1 || m["ExclusiveLock"] != maxIDLocks {
		t.Fatalf("the batch again, each ID twice, holds %v advisory locks", m)
	}
	if err := small.tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	big := beginCaller(t, url)
	if _, err := s.EnqueueBatchTx(ctx, big.tx, batch("b", 20000), 2); err != nil {
		t.Fatal(err)
	}
	m, n = advisoryLocks(t, big)
	t.Logf("a batch of 20,000 IDs: advisory locks %v, %d locks in the shared table", m, n)
	if len(m) != 1 || m["ExclusiveLock"] != 1 || n > maxIDLocks+1+16 {
		t.Fatalf("a batch of 20,000 IDs holds %v advisory locks, %d in the shared table; want the key exclusive alone", m, n)
	}
	finishesWhileOpen(t, s, big, "claim and settle", func() error {
		cl, ok, err := s.Claim(ctx, 3)
		if err != nil || !ok {
			return fmt.Errorf("claim: %v, %v", ok, err)
		}
		_, err = s.Settle(ctx, cl.EventID, cl.Generation, queue.Result{OK: true}, 3)
		return err
	})
	var other queue.Enqueued
	w := waitsForCaller(t, s, big, 1, "enqueue of another ID into another flow", func() error {
		var err error
		other, err = s.Enqueue(ctx, ev("x-1", "X"), 3)
		return err
	})
	var dup queue.Enqueued
	w2 := waitsForCaller(t, s, big, 2, "enqueue of one of the batch's IDs", func() error {
		var err error
		dup, err = s.Enqueue(ctx, ev("b-17", "f01"), 3)
		return err
	})
	if err := big.tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	w.wait(t, "enqueue of another ID")
	w2.wait(t, "enqueue of one of the batch's IDs")
	if other != (queue.Enqueued{Seq: 1}) || dup != (queue.Enqueued{Seq: maxIDLocks/16 + 2, Duplicate: true}) {
		t.Fatalf("after the commit: x-1 %+v, b-17 again %+v", other, dup)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Events.Pending+st.Events.Acked != maxIDLocks+20000+1 {
		t.Fatalf("Stats = %+v, %v; want every event", st, err)
	}
}

// TestEnqueue_BigBatchWaitsForCallers: a caller's open transaction has
// enqueued event b-7 (a few IDs, the enqueue key shared); a plain
// EnqueueBatch of more than maxIDLocks events that holds b-7 too waits
// for it, and so does every enqueue that comes after the batch; the
// caller's own next enqueue in the same transaction does not (it holds
// the key already). After the commit the batch finds b-7 stored: a
// duplicate with the same flow and body, a conflict (nothing written)
// with another body; after a rollback it stores b-7 itself.
func TestEnqueue_BigBatchWaitsForCallers(t *testing.T) {
	for _, tc := range []string{"commit", "commit conflict", "rollback"} {
		t.Run(tc, func(t *testing.T) {
			ctx := context.Background()
			s, url, _ := open(t)
			c := beginCaller(t, url)
			mine := ev("b-7", "f07")
			if tc == "commit conflict" {
				mine.Body = []byte("the caller's")
			}
			if r, err := s.EnqueueBatchTx(ctx, c.tx, []queue.Event{ev("c-1", "C"), mine}, 1); err != nil || r[1].Seq != 1 {
				t.Fatalf("EnqueueBatchTx = %+v, %v", r, err)
			}
			es := batch("b", 4*maxIDLocks)
			var rs []queue.Enqueued
			bigErr := make(chan error, 1)
			wb := waitsForCaller(t, s, c, 1, "big batch", func() error {
				var err error
				rs, err = s.EnqueueBatch(ctx, es, 2)
				bigErr <- err
				return nil
			})
			var after queue.Enqueued
			wa := waitsForCaller(t, s, c, 2, "enqueue after the big batch", func() error {
				var err error
				after, err = s.Enqueue(ctx, ev("d-1", "D"), 2)
				return err
			})
			finishesWhileOpen(t, s, c, "the caller's own next enqueue", func() error {
				_, err := s.EnqueueTx(ctx, c.tx, ev("c-2", "C"), 2)
				return err
			})
			if tc == "rollback" {
				if err := c.tx.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
			} else if err := c.tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			wb.wait(t, "big batch")
			wa.wait(t, "enqueue after the big batch")
			if after != (queue.Enqueued{Seq: 1}) {
				t.Fatalf("d-1 = %+v, want seq 1", after)
			}
			err := <-bigErr
			evs, ferr := s.FlowEvents(ctx, "f07")
			switch tc {
			case "commit":
				// f07: b-7 (the caller's, seq 1), then the batch's others.
				if err != nil || rs[7] != (queue.Enqueued{Seq: 1, Duplicate: true}) || rs[23] != (queue.Enqueued{Seq: 2}) {
					t.Fatalf("big batch: %v; b-7 %+v, b-23 %+v; want b-7 a duplicate of seq 1, b-23 seq 2", err, rs[7], rs[23])
				}
				if ferr != nil || len(evs) != 4*maxIDLocks/16 {
					t.Fatalf("f07 holds %d events, %v", len(evs), ferr)
				}
			case "commit conflict":
				if !errors.Is(err, queue.ErrConflict) {
					t.Fatalf("big batch: %v, want ErrConflict", err)
				}
				if ferr != nil || len(evs) != 1 || string(evs[0].Body) != "the caller's" {
					t.Fatalf("f07 = %+v, %v; want the caller's b-7 alone", evs, ferr)
				}
				if _, err := s.FlowEvents(ctx, "f00"); !errors.Is(err, queue.ErrNotFound) {
					t.Fatalf("f00: %v, want ErrNotFound (the batch wrote nothing)", err)
				}
			case "rollback":
				if err != nil || rs[7] != (queue.Enqueued{Seq: 1}) {
					t.Fatalf("big batch: %v; b-7 %+v, want seq 1", err, rs[7])
				}
				if ferr != nil || len(evs) != 4*maxIDLocks/16 || string(evs[0].Body) != "b-7" {
					t.Fatalf("f07 = %d events, %v; want the batch's", len(evs), ferr)
				}
				if _, err := s.FlowEvents(ctx, "C"); !errors.Is(err, queue.ErrNotFound) {
					t.Fatalf("C: %v, want ErrNotFound (rolled back)", err)
				}
			}
		})
	}
}
