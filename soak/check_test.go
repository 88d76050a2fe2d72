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

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// fixture is a small final state built in this process: two producers'
// committed batches (poison events included) enqueued, then delivered to
// the receiver and settled, claim by claim, until nothing is dispatchable.
type fixture struct {
	dir, queue, receiver string
	producers            []Producer
	now                  clock.Tick
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, queue: filepath.Join(dir, "queue.db"), receiver: filepath.Join(dir, "receiver.db"), now: 1}
	ctx := context.Background()
	pol := queuestore.DefaultPolicy()
	pol.MaxAttempts = 1 // a failure quarantines at once
	q, err := queuestore.Open(f.queue, queuestore.WithPolicy(pol))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for id := 1; id <= 2; id++ {
		p := Producer{Queue: f.queue, Log: filepath.Join(dir, fmt.Sprintf("producer%d.log", id)), ID: id,
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
// receiver, or failed (quarantined) when the receiver refuses it or fail
// names it.
func (f *fixture) deliver(t *testing.T, q *queuestore.Store, fail func(id string) bool) {
	t.Helper()
	ctx := context.Background()
	r, err := receiverstore.Open(f.receiver)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		f.now++
		cs, err := q.ClaimBatch(ctx, f.now, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			return
		}
		var items []queuestore.SettleItem
		for _, c := range cs {
			res := queuestore.Result{OK: true}
			if fail != nil && fail(c.EventID) {
				res = queuestore.Result{Reason: "handler_error"}
			} else if _, err := r.Receive(ctx, receiverstore.Message{ID: c.EventID, Flow: c.Flow, Seq: c.Seq, Body: c.Body}); err != nil {
				if !errors.Is(err, receiverstore.ErrInvalidBody) {
					t.Fatal(err)
				}
				res = queuestore.Result{Reason: "invalid_body"}
			}
			items = append(items, queuestore.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: res})
		}
		if _, err := q.SettleBatch(ctx, items, f.now); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) check(t *testing.T) Result {
	t.Helper()
	res, err := Check(context.Background(), f.queue, f.receiver, f.producers)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *fixture) exec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
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
// (one per producer: batch 2) quarantined as injected.
func TestCheck_Consistent(t *testing.T) {
	f := newFixture(t)
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
}

// Each way the final state can break is found, under its kind, and counted.
func TestCheck_FindsEachBreak(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		tamper func(t *testing.T, f *fixture)
		kinds  []string
		check  func(r Result) bool
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
				id := f.producers[0].Events(1)[1].ID
				f.exec(t, f.receiver, `DELETE FROM receipts WHERE id = '`+id+`'`)
			},
			kinds: []string{"lost", "order"},
			check: func(r Result) bool { return r.Lost == 1 && r.Receipts == 27 },
		},
		"a receipt committed out of order": {
			tamper: func(t *testing.T, f *fixture) {
				id := f.producers[0].Events(1)[1].ID
				f.exec(t, f.receiver,
					`CREATE TABLE moved AS SELECT id, flow, seq, body, delta FROM receipts WHERE id = '`+id+`'`,
					`DELETE FROM receipts WHERE id = '`+id+`'`,
					`INSERT INTO receipts (id, flow, seq, body, delta) SELECT id, flow, seq, body, delta FROM moved`)
			},
			kinds: []string{"order"},
			check: func(r Result) bool { return r.Lost == 0 && r.Receipts == 28 },
		},
		"an event is left pending": {
			tamper: func(t *testing.T, f *fixture) {
				q, err := queuestore.Open(f.queue)
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close()
				ev := f.producers[0].Events(4)[1]
				if _, err := q.Enqueue(ctx, ev, f.now); err != nil {
					t.Fatal(err)
				}
			},
			kinds: []string{"lost", "stuck", "total"},
			check: func(r Result) bool { return r.Stuck == 1 && r.Lost == 1 },
		},
		"an ordinary event is quarantined": {
			tamper: func(t *testing.T, f *fixture) {
				q, err := queuestore.Open(f.queue)
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close()
				ev := queuestore.Event{ID: eventID(1, 4, 0), Flow: "f0009", Body: []byte(`{"delta":3}`)}
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
				r, err := receiverstore.Open(f.receiver)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				next, err := r.NextExpected(ctx, "f0000")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Receive(ctx, receiverstore.Message{ID: "stranger", Flow: "f0000", Seq: next, Body: []byte(`{"delta":1}`)}); err != nil {
					t.Fatal(err)
				}
			},
			kinds: []string{"duplicated", "total"},
			check: func(r Result) bool { return r.Duplicated == 1 },
		},
		"a poison event is not quarantined": {
			tamper: func(t *testing.T, f *fixture) {
				q, err := queuestore.Open(f.queue)
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close()
				if _, err := q.RedriveAll(ctx, queuestore.RedriveFilter{}, "test", f.now); err != nil {
					t.Fatal(err)
				}
			},
			kinds: []string{"injected", "stuck"},
			check: func(r Result) bool { return r.Stuck == 2 && r.Quarantined == 0 },
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
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
}

// CheckDir checks a run directory with the producers Run wrote down.
func TestCheckDir(t *testing.T) {
	f := newFixture(t)
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
}
