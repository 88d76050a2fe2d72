package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

// The PostgreSQL hold on a sharded queue is a session advisory lock, and a
// session can end under the process (docs/contract.md §7.10: changing N
// is offline, so no reshard may run beside a writer). These tests end the
// sessions with pg_terminate_backend, as a server's idle_session_timeout,
// a restart or a cut network would, and check that a reshard still never
// runs beside a writer: the writer takes its hold again, or stops.

// shortHoldChecks makes holds check their connection every d while t runs.
func shortHoldChecks(t *testing.T, d time.Duration) {
	old := holdCheckInterval
	holdCheckInterval = d
	t.Cleanup(func() { holdCheckInterval = old })
}

// pgWriter opens the sharded queue q as a writing command does, in an env
// whose context a lost hold ends (as relayctl's main makes it): the env,
// the opened queue, and what the env's logger wrote.
func pgWriter(t *testing.T, q string) (*env, shardedLib, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	e := newEnv(strings.NewReader(""), &syncBuffer{}, log)
	e.queuePath = q
	t.Cleanup(e.abortable())
	s, err := e.shardedStore(shardMode{hold: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return e, s, log
}

// baseOf is the base schema of a PostgreSQL --queue.
func baseOf(t *testing.T, q string) string {
	t.Helper()
	_, base, err := pgTarget(q, "", "queue")
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// lockHolders are the sessions that hold base's hold in mode (ShareLock,
// ExclusiveLock), or wait for it when granted is false.
func lockHolders(t *testing.T, base, mode string, granted bool) []int {
	t.Helper()
	rows, err := pgtest.Pool(t).Query(context.Background(), `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND mode = $2 AND granted = $3
		AND objsubid = 2 AND classid = $4::bigint::oid AND objid = (hashtext($1)::bigint & 4294967295)::oid
		ORDER BY pid`, pgLockKey(base), mode, granted, pgLockClass)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return pids
}

// endSessions ends the sessions pids, as a server that drops them does.
func endSessions(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		// With a timeout, pg_terminate_backend waits for the session to
		// end: its locks are gone when it returns.
		if _, err := pgtest.Pool(t).Exec(context.Background(), `SELECT pg_terminate_backend($1, 60000)`, pid); err != nil {
			t.Fatal(err)
		}
	}
}

// endWriterSessions ends every session that holds base's hold shared (the
// writer's, in these tests) and returns how many there were.
func endWriterSessions(t *testing.T, base string) int {
	t.Helper()
	pids := lockHolders(t, base, "ShareLock", true)
	if len(pids) == 0 {
		t.Fatal("no session holds the queue's hold shared")
	}
	endSessions(t, pids)
	return len(pids)
}

// exclusiveWaiter asks for base's hold exclusive on a session of its own,
// waiting (as a reshard that came first would hold it), and returns once
// the request waits behind the writer. granted is closed when the server
// grants it; the session ends with t.
func exclusiveWaiter(t *testing.T, base string) (granted <-chan struct{}) {
	t.Helper()
	return exclusiveRequest(t, base, false)
}

// exclusiveRequest is exclusiveWaiter, which also returns once the
// request was granted when orGranted is set: a writer that makes new
// connections (a relay starting) stops as soon as an exclusive request
// waits, since PostgreSQL refuses new shared try-locks behind it.
func exclusiveRequest(t *testing.T, base string, orGranted bool) (granted <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	c, err := pgtest.Pool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($2::int4, hashtext($1))`, pgLockKey(base), pgLockClass); err != nil {
			t.Errorf("the exclusive request: %v", err)
		}
	}()
	t.Cleanup(func() {
		<-done
		c.Conn().Close(ctx) // ends the session, and its lock
		c.Release()
	})
	waitFor(t, time.Minute, "the exclusive request to wait", func() bool {
		if orGranted {
			select {
			case <-done:
				return true
			default:
			}
		}
		return len(lockHolders(t, base, "ExclusiveLock", false)) > 0
	})
	return done
}

// exclusiveFree reports whether a reshard could take base's hold now (it
// takes it and gives it back at once).
func exclusiveFree(t *testing.T, pool *pgxpool.Pool, base string) bool {
	t.Helper()
	h, err := holdPG(context.Background(), pool, base, true)
	if errors.Is(err, errHeld) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	return true
}

// A writer whose sessions all end (its hold's own among them) takes the
// hold again on a new session at its next check, and goes on: a reshard
// is refused again, and the process was not stopped.
func TestPGHold_TakenAgainAfterItsSessionEnds(t *testing.T) {
	shortHoldChecks(t, 50*time.Millisecond)
	q := pgShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	base := baseOf(t, q)
	e, s, log := pgWriter(t, q)
	n := endWriterSessions(t, base)
	t.Logf("ended the writer's %d sessions", n)
	waitFor(t, 30*time.Second, "the writer to take its hold again", func() bool {
		return len(lockHolders(t, base, "ShareLock", true)) > 0
	})
	if exclusiveFree(t, pgtest.Pool(t), base) {
		t.Error("a reshard could take the hold beside the writer that took it again")
	}
	if err := context.Cause(e.ctx); err != nil {
		t.Errorf("the writer was stopped: %v", err)
	}
	// The pool's other connections ended too: a write may fail on each
	// dead one once (as a relay's call does, and is tried again), then
	// gets through on a new connection.
	var err error
	for try := 0; try < 10; try++ {
		if _, err = s.Enqueue(e.ctx, queue.Event{ID: "after", Flow: "f", Body: []byte(`{"delta":1}`)}, 1); err == nil {
			break
		}
	}
	if err != nil {
		t.Errorf("enqueue after the hold was taken again: %v", err)
	}
	t.Logf("the writer's log:\n%s", log)
}

// A server's idle_session_timeout shorter than the writer's idle spells
// ends the sessions the writer does not use: the hold's own connection,
// checked every holdCheckInterval, is never idle that long, so a reshard
// stays refused while the writer runs.
func TestPGHold_OutlivesIdleSessionTimeout(t *testing.T) {
	shortHoldChecks(t, 200*time.Millisecond)
	url, base := pgtest.Schema(t)
	dropShardSchemas(t, base)
	mustPG(t, pgURL(t, url, base), "", "shards", "create", "--count", "2")
	q := pgURL(t, url, base, "idle_session_timeout", "2000") // milliseconds
	e, _, _ := pgWriter(t, q)
	time.Sleep(5 * time.Second) // the writer idles: two and a half timeouts
	if exclusiveFree(t, pgtest.Pool(t), base) {
		t.Error("a reshard could take the hold of a writer that idled past the server's idle_session_timeout")
	}
	if err := context.Cause(e.ctx); err != nil {
		t.Errorf("the writer was stopped: %v", err)
	}
}

// A writer whose sessions all end while a reshard waits for the hold
// exclusive (the reshard gets it as they end) cannot take it again: the
// process's context ends with errHoldLost, and no write gets through.
func TestPGHold_LostToAReshardStopsTheProcess(t *testing.T) {
	shortHoldChecks(t, 50*time.Millisecond)
	q := pgShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	mustPG(t, q, "", "enqueue", "--id", "before", "--flow", "f", "--body", `{"delta":1}`)
	base := baseOf(t, q)
	e, s, log := pgWriter(t, q)
	granted := exclusiveWaiter(t, base)
	endWriterSessions(t, base)
	select {
	case <-granted:
	case <-time.After(time.Minute):
		t.Fatal("the exclusive request was not granted once the writer's sessions ended")
	}
	select {
	case <-e.ctx.Done():
		if err := context.Cause(e.ctx); !errors.Is(err, errHoldLost) {
			t.Errorf("the writer's context ended with %v, want errHoldLost", err)
		} else {
			t.Logf("the writer's context ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the writer's context did not end after it lost its hold to a reshard\n%s", log)
	}
	// Even a write that does not look at the context (a relay's settle in
	// its shutdown grace) is refused: its connection cannot take the hold.
	ctx := context.WithoutCancel(e.ctx)
	for try := 0; try < 10; try++ {
		_, err := s.Enqueue(ctx, queue.Event{ID: fmt.Sprint("lost-", try), Flow: "f", Body: []byte(`{"delta":1}`)}, 1)
		if err == nil {
			t.Fatalf("enqueue %d got through while a reshard holds the queue", try)
		}
		if errors.Is(err, errHeld) {
			break // the refusal; before it, a dead connection's failure
		}
	}
	if !strings.Contains(log.String(), errHoldLost.Error()) {
		t.Errorf("the writer's log does not say that it lost its hold:\n%s", log)
	}
}

// A writer that had no session while a whole reshard ran (a server
// restart in between, say) finds the set swapped when it connects again,
// and writes nothing there: it opened the old set, and would put a flow in
// the shard of the old count.
func TestPGHold_RefusesASwappedSet(t *testing.T) {
	shortHoldChecks(t, time.Hour) // only a new connection finds it out
	q := pgShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	mustPG(t, q, "", "enqueue", "--id", "before", "--flow", "f", "--body", `{"delta":1}`)
	base := baseOf(t, q)
	e, s, _ := pgWriter(t, q)
	endWriterSessions(t, base)
	mustPG(t, q, "", "reshard", "--to", "3", "--reason", "while the writer had no session")
	// A flow whose shard differs between 2 and 3 shards.
	flow := ""
	for i := 0; flow == ""; i++ {
		if f := fmt.Sprint("tenant-", i); shard.Of(f, 2) != shard.Of(f, 3) {
			flow = f
		}
	}
	ctx := context.WithoutCancel(e.ctx)
	for try := 0; try < 10; try++ {
		_, err := s.Enqueue(ctx, queue.Event{ID: fmt.Sprint("stale-", try), Flow: flow, Body: []byte(`{"delta":1}`)}, 1000)
		if err == nil {
			t.Fatalf("enqueue %d into the swapped set got through: flow %s went to shard %d of the 3, its shard is %d",
				try, flow, shard.Of(flow, 2), shard.Of(flow, 3))
		}
		if errors.Is(err, errSetChanged) {
			break
		}
	}
	if err := context.Cause(e.ctx); !errors.Is(err, errHoldLost) || !errors.Is(err, errSetChanged) {
		t.Errorf("the writer's context: %v, want errHoldLost for errSetChanged", err)
	}
}

// A relay that loses its hold to a reshard stops and exits non-zero,
// saying so.
func TestPGHold_RelayStopsWhenItsHoldIsLost(t *testing.T) {
	shortHoldChecks(t, 50*time.Millisecond)
	q := pgShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	base := baseOf(t, q)
	_, url := newDeliveries(t)
	stderr, stdout := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- runContext(context.Background(), []string{"--queue", q, "relay", "--to", url, "--secret", "s", "--poll", "100ms"},
			strings.NewReader(""), stdout, stderr)
	}()
	waitFor(t, time.Minute, "the relay to start", func() bool { return strings.Contains(stderr.String(), "msg=relaying") })
	// The relay may stop as soon as the request waits (a connection it
	// makes meanwhile is refused), or once its sessions are ended here.
	granted := exclusiveRequest(t, base, true)
	endSessions(t, lockHolders(t, base, "ShareLock", true))
	<-granted
	select {
	case code := <-done:
		if code != exitFail || !strings.Contains(stderr.String(), "relayctl relay: "+errHoldLost.Error()) {
			t.Errorf("relay: exit %d, want %d naming the lost hold\n%s", code, exitFail, stderr)
		}
		if !strings.Contains(stdout.String(), "relay stopped (lost its hold on the sharded queue)") {
			t.Errorf("relay's summary: %q", stdout)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the relay still runs after it lost its hold to a reshard\n%s", stderr)
	}
}

// A reshard whose own session (the one holding the hold exclusive) ends
// before its swap commits does not swap: a writer may have taken the hold
// since and written into the old set after the copy. Here the swap waits
// (another session's uncommitted CREATE SCHEMA takes the name the second
// old shard is renamed to); meanwhile the reshard's session ends and a
// writer enqueues; then the name is given back, so the swap would commit.
func TestReshard_Postgres_SwapOnlyUnderTheHold(t *testing.T) {
	shortHoldChecks(t, time.Hour) // the swap itself must find it out
	q := pgShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	mustPG(t, q, "", "enqueue", "--id", "a", "--flow", "tenant-a", "--body", `{"delta":1}`)
	base := baseOf(t, q)
	taken := shardSchema(base+"_before_epoch_0", 1)
	code, errs := runWhileSchemaHeld(t, q, taken, func() {
		endSessions(t, lockHolders(t, base, "ExclusiveLock", true))
		mustPG(t, q, "", "enqueue", "--id", "b", "--flow", "tenant-b", "--body", `{"delta":1}`)
	}, false, "reshard", "--to", "3", "--reason", "more tenants")
	if code == exitOK {
		t.Errorf("reshard swapped after its hold's session ended:\n%s", errs)
	} else if !strings.Contains(errs, "the queue is unchanged") {
		t.Errorf("reshard: exit %d, want the queue unchanged:\n%s", code, errs)
	}
	if st := statusOf(t, q); st.EventsByState.Pending != 2 {
		t.Errorf("the queue after the reshard: %+v, want both events pending (b was written after the copy)", st)
	}
}
