package pgreceiverstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// heldLocks counts, on the server, the granted advisory locks on keys, by
// mode (ShareLock, ExclusiveLock), and the ungranted ones (waiters): an
// int8 advisory key is (classid, objid) = its high and low 32 bits.
func heldLocks(t *testing.T, obs *pgxpool.Pool, keys []int64) (granted map[string]int, waiting int) {
	t.Helper()
	hi, lo := make([]int64, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		hi[i], lo[i] = int64(uint64(k)>>32), int64(uint32(uint64(k)))
	}
	rows, err := obs.Query(context.Background(), `SELECT l.mode, l.granted, count(*) FROM pg_locks AS l
JOIN unnest($1::bigint[], $2::bigint[]) AS k(hi, lo) ON l.classid::bigint = k.hi AND l.objid::bigint = k.lo
WHERE l.locktype = 'advisory' AND l.objsubid = 1 GROUP BY l.mode, l.granted`, hi, lo)
	if err != nil {
		t.Fatal(err)
	}
	granted = map[string]int{}
	var mode string
	var ok bool
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&mode, &ok, &n}, func() error {
		if ok {
			granted[mode] += n
		} else {
			waiting += n
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return granted, waiting
}

// TestReceiveBatch_LockEscalation: a batch over at most maxKeyLocks keys
// (its IDs and flows) holds the store's write key shared and one lock per
// key; a bigger one holds the write key exclusive and no per-key lock,
// whatever its size, so a batch of 5,000 messages takes one slot of the
// server's lock table, not 5,016. While it is open a receive in a flow it
// does not touch waits for it (on the write key); at its commit that
// receive goes on, and both are applied. So on the general path and on
// the one-call path, where every batch here is accepted and takes the
// same locks in one call of receive_accepted; a batch of 40 messages of 40
// flows (80 keys) takes the write key exclusive there too.
//
// A batch is held open by a row lock on a flow it advances, taken by
// another transaction: the batch waits for it at its writes, after it took
// its locks, on either path.
func TestReceiveBatch_LockEscalation(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"one call", nil},
		{"general path", []Option{withGeneralPath()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := pgtest.NewCallCounter("receive_accepted")
			s := openTraced(t, calls, 0, c.opts...)
			lockEscalation(t, s)
			want := int64(0)
			if !s.general {
				want = 7 // three batches, the first message of each and the other receive, one call each
			}
			if calls.Taken() != want || calls.Calls() != want {
				t.Errorf("receive_accepted called %d times, %d taken; want %d and %d", calls.Calls(), calls.Taken(), want, want)
			}
		})
	}
}

// lockEscalation is TestReceiveBatch_LockEscalation on s.
func lockEscalation(t *testing.T, s *Store) {
	ctx := context.Background()
	obs, err := pgxpool.New(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	keysOf := func(ms []receiver.Message) []int64 {
		var ks []int64
		for _, m := range ms {
			ks = append(ks, lockKey("id", s.schema, m.ID), lockKey("flow", s.schema, m.Flow))
		}
		return ks
	}
	write := []int64{s.writeKey()}
	// batch is n messages of flows prefix-f00 … prefix-f(flows-1), the
	// first of them, prefix-f00, known to the store: its message 1 is
	// received first.
	batch := func(prefix string, n, flows int) []receiver.Message {
		if o, err := s.Receive(ctx, msg(prefix+"-0", prefix+"-f00", 1, 1)); err != nil || o != receiver.Accepted {
			t.Fatalf("Receive = %s, %v", o, err)
		}
		ms := make([]receiver.Message, n)
		for i := range ms {
			f := i % flows
			seq := int64(i/flows + 1)
			if f == 0 {
				seq++
			}
			ms[i] = msg(fmt.Sprintf("%s-%d", prefix, i+1), fmt.Sprintf("%s-f%02d", prefix, f), seq, 1)
		}
		return ms
	}
	// run receives ms in a goroutine held at its writes, once held
	// says its locks are taken, until release is called.
	run := func(ms []receiver.Message, held func() bool) (done chan error, release func()) {
		tx, err := obs.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(ctx) }) // a failed test lets a held batch go
		if _, err := tx.Exec(ctx, s.q(`SELECT 1 FROM {s}.flows WHERE flow = $1 FOR UPDATE`), ms[0].Flow); err != nil {
			t.Fatal(err)
		}
		done = make(chan error, 1)
		go func() {
			res, err := s.ReceiveBatch(ctx, ms)
			for i, r := range res {
				if err == nil && r.Outcome != receiver.Accepted {
					err = fmt.Errorf("message %d: %s", i, r.Outcome)
				}
			}
			done <- err
		}()
		for deadline := time.Now().Add(time.Minute); !held(); time.Sleep(10 * time.Millisecond) { // a bound on a hang, not a timing
			select {
			case err := <-done:
				t.Fatalf("ReceiveBatch returned %v while held", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("ReceiveBatch never took its locks")
			}
		}
		return done, func() {
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	// 16 messages of 16 flows: 32 keys, each locked, the write key shared.
	small := batch("s", 16, 16)
	done, release := run(small, func() bool {
		g, _ := heldLocks(t, obs, keysOf(small))
		return g["ExclusiveLock"] == 32
	})
	if g, _ := heldLocks(t, obs, write); g["ShareLock"] != 1 || g["ExclusiveLock"] != 0 {
		t.Errorf("small batch: write key %v, want shared", g)
	}
	if g, _ := heldLocks(t, obs, keysOf(small)); g["ExclusiveLock"] != 32 || g["ShareLock"] != 0 {
		t.Errorf("small batch: per-key locks %v, want 32 exclusive", g)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// 40 messages of 40 flows (80 keys), then 5,000 messages of 16 flows:
	// the write key exclusive, nothing else.
	for _, big := range [][]receiver.Message{batch("m", 40, 40), batch("b", 5000, 16)} {
		done, release := run(big, func() bool {
			g, _ := heldLocks(t, obs, write)
			return g["ExclusiveLock"] == 1
		})
		if g, _ := heldLocks(t, obs, write); g["ExclusiveLock"] != 1 || g["ShareLock"] != 0 {
			t.Errorf("batch of %d: write key %v, want exclusive", len(big), g)
		}
		if g, _ := heldLocks(t, obs, keysOf(big)); len(g) != 0 {
			t.Errorf("batch of %d: per-key locks %v, want none", len(big), g)
		}
		if len(big) < 5000 {
			release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			continue
		}
		// A receive of another flow waits for it, on the write key.
		other := make(chan error, 1)
		go func() {
			_, err := s.Receive(ctx, msg("o-1", "other", 1, 7))
			other <- err
		}()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // a bound on a hang, not a timing
			if _, w := heldLocks(t, obs, write); w == 1 {
				break
			}
			select {
			case err := <-other:
				t.Fatalf("a receive went through while the big batch held the write key: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("no receive waiting on the write key")
			}
		}
		release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := <-other; err != nil {
			t.Fatal(err)
		}
	}
	fs, err := s.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	totals := map[string]int64{}
	for _, f := range fs {
		totals[f.Flow] = f.Total
	}
	if totals["b-f00"] != 314 || totals["b-f15"] != 312 || totals["other"] != 7 || totals["s-f00"] != 2 || totals["m-f39"] != 1 {
		t.Errorf("totals = %v, want b-f00 314, b-f15 312, other 7, s-f00 2, m-f39 1", totals)
	}
}
