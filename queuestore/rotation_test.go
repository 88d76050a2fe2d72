package queuestore

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/fairness"
)

// openPolicy opens a new store with policy p, closed when t ends.
func openPolicy(t testing.TB, p Policy) *Store {
	t.Helper()
	s, _ := openTest(t, WithPolicy(p))
	return s
}

func rotationPolicy() Policy {
	p := DefaultPolicy()
	p.Fairness = FairRotation
	return p
}

// §7.6: the queue's stride is fairness.Stride for every weight and a
// range of served counts.
func TestRotation_7_6_StrideIsTheModels(t *testing.T) {
	t.Parallel()
	for w := MinWeight; w <= MaxWeight; w++ {
		for _, s := range []int64{0, 1, 2, int64(w) - 1, int64(w), 12345, 1 << 40} {
			if got, want := stride(w, s), fairness.Stride(w, s); got != want {
				t.Fatalf("stride(%d, %d) = %d, fairness.Stride %d", w, s, got, want)
			}
		}
	}
	if RotationScale != fairness.Scale || MinWeight != fairness.MinWeight || MaxWeight != fairness.MaxWeight {
		t.Fatal("queuestore's rotation constants differ from fairness's")
	}
}

// §7.6: the crowd-out schedule under rotation: old's second event goes at
// the second claim, before every newcomer.
func TestRotation_7_6_NewFlowsDoNotCrowdOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openPolicy(t, rotationPolicy())
	enqueue(t, s, "old-1", "old", "x", 0)
	enqueue(t, s, "old-2", "old", "x", 0)
	var got []string
	for step := 0; step < 6; step++ {
		now := clock.Tick(step)
		if step > 0 {
			enqueue(t, s, "new-"+itoa(step), "new-"+itoa(step), "x", now)
		}
		c := mustClaim(t, s, now)
		got = append(got, c.Flow)
		if _, err := s.Settle(ctx, c.EventID, c.Generation, Result{OK: true}, now); err != nil {
			t.Fatalf("Settle() error = %v", err)
		}
	}
	want := []string{"old", "old", "new-1", "new-2", "new-3", "new-4"}
	if jsonOf(got) != jsonOf(want) {
		t.Fatalf("claims = %v, want %v", got, want)
	}
}

// §7.6: SetWeight's checks, its audit row, and that a refused call
// changes nothing; Event.Weight on enqueue.
func TestRotation_7_6_SetWeightAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openPolicy(t, rotationPolicy())
	if _, err := s.Enqueue(ctx, Event{ID: "a1", Flow: "a", Body: []byte("x"), Weight: 3}, 1); err != nil {
		t.Fatalf("Enqueue(weight 3) error = %v", err)
	}
	before := snap(t, s)
	wantErr(t, "SetWeight(0)", s.SetWeight(ctx, "a", 0, "r", 2), ErrInvalid)
	wantErr(t, "SetWeight(1001)", s.SetWeight(ctx, "a", 1001, "r", 2), ErrInvalid)
	wantErr(t, "SetWeight(no reason)", s.SetWeight(ctx, "a", 2, "", 2), ErrInvalid, ErrEmptyReason)
	wantErr(t, "SetWeight(unknown)", s.SetWeight(ctx, "zz", 2, "r", 2), ErrNotFound)
	wantErr(t, "SetWeight(past)", s.SetWeight(ctx, "a", 2, "r", 0), ErrTimeRegression)
	_, err := s.Enqueue(ctx, Event{ID: "a2", Flow: "a", Body: []byte("x"), Weight: 1001}, 2)
	wantErr(t, "Enqueue(weight 1001)", err, ErrInvalid)
	assertUnchanged(t, "refused SetWeight", before, snap(t, s))
	if err := s.SetWeight(ctx, "a", 7, "paying tenant", 3); err != nil {
		t.Fatalf("SetWeight() error = %v", err)
	}
	if _, err := s.Enqueue(ctx, Event{ID: "a2", Flow: "a", Body: []byte("x"), Weight: 2}, 4); err != nil {
		t.Fatalf("Enqueue(weight 2) error = %v", err)
	}
	// A retry of a2 with another weight is a duplicate: nothing changes.
	if r, err := s.Enqueue(ctx, Event{ID: "a2", Flow: "a", Body: []byte("x"), Weight: 9}, 5); err != nil || !r.Duplicate {
		t.Fatalf("Enqueue(duplicate) = %+v, %v", r, err)
	}
	sn := snap(t, s)
	if len(sn.Flows) != 1 || sn.Flows[0].Weight != 2 {
		t.Fatalf("flows = %s, want weight 2", jsonOf(sn.Flows))
	}
	if len(sn.OperatorAudit) != 2 {
		t.Fatalf("operator audit = %s, want two weight rows", jsonOf(sn.OperatorAudit))
	}
	for i, want := range []struct {
		reason string
		ch     WeightChange
		at     int64
	}{{"paying tenant", WeightChange{Flow: "a", Old: 3, New: 7}, 3}, {ReasonEnqueueWeight, WeightChange{Flow: "a", Old: 7, New: 2}, 4}} {
		a := sn.OperatorAudit[i]
		var ch WeightChange
		if err := json.Unmarshal([]byte(a.Detail), &ch); err != nil || ch != want.ch || a.Kind != AuditWeight ||
			a.Reason != want.reason || int64(a.At) != want.at {
			t.Fatalf("audit row %d = %s, want %+v", i, jsonOf(a), want)
		}
	}
}

// §7.6: weights under min_served are stored and audited, but do not
// change its order, and the snapshot of a default queue without weights
// shows no rotation field.
func TestRotation_7_6_WeightsUnderMinServed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	b, _ := json.Marshal(snap(t, s))
	for _, field := range []string{"weight", "pass", "joined", "rotation"} {
		if containsKey(b, field) {
			t.Fatalf("default snapshot shows %q: %s", field, b)
		}
	}
	if _, err := s.Enqueue(ctx, Event{ID: "b1", Flow: "b", Body: []byte("x"), Weight: 5}, 0); err != nil {
		t.Fatalf("Enqueue() error = %v", err)
	}
	if err := s.SetWeight(ctx, "a", 9, "r", 0); err != nil {
		t.Fatalf("SetWeight() error = %v", err)
	}
	sn := snap(t, s)
	if sn.Flows[0].Weight != 9 || sn.Flows[1].Weight != 5 || sn.Flows[0].Pass != nil || sn.Rotation != nil {
		t.Fatalf("flows = %s", jsonOf(sn.Flows))
	}
	c := mustClaim(t, s, 1)
	if c.Flow != "a" {
		t.Fatalf("min_served claim = %q, want a (ties by flow ID, weights ignored)", c.Flow)
	}
}

// §7.6: switching a queue with backlogs to rotation joins its flows in
// flow ID order, so each gets a distinct join number; switching back keeps
// the state, and switching again joins them again after the others.
func TestRotation_7_6_SetPolicySwitchJoinsFlows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	for _, f := range []string{"c", "a", "b"} {
		enqueue(t, s, f+"1", f, "x", 0)
	}
	enqueue(t, s, "d1", "d", "x", 0)
	c := mustClaim(t, s, 1) // a
	if _, err := s.Settle(ctx, c.EventID, c.Generation, Result{OK: true}, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPolicy(ctx, rotationPolicy(), "bounded waiting", 2); err != nil {
		t.Fatalf("SetPolicy() error = %v", err)
	}
	sn := snap(t, s)
	joined := map[string]int64{}
	for _, f := range sn.Flows {
		joined[f.Flow] = *f.Joined
	}
	want := map[string]int64{"a": 0, "b": 1, "c": 2, "d": 3}
	if jsonOf(joined) != jsonOf(want) || sn.Rotation == nil || sn.Rotation.Joins != 3 {
		t.Fatalf("joined = %v, rotation %s; want %v and joins 3", joined, jsonOf(sn.Rotation), want)
	}
	var got []string
	for i := 0; i < 3; i++ {
		got = append(got, mustClaim(t, s, 3).Flow)
	}
	if jsonOf(got) != jsonOf([]string{"b", "c", "d"}) {
		t.Fatalf("claims after the switch = %v, want b c d", got)
	}
	if err := s.SetPolicy(ctx, DefaultPolicy(), "back", 4); err != nil {
		t.Fatalf("SetPolicy(back) error = %v", err)
	}
	if err := s.SetPolicy(ctx, rotationPolicy(), "again", 5); err != nil {
		t.Fatalf("SetPolicy(again) error = %v", err)
	}
	if sn := snap(t, s); sn.Rotation.Joins != 6 {
		t.Fatalf("after a second switch joins = %d, want 6", sn.Rotation.Joins)
	}
}

// containsKey reports whether the JSON b has an object key k anywhere.
func containsKey(b []byte, k string) bool {
	return json.Valid(b) && bytesContains(b, `"`+k+`":`)
}

func bytesContains(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

// §7.6: Flows shows each flow's weight, and under rotation its position:
// the flows with a backlog in (max(pass, vnow), joined) order.
func TestRotation_7_6_FlowsPosition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openPolicy(t, rotationPolicy())
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "a2", "a", "x", 0)
	enqueue(t, s, "b1", "b", "x", 0)
	if _, err := s.Enqueue(ctx, Event{ID: "c1", Flow: "c", Body: []byte("x"), Weight: 4}, 0); err != nil {
		t.Fatal(err)
	}
	c := mustClaim(t, s, 1) // a: pass 720720, in flight
	if _, err := s.Settle(ctx, c.EventID, c.Generation, Result{OK: true}, 1); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, 1) // b, its only event in flight
	flows, err := s.Flows(ctx)
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	var got []string
	for _, f := range flows {
		got = append(got, f.Flow+":"+itoa(f.Weight)+":"+itoa(int(f.Position)))
	}
	// c (pass 0, joined 3) is next, then a (720720, 1) and b (720720, 2).
	if want := []string{"a:1:2", "b:1:3", "c:4:1"}; jsonOf(got) != jsonOf(want) {
		t.Fatalf("flows = %v, want %v", got, want)
	}
}
