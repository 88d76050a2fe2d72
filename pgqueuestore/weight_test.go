package pgqueuestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/fairness"
	"github.com/fairrelay/fairrelay/queue"
)

func rotationPolicy() queue.Policy {
	p := queue.DefaultPolicy()
	p.Fairness = queue.FairRotation
	return p
}

// Weights are kept (docs/contract.md §7.6): a new flow takes its event's
// weight without an audit row; an enqueue that changes an existing flow's
// weight, and SetWeight, write a 'weight' audit row with queuestore's
// detail; bad SetWeight input is refused in queuestore's order and changes
// nothing.
func TestWeightKeptAndAudited(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	if _, err := s.Enqueue(ctx, queue.Event{ID: "a-1", Flow: "a", Body: []byte("x"), Weight: 2}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueBatch(ctx, []queue.Event{{ID: "b-1", Flow: "b", Body: []byte("x")}, {ID: "a-2", Flow: "a", Body: []byte("x"), Weight: 5}}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, queue.Event{ID: "a-3", Flow: "a", Body: []byte("x"), Weight: 5}, 2); err != nil {
		t.Fatal(err) // the weight it already has: no audit row
	}
	if _, err := s.Enqueue(ctx, queue.Event{ID: "a-1", Flow: "a", Body: []byte("x"), Weight: 9}, 2); err != nil {
		t.Fatal(err) // a duplicate changes nothing, whatever its weight
	}
	before, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		flow, reason string
		weight       int
		now          int64
		want         error
	}{
		{"a", "r", 0, 3, queue.ErrInvalid},
		{"a", "r", 1001, 3, queue.ErrInvalid},
		{"a", "", 3, 3, queue.ErrEmptyReason},
		{"", "r", 3, 3, queue.ErrInvalid},
		{"a", "r", 3, 1, queue.ErrTimeRegression},
		{"nobody", "r", 3, 3, queue.ErrNotFound},
	} {
		if err := s.SetWeight(ctx, bad.flow, bad.weight, bad.reason, clock.Tick(bad.now)); !errors.Is(err, bad.want) {
			t.Fatalf("SetWeight(%q, %d, %q, %d) = %v, want %v", bad.flow, bad.weight, bad.reason, bad.now, err, bad.want)
		}
	}
	after, err := s.Snapshot(ctx)
	if err != nil || !reflect.DeepEqual(before, after) {
		t.Fatalf("refused SetWeight changed the store:\n%+v\n%+v (%v)", before, after, err)
	}
	if err := s.SetWeight(ctx, "b", 3, "paying tenant", 4); err != nil {
		t.Fatal(err)
	}
	flows, err := s.Flows(ctx)
	if err != nil || len(flows) != 2 || flows[0].Weight != 5 || flows[1].Weight != 3 || flows[0].Position != 0 {
		t.Fatalf("Flows = %+v, %v; want a at 5, b at 3, no positions under min_served", flows, err)
	}
	all, err := s.AuditAll(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("AuditAll = %+v, %v; want two weight rows", all, err)
	}
	want := []struct {
		reason string
		detail WeightChange
	}{{ReasonEnqueueWeight, WeightChange{Flow: "a", Old: 2, New: 5}}, {"paying tenant", WeightChange{Flow: "b", Old: 1, New: 3}}}
	for i, w := range want {
		b, _ := json.Marshal(w.detail)
		if all[i].Kind != queue.AuditWeight || all[i].Reason != w.reason || all[i].Detail != string(b) || all[i].EventID != "" {
			t.Fatalf("audit row %d = %+v, want %s %s", i, all[i], w.reason, b)
		}
	}
	sn, err := s.Snapshot(ctx)
	if err != nil || sn.Rotation != nil || sn.Flows[0].Weight != 5 || sn.Flows[0].Pass != nil {
		t.Fatalf("min_served snapshot flows %+v rotation %+v (%v)", sn.Flows, sn.Rotation, err)
	}
}

// Under the rotation, claims with immediate acks follow fairness.Rotation
// (the exact model) step for step: the same picks, and after every step
// the snapshot's vnow, vtail, joins and each flow's pass, joined and
// served are the model's. Weights 1, 2 and 4, one set by SetWeight in the
// middle, and a flow arriving late.
func TestRotationFollowsTheModel(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t, WithPolicy(rotationPolicy()))
	var r fairness.Rotation
	backlog := map[string]int{}
	now := clock.Tick(1)
	enq := func(flow string, n, weight int) {
		t.Helper()
		for i := 0; i < n; i++ {
			e := queue.Event{ID: fmt.Sprintf("%s-%d-%d", flow, now, i), Flow: flow, Body: []byte("x")}
			if i == 0 {
				e.Weight = weight
			}
			if _, err := s.Enqueue(ctx, e, now); err != nil {
				t.Fatal(err)
			}
			if e.Weight != 0 {
				if err := r.SetWeight(flow, e.Weight); err != nil {
					t.Fatal(err)
				}
			}
			if backlog[flow] == 0 {
				if err := r.Arrive(flow); err != nil {
					t.Fatal(err)
				}
			}
			backlog[flow]++
		}
	}
	enq("a", 30, 1)
	enq("b", 30, 2)
	enq("c", 30, 4)
	for step := 0; step < 80; step++ {
		now++
		if step == 20 {
			enq("late", 10, 0)
		}
		if step == 30 {
			if err := s.SetWeight(ctx, "a", 4, "upgrade", now); err != nil {
				t.Fatal(err)
			}
			if err := r.SetWeight("a", 4); err != nil {
				t.Fatal(err)
			}
		}
		c, ok, err := s.Claim(ctx, now)
		want, wok := r.Pick()
		if err != nil || ok != wok || c.Flow != want {
			t.Fatalf("step %d: Claim = %s, %v, %v; model %s, %v", step, c.Flow, ok, err, want, wok)
		}
		if !ok {
			break
		}
		if err := r.Block(c.Flow); err != nil {
			t.Fatal(err)
		}
		if o, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, now); err != nil || o != queue.Acked {
			t.Fatalf("step %d: Settle = %s, %v", step, o, err)
		}
		backlog[c.Flow]--
		if backlog[c.Flow] > 0 {
			err = r.Ready(c.Flow)
		} else {
			err = r.Leave(c.Flow)
		}
		if err != nil {
			t.Fatal(err)
		}
		sn, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ck := r.Clock()
		if sn.Rotation == nil || *sn.Rotation != (queue.RotationState{VNow: ck.VNow, VTail: ck.VTail, Joins: ck.Joins}) {
			t.Fatalf("step %d: rotation %+v, model %+v", step, sn.Rotation, ck)
		}
		for i, mf := range r.Flows() {
			f := sn.Flows[i]
			if f.Flow != mf.Flow || *f.Pass != mf.Pass || *f.Joined != mf.Joined || f.Served != mf.Served || f.Weight != mf.Weight {
				t.Fatalf("step %d: flow %+v (pass %d joined %d), model %+v", step, f, *f.Pass, *f.Joined, mf)
			}
		}
	}
}

// A version-1 schema, as a version-1 build made it (every column of the
// rotation, no flows_rotation, no flows_ready_due), is brought to the
// newest version by Open: it keeps its events, the default policy and weight 1 on every flow; the index is
// there and the queue can switch to the rotation, which joins the flows
// with a head in flow ID order.
func TestMigrationFromVersion1(t *testing.T) {
	ctx := context.Background()
	s, url, schema := open(t, atVersion(1))
	enqueueAsOldBuild(t, s, 1, "b", "a", "c")
	s.Close()
	s2, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	st, err := s2.Stats(ctx)
	if err != nil || st.SchemaVersion != SchemaVersion || st.Events.Pending != 3 {
		t.Fatalf("Stats = %+v, %v; want version %d with 3 pending events", st, err, SchemaVersion)
	}
	if p, err := s2.Policy(ctx); err != nil || !p.Equal(queue.DefaultPolicy()) {
		t.Fatalf("Policy = %+v, %v; want the default", p, err)
	}
	var n int
	if err := s2.pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'flows_rotation'`, schema).Scan(&n); err != nil || n != 1 {
		t.Fatalf("flows_rotation indexes: %d, %v; want 1", n, err)
	}
	flows, err := s2.Flows(ctx)
	if err != nil || len(flows) != 3 {
		t.Fatal(flows, err)
	}
	for _, f := range flows {
		if f.Weight != 1 {
			t.Fatalf("flow %+v: weight %d, want 1", f, f.Weight)
		}
	}
	if err := s2.SetPolicy(ctx, rotationPolicy(), "bounded waits", 2); err != nil {
		t.Fatal(err)
	}
	sn, err := s2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sn.Rotation == nil || *sn.Rotation != (queue.RotationState{Joins: 3}) {
		t.Fatalf("rotation after the switch: %+v", sn.Rotation)
	}
	for i, f := range sn.Flows {
		if *f.Joined != int64(i+1) || *f.Pass != 0 || f.Weight != 1 {
			t.Fatalf("flow %s after the switch: joined %d pass %d weight %d", f.Flow, *f.Joined, *f.Pass, f.Weight)
		}
	}
	for _, want := range []string{"a", "b", "c"} {
		c, ok, err := s2.Claim(ctx, 3)
		if err != nil || !ok || c.Flow != want {
			t.Fatalf("Claim = %s, %v, %v; want %s", c.Flow, ok, err, want)
		}
	}
}

// A version-2 schema (before OldestDue: no flows_ready_due) is
// brought to the newest version by Open: the index is there and OldestDue reads
// the ready heads that were stored before it.
func TestMigrationFromVersion2(t *testing.T) {
	ctx := context.Background()
	s, url, schema := open(t, atVersion(2))
	for i, f := range []string{"b", "a"} {
		enqueueAsOldBuild(t, s, int64(3+i), f)
	}
	s.Close()
	s2, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if st, err := s2.Stats(ctx); err != nil || st.SchemaVersion != SchemaVersion {
		t.Fatalf("Stats = %+v, %v; want version %d", st, err, SchemaVersion)
	}
	var n int
	if err := s2.pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'flows_ready_due'`, schema).Scan(&n); err != nil || n != 1 {
		t.Fatalf("flows_ready_due indexes: %d, %v; want 1", n, err)
	}
	if _, _, err := s2.Claim(ctx, 5); err != nil { // marks both flows ready, then claims a
		t.Fatal(err)
	}
	if due, ok, err := s2.OldestDue(ctx, 5); err != nil || !ok || due != 3 {
		t.Fatalf("OldestDue = %d, %v, %v; want b's 3", due, ok, err)
	}
}

// flows_rotation holds only the flows that joined the rotation (migration
// 12): a min_served queue that enqueues, claims and acks through every
// path writes no entry in it (the index keeps only its metapage, one
// block), and the switch to the rotation puts the flows with a head in
// it, from which the next claim picks.
func TestRotationIndexOnlyForJoinedFlows(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	blocks := func() int64 {
		t.Helper()
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT pg_relation_size(to_regclass(quote_ident($1) || '.flows_rotation'))
    / current_setting('block_size')::bigint`, s.schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var es []queue.Event
	for k := range 3 {
		for f := range 40 {
			es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%02d", f), Body: []byte("x")})
		}
	}
	if _, err := s.EnqueueBatch(ctx, es, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, queue.Event{ID: "one", Flow: "g", Body: []byte("x")}, 1); err != nil {
		t.Fatal(err)
	}
	// Single claims and settles, then batches, then one SettleClaimBatch:
	// each flow's head moves and turns ready again.
	for now := clock.Tick(2); now < 12; now++ {
		c, ok, err := s.Claim(ctx, now)
		if err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		if o, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, now); err != nil || o != queue.Acked {
			t.Fatalf("Settle = %s, %v", o, err)
		}
	}
	cs, err := s.ClaimBatch(ctx, 12, 30)
	if err != nil || len(cs) != 30 {
		t.Fatalf("ClaimBatch = %d claims, %v", len(cs), err)
	}
	var items []queue.SettleItem
	for _, c := range cs {
		items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}})
	}
	if _, cs, err = s.SettleClaimBatch(ctx, items, 13, 30); err != nil || len(cs) != 30 {
		t.Fatalf("SettleClaimBatch = %d claims, %v", len(cs), err)
	}
	if n := blocks(); n != 1 {
		t.Fatalf("flows_rotation has %d blocks under min_served, want 1 (its metapage): flows that never joined the rotation have entries", n)
	}
	if err := s.SetPolicy(ctx, rotationPolicy(), "bounded waits", 14); err != nil {
		t.Fatal(err)
	}
	if n := blocks(); n < 2 {
		t.Fatalf("flows_rotation has %d blocks after the switch to rotation, want entries for the flows with a head", n)
	}
	if _, ok, err := s.Claim(ctx, 15); err != nil || !ok {
		t.Fatalf("Claim under rotation = %v, %v", ok, err)
	}
}
