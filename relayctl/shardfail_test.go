package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgtest"
)

// Closing a PostgreSQL hold twice does nothing the second time: the first
// Close gave the hold's connection back to the pool, which must not be
// used after that (pgxpool panics on it).
func TestPGHold_CloseTwice(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, base := pgtest.Schema(t)
	h, err := holdPG(ctx, pool, base, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("the second Close panicked: %v", r)
			}
		}()
		if err := h.Close(); err != nil {
			t.Errorf("the second Close: %v", err)
		}
	}()
	x, err := holdPG(ctx, pool, base, true)
	if err != nil {
		t.Fatalf("the exclusive hold after Close: %v", err)
	}
	x.Close()
}

// closeThen is a queue library whose Close runs then once it has closed
// the library: a test's way into the gap between a reopen in real time
// closing the old store and opening the new one.
type closeThen struct {
	queueLib
	then func()
}

func (c closeThen) Close() error {
	err := c.queueLib.Close()
	c.then()
	return err
}

// A reopen in real time (a write command on a real-time queue) that fails
// after it closed the old store, here because a reshard took the queue's
// lock in the gap, fails the command with that error and leaves nothing
// to close twice: closing the sharded queue's hold again panicked on
// PostgreSQL and failed on SQLite.
func TestUseRealTime_ReopenFailsInTheGap(t *testing.T) {
	for _, tc := range []struct {
		name string
		// create makes the queue and returns its --queue.
		create func(t *testing.T) string
		// open opens it as a command does.
		open func(e *env) (*queueDB, error)
		// gap makes the reopen fail; the test closes what it returns.
		gap  func(t *testing.T, q string) io.Closer
		want error
	}{{
		name: "SQLite shards",
		create: func(t *testing.T) string {
			q := sqliteShardedQueue(t)
			mustPG(t, q, "", "shards", "create", "--count", "2")
			return q
		},
		open: func(e *env) (*queueDB, error) { return e.openQueue(false) },
		gap: func(t *testing.T, q string) io.Closer {
			h, err := holdSQLite(q, true) // as reshard holds it
			if err != nil {
				t.Errorf("the exclusive hold in the gap: %v", err)
				return io.NopCloser(nil)
			}
			return h
		},
		want: errReshardUnderWay,
	}, {
		name: "PostgreSQL shards",
		create: func(t *testing.T) string {
			q := pgShardedQueue(t)
			mustPG(t, q, "", "shards", "create", "--count", "2")
			return q
		},
		open: func(e *env) (*queueDB, error) { return e.openQueue(false) },
		gap: func(t *testing.T, q string) io.Closer {
			_, base, err := pgTarget(q, "", "queue")
			if err != nil {
				t.Fatal(err)
			}
			h, err := holdPG(context.Background(), pgtest.Pool(t), base, true) // as reshard holds it
			if err != nil {
				t.Errorf("the exclusive hold in the gap: %v", err)
				return io.NopCloser(nil)
			}
			return h
		},
		want: errReshardUnderWay,
	}, {
		name: "SQLite file, read-only",
		create: func(t *testing.T) string {
			q := filepath.Join(t.TempDir(), "q.db")
			mustPG(t, q, "", "enqueue", "--id", "a", "--flow", "f", "--body", "x")
			return q
		},
		open: func(e *env) (*queueDB, error) { return e.readQueue() },
		gap: func(t *testing.T, q string) io.Closer {
			if err := os.Remove(q); err != nil {
				t.Error(err)
			}
			return io.NopCloser(nil)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.create(t)
			e := newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{})
			e.queuePath = q
			qdb, err := tc.open(e)
			if err != nil {
				t.Fatal(err)
			}
			var undo io.Closer
			qdb.s = closeThen{queueLib: qdb.s, then: func() {
				if undo == nil {
					undo = tc.gap(t, q)
				}
			}}
			_, err = currentTick(e.ctx, qdb, tickFlag{clock: &clockConfig{mode: clockWall, skew: defaultSkew, wall: clock.Wall{}}})
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("currentTick with the reopen failing: %v, want %v", err, tc.want)
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("Close after the failed reopen panicked: %v", r)
					}
				}()
				if err := qdb.Close(); err != nil {
					t.Errorf("Close after the failed reopen: %v", err)
				}
			}()
			if undo == nil {
				t.Fatal("the reopen did not close the old store")
			}
			if err := undo.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A reshard that fails before its swap removes the new set it made, and
// only that: the queue is unchanged, and a schema that another session
// made under a name the reshard wanted stays. The other session's
// uncommitted CREATE SCHEMA makes the reshard's own CREATE (of its second
// new shard) or RENAME (of the second old shard aside, in the swap) wait,
// then fail once it commits.
func TestReshard_Postgres_FailureBeforeSwap(t *testing.T) {
	for _, tc := range []struct {
		name string
		// taken is the name the other session takes; want what the
		// reshard's error says first.
		taken func(base string) string
		want  func(base string) string
	}{{
		name:  "create part way",
		taken: func(base string) string { return shardSchema(base+"_next", 1) },
		want:  func(base string) string { return "create shard " + shardSchema(base+"_next", 1) },
	}, {
		name:  "swap",
		taken: func(base string) string { return shardSchema(base+"_before_epoch_0", 1) },
		want:  func(string) string { return "swap the schemas" },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			q := pgShardedQueue(t)
			mustPG(t, q, "", "shards", "create", "--count", "2")
			mustPG(t, q, "", "enqueue", "--id", "a", "--flow", "tenant-a", "--body", `{"delta":1}`)
			mustPG(t, q, "", "enqueue", "--id", "b", "--flow", "tenant-b", "--body", `{"delta":1}`)
			before := statusOf(t, q)
			_, base, err := pgTarget(q, "", "queue")
			if err != nil {
				t.Fatal(err)
			}
			taken := tc.taken(base)
			code, errs := runWhileSchemaTaken(t, q, taken, "reshard", "--to", "3", "--reason", "more tenants")
			want := tc.want(base)
			if code != exitFail || !strings.Contains(errs, want) || !strings.Contains(errs, "the queue is unchanged") {
				t.Errorf("reshard: exit %d, want %d with %q and \"the queue is unchanged\"\n%s", code, exitFail, want, errs)
			}
			left := schemasOf(t, base)
			keep := []string{shardSchema(base, 0), shardSchema(base, 1), taken}
			slices.Sort(keep)
			if !slices.Equal(left, keep) {
				t.Errorf("schemas after the failed reshard: %v, want %v", left, keep)
			}
			if st := statusOf(t, q); st != before {
				t.Errorf("the failed reshard changed the queue: %+v, was %+v", st, before)
			}
		})
	}
}

// A SQLite reshard interrupted between the two renames of its swap leaves
// no queue directory, the old set as DIR.before-epoch-K and the new one
// as DIR.resharding. Enqueue and shards create, which make a new queue at
// a path that does not exist, refuse there, name the leftover and create
// nothing at DIR: a new queue there would hold events outside both sets
// and block renaming one of them back, the documented recovery.
func TestReshard_SQLite_InterruptedSwap(t *testing.T) {
	for _, tc := range []struct {
		name string
		// keep is which of the reshard's side paths the crash left.
		keepOld, keepNew bool
	}{
		{name: "both sets", keepOld: true, keepNew: true},
		{name: "old set only", keepOld: true},
		{name: "new set only", keepNew: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := sqliteShardedQueue(t)
			mustPG(t, q, "", "shards", "create", "--count", "2")
			mustPG(t, q, "", "enqueue", "--id", "a", "--flow", "tenant-a", "--body", `{"delta":1}`)
			mustPG(t, q, "", "reshard", "--to", "3", "--reason", "more tenants")
			// Undo the swap's second rename: the state of a crash between
			// the two.
			old, next := q+".before-epoch-0", q+".resharding"
			if err := os.Rename(q, next); err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, p := range []struct {
				path string
				keep bool
			}{{next, tc.keepNew}, {old, tc.keepOld}} {
				if p.keep {
					left = append(left, p.path)
				} else if err := os.Rename(p.path, filepath.Join(t.TempDir(), "elsewhere")); err != nil {
					t.Fatal(err)
				}
			}
			for _, args := range [][]string{
				{"enqueue", "--id", "b", "--flow", "tenant-b", "--body", `{"delta":1}`},
				{"shards", "create", "--count", "2"},
			} {
				code, _, errs := runPG(t, q, "", args...)
				if code != exitFail || !strings.Contains(errs, "a reshard left") || !strings.Contains(errs, "rename one of them back") {
					t.Errorf("%s with no %s: exit %d, want %d with \"a reshard left\" and \"rename one of them back\"\n%s",
						args[0], q, code, exitFail, errs)
				}
				for _, p := range left {
					if !strings.Contains(errs, p) {
						t.Errorf("%s: the message does not name %s:\n%s", args[0], p, errs)
					}
				}
				if _, err := os.Lstat(q); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s created %s (%v): want nothing there", args[0], q, err)
					if err := os.RemoveAll(q); err != nil { // for the next command
						t.Fatal(err)
					}
				}
			}
			if !tc.keepOld {
				return
			}
			// The documented recovery: rename the old set back.
			if err := os.Rename(old, q); err != nil {
				t.Fatal(err)
			}
			mustPG(t, q, "", "enqueue", "--id", "b", "--flow", "tenant-b", "--body", `{"delta":1}`)
			if st := statusOf(t, q); st.EventsByState.Pending != 2 {
				t.Errorf("after renaming the old set back: %+v, want 2 pending", st)
			}
		})
	}
}

// A PostgreSQL reshard that stopped before its swap (killed, say) leaves
// its new set, schemas BASE_next_sNNN, beside a queue that is whole: the
// swap is one transaction, so the queue's schemas are never missing as a
// SQLite queue's directory is between its two renames. Writers go on
// (nothing to refuse, unlike refuseReshardLeftover's case), and only the
// next reshard refuses, naming the leftover, until it is dropped.
func TestReshard_Postgres_LeftoverNewSet(t *testing.T) {
	q := pgShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	mustPG(t, q, "", "enqueue", "--id", "a", "--flow", "tenant-a", "--body", `{"delta":1}`)
	base := baseOf(t, q)
	url, _, err := pgTarget(q, "", "queue")
	if err != nil {
		t.Fatal(err)
	}
	mustPG(t, pgURL(t, url, base+"_next"), "", "shards", "create", "--count", "3") // the leftover
	mustPG(t, q, "", "enqueue", "--id", "b", "--flow", "tenant-b", "--body", `{"delta":1}`)
	if st := statusOf(t, q); st.EventsByState.Pending != 2 {
		t.Errorf("the queue beside a leftover new set: %+v, want 2 pending", st)
	}
	before := schemasOf(t, base)
	code, _, errs := runPG(t, q, "", "reshard", "--to", "3", "--reason", "more tenants")
	if code != exitFail || !strings.Contains(errs, shardSchema(base+"_next", 0)) || !strings.Contains(errs, "already exist") {
		t.Errorf("reshard beside a leftover new set: exit %d, want %d naming %s\n%s", code, exitFail, shardSchema(base+"_next", 0), errs)
	}
	if after := schemasOf(t, base); !slices.Equal(after, before) {
		t.Errorf("schemas after the refused reshard: %v, want %v", after, before)
	}
}

// Shards create on PostgreSQL that fails part way drops the schemas it
// made, and only those: a schema that another session made under a name
// it wanted stays. The other session's uncommitted CREATE SCHEMA makes
// the create of the second shard wait, then fail once it commits.
func TestShardsCreate_Postgres_FailurePartWay(t *testing.T) {
	q := pgShardedQueue(t)
	_, base, err := pgTarget(q, "", "queue")
	if err != nil {
		t.Fatal(err)
	}
	taken := shardSchema(base, 1)
	code, errs := runWhileSchemaTaken(t, q, taken, "shards", "create", "--count", "3")
	want := "create shard " + taken
	if code != exitFail || !strings.Contains(errs, want) {
		t.Errorf("shards create: exit %d, want %d with %q\n%s", code, exitFail, want, errs)
	}
	left := schemasOf(t, base)
	if want := []string{taken}; !slices.Equal(left, want) {
		t.Errorf("schemas after the failed create: %v, want %v", left, want)
	}
}

// runWhileSchemaTaken runs relayctl args on q while another session's
// uncommitted CREATE SCHEMA holds the name taken: once the command waits
// for it, the session commits, so the command's own CREATE or RENAME of
// that name fails. It returns the command's exit code and stderr.
func runWhileSchemaTaken(t *testing.T, q, taken string, args ...string) (int, string) {
	t.Helper()
	return runWhileSchemaHeld(t, q, taken, nil, true, args...)
}

// runWhileSchemaHeld runs relayctl args on q while another session's
// uncommitted CREATE SCHEMA holds the name taken; once the command waits
// for it, meanwhile runs (when set), then the session commits (the
// command's CREATE or RENAME of that name fails) or, unless commit, rolls
// back (the name is free again and the command goes on). It returns the
// command's exit code and stderr.
func runWhileSchemaHeld(t *testing.T, q, taken string, meanwhile func(), commit bool, args ...string) (int, string) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit or Rollback, a no-op
	if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{taken}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code int
		errs string
	}
	done := make(chan result, 1)
	go func() {
		code, _, errs := runPG(t, q, "", args...)
		done <- result{code, errs}
	}()
	waitFor(t, time.Minute, args[0]+" to wait for schema "+taken, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`, taken).Scan(&n)
		return err == nil && n > 0
	})
	if meanwhile != nil {
		meanwhile()
	}
	end := tx.Rollback
	if commit {
		end = tx.Commit
	}
	if err := end(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	return r.code, r.errs
}

// schemasOf lists the schemas whose names start with base_, in order.
func schemasOf(t *testing.T, base string) []string {
	t.Helper()
	rows, err := pgtest.Pool(t).Query(context.Background(), `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1) ORDER BY nspname`, base+"_")
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return left
}
