package pgreceiverstore

import (
	"context"
	"fmt"
	"testing"
	"time"

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
// receive goes on, and both are applied.
func TestReceiveBatch_LockEscalation(t *testing.T) {
	ctx := context.Background()
	inHook := make(chan struct{}, 1)
	release := make(chan struct{})
	stop := make(chan struct{}) // closed when the test ends: a failed test lets a held batch go
	var hold bool
	s, url, _ := open(t, WithHook(func(receiver.HookPoint) {
		if hold {
			hold = false
			inHook <- struct{}{}
			select {
			case <-release:
			case <-stop:
			}
		}
	}))
	t.Cleanup(func() { close(stop) }) // before the store's Close
	obs, err := pgxpool.New(ctx, url)
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
	batch := func(prefix string, n int) []receiver.Message {
		ms := make([]receiver.Message, n)
		for i := range ms {
			ms[i] = msg(fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("%s-f%02d", prefix, i%16), int64(i/16+1), 1)
		}
		return ms
	}
	// run receives ms in a goroutine held in the hook until release.
	run := func(ms []receiver.Message) chan error {
		hold = true
		done := make(chan error, 1)
		go func() {
			_, err := s.ReceiveBatch(ctx, ms)
			done <- err
		}()
		select {
		case <-inHook:
		case err := <-done:
			t.Fatalf("ReceiveBatch returned %v before its hook", err)
		}
		return done
	}

	// 16 messages of 16 flows: 32 keys, each locked, the write key shared.
	small := batch("s", 16)
	done := run(small)
	if g, _ := heldLocks(t, obs, write); g["ShareLock"] != 1 || g["ExclusiveLock"] != 0 {
		t.Errorf("small batch: write key %v, want shared", g)
	}
	if g, _ := heldLocks(t, obs, keysOf(small)); g["ExclusiveLock"] != 32 {
		t.Errorf("small batch: per-key locks %v, want 32 exclusive", g)
	}
	release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// 5,000 messages of 16 flows: the write key exclusive, nothing else.
	big := batch("b", 5000)
	release = make(chan struct{})
	done = run(big)
	if g, _ := heldLocks(t, obs, write); g["ExclusiveLock"] != 1 || g["ShareLock"] != 0 {
		t.Errorf("big batch: write key %v, want exclusive", g)
	}
	if g, _ := heldLocks(t, obs, keysOf(big)); len(g) != 0 {
		t.Errorf("big batch: per-key locks %v, want none", g)
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
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	fs, err := s.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	totals := map[string]int64{}
	for _, f := range fs {
		totals[f.Flow] = f.Total
	}
	if totals["b-f00"] != 313 || totals["b-f15"] != 312 || totals["other"] != 7 || totals["s-f00"] != 1 {
		t.Errorf("totals = %v, want b-f00 313, b-f15 312, other 7, s-f00 1", totals)
	}
}
