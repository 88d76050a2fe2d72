package soak

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// backends are the backends the check tests run on; PostgreSQL's skip
// without a server (pgtest.Require), or fail with
// FAIRRELAY_REQUIRE_POSTGRES=1.
var backends = []string{BackendSQLite, BackendPostgres}

// fixture is a small final state built in this process: two producers'
// committed batches (poison events included) enqueued, then delivered to
// the receiver and settled, claim by claim, until nothing is dispatchable.
type fixture struct {
	dir       string
	stores    Stores
	producers []Producer
	now       clock.Tick
	q         queue.Store    // open for the fixture's life
	r         receiver.Store // open for the fixture's life
}

func newFixture(t *testing.T, backend string) *fixture {
	t.Helper()
	dir := t.TempDir()
	c := Config{Backend: backend, Dir: dir}
	if backend == BackendPostgres {
		c.Postgres = pgtest.Require(t)
	}
	stores, err := newStores(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dropStores(context.Background(), stores); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	pol := queue.DefaultPolicy()
	pol.MaxAttempts = 1 // a failure quarantines at once
	q, r, err := createStores(ctx, stores, pol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(); r.Close() })
	if err := writeStores(dir, stores); err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, stores: stores, now: 1, q: q, r: r}
	for id := 1; id <= 2; id++ {
		p := Producer{Queue: stores.Queue, Log: filepath.Join(dir, fmt.Sprintf("producer%d.log", id)), ID: id,
			Seed: 7, Flows: 3, Batch: 5, PoisonEvery: 2}
		f.producers = append(f.producers, p)
		for k := 1; k <= 3; k++ {
			if _, err := q.EnqueueBatch(ctx, p.Events(k), f.now); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(p.Log, []byte("1\n2\n3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.deliver(t, q, nil)
	return f
}

// deliver claims and settles every dispatchable event: accepted by the
// receiver, or failed (quarantined at once) when the receiver refuses it
// or fail names it.
func (f *fixture) deliver(t *testing.T, q queue.Store, fail func(id string) bool) {
	t.Helper()
	ctx := context.Background()
	r := f.r
	for {
		f.now++
		cs, err := q.ClaimBatch(ctx, f.now, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			at, ok, err := q.NextDue(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return
			}
			f.now = max(f.now, at)
			continue
		}
		// One receiver transaction per round, as the relay's inbox does.
		var ms []receiver.Message
		for _, c := range cs {
			if fail == nil || !fail(c.EventID) {
				ms = append(ms, receiver.Message{ID: c.EventID, Flow: c.Flow, Seq: c.Seq, Body: c.Body})
			}
		}
		results, err := r.ReceiveBatch(ctx, ms)
		if err != nil {
			t.Fatal(err)
		}
		var items []queue.SettleItem
		for _, c := range cs {
			res := queue.Result{OK: true}
			if fail != nil && fail(c.EventID) {
				res = queue.Result{Reason: "handler_error"}
			} else {
				br := results[0]
				results = results[1:]
				switch {
				case errors.Is(br.Err, receiver.ErrInvalidBody):
					res = queue.Result{Reason: "invalid_body"}
				case br.Err != nil:
					t.Fatal(br.Err)
				case br.Outcome != receiver.Accepted:
					t.Fatalf("%s: %s", c.EventID, br.Outcome)
				}
			}
			items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: res})
		}
		if _, err := q.SettleBatch(ctx, items, f.now); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) check(t *testing.T) Result {
	t.Helper()
	res, err := Check(context.Background(), f.stores, f.producers)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// exec runs statements on a store's database: the SQLite file, or the
// PostgreSQL schema (as the search path). Each may name one event ID as {id}.
func (f *fixture) exec(t *testing.T, target, id string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	if isPostgres(target) {
		conn, schema, err := pgTarget(target)
		if err != nil {
			t.Fatal(err)
		}
		c, err := pgx.Connect(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		stmts = append([]string{"SET search_path TO " + pgx.Identifier{schema}.Sanitize()}, stmts...)
		for _, s := range stmts {
			s = strings.ReplaceAll(s, "{id}", "'"+id+"'")
			if _, err := c.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		return
	}
	db, err := sql.Open("sqlite", target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		s = strings.ReplaceAll(s, "{id}", "'"+id+"'")
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func kinds(problems []string) []string {
	var out []string
	for _, p := range problems {
		k, _, _ := strings.Cut(p, ":")
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// A consistent final state passes every check, with the poison events
// (one per producer: batch 2) quarantined as injected, on each backend.
func TestCheck_Consistent(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixture(t, backend)
			res := f.check(t)
			if len(res.Problems) > 0 {
				t.Fatalf("problems on a consistent state:\n%s", strings.Join(res.Problems, "\n"))
			}
			want := Result{Events: 30, Flows: 3, Committed: 30, Acked: 28, Receipts: 28, Quarantined: 2, Injected: 2}
			if res.Events != want.Events || res.Flows != want.Flows || res.Committed != want.Committed || res.Acked != want.Acked ||
				res.Receipts != want.Receipts || res.Quarantined != want.Quarantined || res.Injected != want.Injected ||
				res.Lost != 0 || res.Duplicated != 0 || res.Stuck != 0 {
				t.Fatalf("result = %+v, want %+v", res, want)
			}
		})
	}
}

// Each way the final state can break is found, under its kind, and
// counted, on each backend: the same checks read both.
func TestCheck_FindsEachBreak(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		tamper func(t *testing.T, f *fixture)
		kinds  []string
		check  func(r Result) bool
		only   string // a backend the case exists on ("": both)
	}{
		"a batch logged as committed is not in the queue": {
			tamper: func(t *testing.T, f *fixture) {
				if err := os.WriteFile(f.producers[0].Log, []byte("1\n2\n3\n4\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			kinds: []string{"lost"},
			check: func(r Result) bool { return r.Lost == 5 },
		},
		"a receipt is missing": {
			tamper: func(t *testing.T, f *fixture) {
				f.exec(t, f.stores.Receiver, f.producers[0].Events(1)[1].ID, `DELETE FROM receipts WHERE id = {id}`)
			},
			kinds: []string{"lost", "order"},
			check: func(r Result) bool { return r.Lost == 1 && r.Receipts == 27 },
		},
		"a receipt committed out of order": {
			tamper: func(t *testing.T, f *fixture) {
				id := f.producers[0].Events(1)[1].ID
				if f.stores.Backend == BackendPostgres {
					// The commit log says it was committed last.
					f.exec(t, f.stores.Receiver, id, `UPDATE `+commitLog+` SET pos = pos + 1000000 WHERE id = {id}`)
					return
				}
				f.exec(t, f.stores.Receiver, id,
					`CREATE TABLE moved AS SELECT id, flow, seq, body, delta FROM receipts WHERE id = {id}`,
					`DELETE FROM receipts WHERE id = {id}`,
					`INSERT INTO receipts (id, flow, seq, body, delta) SELECT id, flow, seq, body, delta FROM moved`)
			},
			kinds: []string{"order"},
			check: func(r Result) bool { return r.Lost == 0 && r.Receipts == 28 },
		},
		"a receipt has no place in the commit log": {
			only: BackendPostgres,
			tamper: func(t *testing.T, f *fixture) {
				f.exec(t, f.stores.Receiver, f.producers[1].Events(3)[4].ID, `DELETE FROM `+commitLog+` WHERE id = {id}`)
			},
			kinds: []string{"order"},
			check: func(r Result) bool { return r.Lost == 0 && r.Receipts == 28 },
		},
		"a receipt pruned by the receiver's retention": {
			// Deleted with the flow's pruned mark raised over it, as
			// Prune does: the commit log still has it, nothing is lost.
			only: BackendPostgres,
			tamper: func(t *testing.T, f *fixture) {
				f.exec(t, f.stores.Receiver, f.producers[0].Events(1)[1].ID,
					`UPDATE flows SET pruned_through = (SELECT seq FROM receipts WHERE id = {id}) WHERE flow = (SELECT flow FROM receipts WHERE id = {id})`,
					`DELETE FROM receipts WHERE id = {id}`)
			},
			kinds: nil,
			check: func(r Result) bool { return r.Lost == 0 && r.Receipts == 28 },
		},
		"a delivery was answered gap": {
			// The queue handed the event out before its flow's earlier
			// one was received and the retry after that one's ack went
			// through: the receipts are a correct run's, the history
			// keeps the receiver's answer (written here as the relay
			// records it; the fixture's policy quarantines a failure).
			tamper: func(t *testing.T, f *fixture) {
				ev := f.producers[0].Events(4)[1]
				if _, err := f.q.Enqueue(ctx, ev, f.now); err != nil {
					t.Fatal(err)
				}
				f.deliver(t, f.q, nil)
				history := "history"
				if f.stores.Backend == BackendPostgres {
					history = "attempts"
				}
				f.exec(t, f.stores.Queue, ev.ID,
					`UPDATE events SET lifetime_attempts = 2 WHERE id = {id}`,
					`INSERT INTO `+history+` (event_id, generation, attempt, at, outcome, reason, error) VALUES ({id}, 1, 1, 1, 'retry_scheduled', '`+string(receiver.Gap)+`', '')`)
			},
			kinds: []string{"order"},
			check: func(r Result) bool { return r.Lost == 0 && r.Receipts == 29 && r.Retried == 1 },
		},
		"an event is left pending": {
			tamper: func(t *testing.T, f *fixture) {
				ev := f.producers[0].Events(4)[1]
				if _, err := f.q.Enqueue(ctx, ev, f.now); err != nil {
					t.Fatal(err)
				}
			},
			kinds: []string{"lost", "stuck", "total"},
			check: func(r Result) bool { return r.Stuck == 1 && r.Lost == 1 },
		},
		"an ordinary event is quarantined": {
			tamper: func(t *testing.T, f *fixture) {
				q := f.q
				ev := queue.Event{ID: eventID(1, 4, 0), Flow: "f0009", Body: []byte(`{"delta":3}`)}
				if _, err := q.Enqueue(ctx, ev, f.now); err != nil {
					t.Fatal(err)
				}
				f.deliver(t, q, func(id string) bool { return id == ev.ID })
			},
			kinds: []string{"lost", "quarantine", "total"},
			check: func(r Result) bool { return r.Quarantined == 3 && r.Injected == 2 },
		},
		"a receipt of an event never enqueued": {
			tamper: func(t *testing.T, f *fixture) {
				r := f.r
				next, err := r.NextExpected(ctx, "f0000")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Receive(ctx, receiver.Message{ID: "stranger", Flow: "f0000", Seq: next, Body: []byte(`{"delta":1}`)}); err != nil {
					t.Fatal(err)
				}
			},
			kinds: []string{"duplicated", "total"},
			check: func(r Result) bool { return r.Duplicated == 1 },
		},
		"a poison event is redriven": {
			tamper: func(t *testing.T, f *fixture) {
				if _, err := f.q.RedriveAll(ctx, queue.RedriveFilter{}, "test", f.now); err != nil {
					t.Fatal(err)
				}
			},
			kinds: []string{"audit", "injected", "stuck"},
			check: func(r Result) bool { return r.Stuck == 2 && r.Quarantined == 0 },
		},
		"the policy was changed": {
			tamper: func(t *testing.T, f *fixture) {
				q := f.q
				p, err := q.Policy(ctx)
				if err != nil {
					t.Fatal(err)
				}
				p.MaxAttempts = 2
				if err := q.SetPolicy(ctx, p, "test", f.now); err != nil {
					t.Fatal(err)
				}
			},
			kinds: []string{"audit"},
			check: func(r Result) bool { return r.Stuck == 0 && r.Lost == 0 },
		},
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			for name, c := range cases {
				if c.only != "" && c.only != backend {
					continue
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel() // at most -parallel (GOMAXPROCS) at once
					f := newFixture(t, backend)
					c.tamper(t, f)
					res := f.check(t)
					if got := kinds(res.Problems); !slices.Equal(got, c.kinds) {
						t.Errorf("problem kinds = %v, want %v\n%s", got, c.kinds, strings.Join(res.Problems, "\n"))
					}
					if !c.check(res) {
						t.Errorf("counts wrong: %+v", res)
					}
				})
			}
		})
	}
}

// CheckDir checks a run directory with the stores and producers Run wrote
// down, on each backend.
func TestCheckDir(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixture(t, backend)
			if _, err := CheckDir(context.Background(), f.dir); !errors.Is(err, ErrConfig) {
				t.Fatalf("CheckDir without %s = %v, want ErrConfig", ProducersFile, err)
			}
			if err := writeProducers(f.dir, f.producers); err != nil {
				t.Fatal(err)
			}
			res, err := CheckDir(context.Background(), f.dir)
			if err != nil || len(res.Problems) > 0 || res.Events != 30 {
				t.Fatalf("CheckDir = %+v, %v; want 30 events and no problems", res, err)
			}
			if err := os.WriteFile(f.producers[1].Log, []byte("1\n2\n3\n4\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if res, err := CheckDir(context.Background(), f.dir); err != nil || res.Lost != 5 {
				t.Fatalf("CheckDir after a log names an uncommitted batch = lost %d, %v; want 5 lost", res.Lost, err)
			}
		})
	}
}

// A kept PostgreSQL run's schemas are dropped by DropStores, and a
// directory whose stores file is broken is refused.
func TestDropStores(t *testing.T) {
	f := newFixture(t, BackendPostgres)
	if err := DropStores(context.Background(), f.dir); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{f.stores.Queue, f.stores.Receiver} {
		_, schema, err := pgTarget(target)
		if err != nil {
			t.Fatal(err)
		}
		if n := pgtest.SchemasWithPrefix(t, schema); n != 0 {
			t.Errorf("schema %s is still there after DropStores", schema)
		}
	}
	if err := os.WriteFile(filepath.Join(f.dir, StoresFile), []byte(`{"backend":"mysql"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := DropStores(context.Background(), f.dir); !errors.Is(err, ErrConfig) {
		t.Fatalf("DropStores with a broken %s = %v, want ErrConfig", StoresFile, err)
	}
}
