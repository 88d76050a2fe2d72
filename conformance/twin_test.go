package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// The experiment's golden files are JSON snapshots. Random sequences of
// every operation, applied to a SQLite store and to a PostgreSQL store
// (the PostgreSQL twin takes each ClaimBatch as successive Claims), leave
// snapshots that encode to the same JSON bytes after every step, and both
// agree with the reference model.
func TestTwin_SQLiteAndPostgresSnapshotsEncodeTheSame(t *testing.T) {
	pgtest.Require(t)
	ctx := context.Background()
	seeds := uint64(60)
	if raceDetector {
		seeds = 15
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		lite, err := queuestore.Open(filepath.Join(t.TempDir(), "queue.db"))
		if err != nil {
			t.Fatal(err)
		}
		_, schema := pgtest.Schema(t)
		pg, err := pgqueuestore.OpenPool(ctx, pgtest.Pool(t), pgqueuestore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		r := &runner{s: lite, twin: pg, m: newModel(), c: randChooser{rand.New(rand.NewPCG(seed, 7))}}
		for i := 0; i < 25; i++ {
			if err := r.step(ctx); err != nil {
				t.Fatalf("seed %d step %d: %v\nsteps:\n  %s", seed, i, err, strings.Join(r.log, "\n  "))
			}
			a, err := r.s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b, err := r.twin.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Fatalf("seed %d step %d: JSON differs\nsqlite   %s\npostgres %s\nsteps:\n  %s", seed, i, ja, jb,
					strings.Join(r.log, "\n  "))
			}
		}
		lite.Close()
		pg.Close()
	}
}

// weightedQueue is a Queue that keeps flow weights (docs/contract.md §7.6).
type weightedQueue interface {
	queue.Store
	queue.Weighter
}

// twinErr names the queue sentinel an error matches, so that the two
// backends' errors can be compared ("" for nil, "other" for none).
func twinErr(err error) string {
	if err == nil {
		return ""
	}
	for _, s := range []error{queue.ErrInvalid, queue.ErrEmptyReason, queue.ErrNotFound, queue.ErrConflict, queue.ErrTimeRegression,
		queue.ErrStaleGeneration, queue.ErrNotQuarantined, queue.ErrTickOverflow} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "other: " + err.Error()
}

// The same under the rotation order with weights (docs/contract.md §7.6):
// random enqueues (some carrying a weight, some changing it), claims,
// claim batches (ClaimBatch on both), settles, settle batches, extends,
// redrives, RedriveAll, SetWeight (bad input too) and switches of the
// fairness between rotation and min_served give the same results on both
// backends, and after every step snapshots that encode to the same JSON
// bytes and the same Flows (weights, rotation positions).
func TestTwin_RotationAndWeightsEncodeTheSame(t *testing.T) {
	pgtest.Require(t)
	ctx := context.Background()
	seeds := uint64(40)
	if raceDetector {
		seeds = 10
	}
	rot := queue.DefaultPolicy()
	rot.Fairness = queue.FairRotation
	rot.Lease, rot.MaxAttempts, rot.BackoffBase, rot.BackoffCap, rot.Jitter = 3, 2, 1, 3, true
	for seed := uint64(1); seed <= seeds; seed++ {
		lite, err := queuestore.Open(filepath.Join(t.TempDir(), "queue.db"), queuestore.WithPolicy(rot))
		if err != nil {
			t.Fatal(err)
		}
		_, schema := pgtest.Schema(t)
		pg, err := pgqueuestore.OpenPool(ctx, pgtest.Pool(t), pgqueuestore.WithSchema(schema), pgqueuestore.WithPolicy(rot))
		if err != nil {
			t.Fatal(err)
		}
		stores := [2]weightedQueue{lite, pg}
		rng := rand.New(rand.NewPCG(seed, 11))
		var (
			log   []string
			mark  clock.Tick
			ids   []string
			gens  = map[string]int64{}
			fair  = queue.FairRotation
			flows = []string{"a", "b", "c", "B", "ab"}
		)
		both := func(what string, op func(q weightedQueue) (any, error)) {
			t.Helper()
			log = append(log, what)
			var out [2]string
			for i, q := range stores {
				v, err := op(q)
				b, _ := json.Marshal(v)
				out[i] = string(b) + " / " + twinErr(err)
			}
			if out[0] != out[1] {
				t.Fatalf("seed %d: %s\nsqlite   %s\npostgres %s\nsteps:\n  %s", seed, what, out[0], out[1], strings.Join(log, "\n  "))
			}
		}
		pickID := func() (string, int64) {
			if len(ids) == 0 || rng.IntN(15) == 0 {
				return "unknown", 1
			}
			id := ids[rng.IntN(len(ids))]
			g := gens[id]
			if rng.IntN(8) == 0 {
				g++
			}
			return id, g
		}
		for step := 0; step < 40; step++ {
			now := mark + clock.Tick(rng.IntN(4))
			if rng.IntN(15) == 0 && mark > 0 {
				now = mark - 1
			}
			switch op := rng.IntN(20); {
			case op < 5:
				e := queue.Event{ID: fmt.Sprintf("e%d", step), Flow: flows[rng.IntN(len(flows))], Body: []byte(fmt.Sprintf(`{"d": %d}`, step))}
				if len(ids) > 0 && rng.IntN(6) == 0 {
					e.ID = ids[rng.IntN(len(ids))] // a duplicate or a conflict
				}
				if rng.IntN(3) == 0 {
					e.Weight = []int{1, 2, 3, 7, 1000, 1001}[rng.IntN(6)]
				}
				both(fmt.Sprintf("Enqueue(%+v, %d)", e, now), func(q weightedQueue) (any, error) { return q.Enqueue(ctx, e, now) })
				ids = append(ids, e.ID)
			case op < 6:
				var es []queue.Event
				for k := rng.IntN(4); k > 0; k-- {
					es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", step, k), Flow: flows[rng.IntN(len(flows))], Body: []byte("x"), Weight: rng.IntN(4)})
					ids = append(ids, es[len(es)-1].ID)
				}
				both(fmt.Sprintf("EnqueueBatch(%+v, %d)", es, now), func(q weightedQueue) (any, error) { return q.EnqueueBatch(ctx, es, now) })
			case op < 9:
				both(fmt.Sprintf("Claim(%d)", now), func(q weightedQueue) (any, error) {
					c, ok, err := q.Claim(ctx, now)
					return []any{c, ok}, err
				})
			case op < 11:
				n := 1 + rng.IntN(4)
				both(fmt.Sprintf("ClaimBatch(%d, %d)", now, n), func(q weightedQueue) (any, error) { return q.ClaimBatch(ctx, now, n) })
			case op < 14:
				id, g := pickID()
				res := queue.Result{OK: rng.IntN(3) > 0}
				if !res.OK {
					res.Reason = []string{"unavailable", "gap"}[rng.IntN(2)]
				}
				both(fmt.Sprintf("Settle(%q, %d, %+v, %d)", id, g, res, now), func(q weightedQueue) (any, error) { return q.Settle(ctx, id, g, res, now) })
			case op < 15:
				var items []queue.SettleItem
				for k := rng.IntN(4); k > 0; k-- {
					id, g := pickID()
					items = append(items, queue.SettleItem{EventID: id, Generation: g, Result: queue.Result{OK: rng.IntN(2) == 0, Reason: "gap"}})
				}
				both(fmt.Sprintf("SettleBatch(%+v, %d)", items, now), func(q weightedQueue) (any, error) {
					rs, err := q.SettleBatch(ctx, items, now)
					var out []string
					for _, r := range rs {
						out = append(out, string(r.Outcome)+twinErr(r.Err))
					}
					return out, err
				})
			case op < 16:
				id, g := pickID()
				both(fmt.Sprintf("Extend(%q, %d, %d)", id, g, now), func(q weightedQueue) (any, error) { return q.Extend(ctx, id, g, now) })
			case op < 17:
				id, g := pickID()
				both(fmt.Sprintf("Redrive(%q, %d, %d)", id, g, now), func(q weightedQueue) (any, error) { return nil, q.Redrive(ctx, id, g, "operator", now) })
			case op < 18:
				f := queue.RedriveFilter{}
				if rng.IntN(2) == 0 {
					f.Flow = flows[rng.IntN(len(flows))]
				}
				both(fmt.Sprintf("RedriveAll(%+v, %d)", f, now), func(q weightedQueue) (any, error) { return q.RedriveAll(ctx, f, "all back", now) })
			case op < 19:
				flow := flows[rng.IntN(len(flows))]
				w := []int{0, 1, 2, 5, 1000, 1001}[rng.IntN(6)]
				reason := []string{"paying tenant", ""}[min(1, rng.IntN(8))]
				both(fmt.Sprintf("SetWeight(%q, %d, %q, %d)", flow, w, reason, now), func(q weightedQueue) (any, error) {
					return nil, q.SetWeight(ctx, flow, w, reason, now)
				})
			default:
				if fair == queue.FairRotation {
					fair = queue.FairMinServed
				} else {
					fair = queue.FairRotation
				}
				p := rot
				p.Fairness = fair
				both(fmt.Sprintf("SetPolicy(%s, %d)", fair, now), func(q weightedQueue) (any, error) { return nil, q.SetPolicy(ctx, p, "switch", now) })
			}
			// Refresh the generations and the mark from the SQLite store.
			sn, err := stores[0].Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mark = sn.ClockMark
			for _, e := range sn.Events {
				gens[e.ID] = e.Generation
			}
			both("Snapshot", func(q weightedQueue) (any, error) { return q.Snapshot(ctx) })
			both("Flows", func(q weightedQueue) (any, error) { return q.Flows(ctx) })
			both("NextDue", func(q weightedQueue) (any, error) {
				d, ok, err := q.NextDue(ctx)
				return []any{d, ok}, err
			})
		}
		sn, err := stores[0].Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seed == 1 {
			t.Logf("seed 1 ends with %d events, rotation %+v", len(sn.Events), sn.Rotation)
		}
		lite.Close()
		pg.Close()
	}
}
