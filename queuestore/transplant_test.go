package queuestore

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// richFlows gives s flows in every state an export must carry: acked
// events, a retried head with history, a quarantined head redriven and
// quarantined again, an in-flight head, a paused flow, a weight; it
// returns the tick after.
func richFlows(t *testing.T, s *Store) clock.Tick {
	t.Helper()
	ctx := context.Background()
	now := clock.Tick(1)
	enq := func(id, flow string) {
		if _, err := s.Enqueue(ctx, Event{ID: id, Flow: flow, Body: []byte(`{"id":"` + id + `"}`)}, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a", "b", "c", "d"} {
		for k := 1; k <= 3; k++ {
			enq(f+string(rune('0'+k)), f)
		}
	}
	if err := s.SetWeight(ctx, "b", 3, "heavier", now); err != nil {
		t.Fatal(err)
	}
	// Serve every flow's first event.
	cs, err := s.ClaimBatch(ctx, now, 4)
	if err != nil || len(cs) != 4 {
		t.Fatalf("ClaimBatch = %d, %v", len(cs), err)
	}
	for _, c := range cs {
		if _, err := s.Settle(ctx, c.EventID, c.Generation, success, now); err != nil {
			t.Fatal(err)
		}
	}
	now++
	// Fail heads until a2 quarantines (and b2, c2 retry).
	for round := 0; round < MaxAttempts; round++ {
		cs, err := s.ClaimBatch(ctx, now, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			switch c.Flow {
			case "a", "b":
				if _, err := s.Settle(ctx, c.EventID, c.Generation, Result{Reason: "unavailable", Error: "503 from " + c.Flow}, now); err != nil {
					t.Fatal(err)
				}
			}
			// c's and d's heads stay in flight (d's expires later).
		}
		now += BackoffCap + Lease + 1
	}
	q, err := s.Quarantined(ctx)
	if err != nil || len(q) == 0 {
		t.Fatalf("Quarantined = %v, %v", q, err)
	}
	if err := s.Redrive(ctx, q[0].EventID, q[0].Generation, "fixed", now); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseFlow(ctx, "d", "investigating", now); err != nil {
		t.Fatal(err)
	}
	// An in-flight head in flow c.
	for {
		cs, err := s.ClaimBatch(ctx, now, 4)
		if err != nil {
			t.Fatal(err)
		}
		done := false
		for _, c := range cs {
			if c.Flow == "c" {
				done = true
			} else if _, err := s.Settle(ctx, c.EventID, c.Generation, success, now); err != nil {
				t.Fatal(err)
			}
		}
		if done || len(cs) == 0 {
			break
		}
		now++
	}
	return now + 1
}

// flowView is what a flow looks like through the Store's reads.
type flowView struct {
	Flow   FlowState
	Events []EventState
	Audit  []AuditRecord
}

func viewFlow(t *testing.T, s *Store, x queue.FlowExport) flowView {
	t.Helper()
	ctx := context.Background()
	var v flowView
	fs, err := s.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Flow == x.Flow.Flow {
			f.Position = 0 // a place in this store's rotation
			v.Flow = f
		}
	}
	evs, err := s.FlowEvents(ctx, x.Flow.Flow)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		full, err := s.Event(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		v.Events = append(v.Events, full)
	}
	for _, a := range x.Audit {
		a.ID = 0
		v.Audit = append(v.Audit, a)
	}
	return v
}

func TestTransplantRoundTrip(t *testing.T) {
	ctx := context.Background()
	src, _ := openTest(t)
	now := richFlows(t, src)
	dst, _ := openTest(t)
	names, err := src.FlowNames(ctx, "", 2)
	if err != nil || !reflect.DeepEqual(names, []string{"a", "b"}) {
		t.Fatalf("FlowNames(\"\", 2) = %v, %v", names, err)
	}
	more, err := src.FlowNames(ctx, "b", 10)
	if err != nil || !reflect.DeepEqual(more, []string{"c", "d"}) {
		t.Fatalf("FlowNames(b, 10) = %v, %v", more, err)
	}
	var maxTicket int64
	for _, f := range append(names, more...) {
		x, err := src.ExportFlow(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range x.Events {
			maxTicket = max(maxTicket, e.Ticket)
		}
		if err := dst.ImportFlow(ctx, x, now); err != nil {
			t.Fatalf("ImportFlow(%s): %v", f, err)
		}
		y, err := dst.ExportFlow(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := viewFlow(t, dst, y), viewFlow(t, src, x); !reflect.DeepEqual(got, want) {
			t.Errorf("flow %s after import:\n got %s\nwant %s", f, jsonOf(got), jsonOf(want))
		}
	}
	st, err := dst.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ticket != maxTicket || st.ClockMark != now || st.PausedFlows != 1 {
		t.Errorf("Stats after import = %+v, want ticket %d, mark %d, one paused flow", st, maxTicket, now)
	}
	// The imported queue works on: claims go on from the ticket, c's
	// lease runs out and the head is claimed again.
	later := now + 3*Lease
	cs, err := dst.ClaimBatch(ctx, later, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Ticket <= maxTicket || c.Flow == "d" {
			t.Errorf("claim after import %+v: want a ticket above %d, and none of paused d", c, maxTicket)
		}
	}
}

func TestImportRefusals(t *testing.T) {
	ctx := context.Background()
	src, _ := openTest(t)
	now := richFlows(t, src)
	x, err := src.ExportFlow(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.ExportFlow(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ExportFlow(unknown) error = %v, want ErrNotFound", err)
	}
	dst, _ := openTest(t)
	if _, err := dst.Enqueue(ctx, Event{ID: x.Events[1].ID, Flow: "other", Body: []byte("x")}, now); err != nil {
		t.Fatal(err)
	}
	before := snap(t, dst)
	bad := func(mut func(x *queue.FlowExport)) queue.FlowExport {
		b, _ := json.Marshal(x)
		var y queue.FlowExport
		if err := json.Unmarshal(b, &y); err != nil {
			t.Fatal(err)
		}
		mut(&y)
		return y
	}
	cases := []struct {
		name string
		x    queue.FlowExport
		want error
	}{
		{"event ID taken", x, ErrConflict},
		{"flow taken", bad(func(y *queue.FlowExport) {
			y.Flow.Flow = "other"
			for k := range y.Events {
				y.Events[k].Flow, y.Events[k].ID = "other", y.Events[k].ID+"-x"
			}
			y.Audit = nil
		}), ErrConflict},
		{"out of sequence", bad(func(y *queue.FlowExport) { y.Events[0].Seq, y.Events[1].Seq = y.Events[1].Seq, y.Events[0].Seq }), ErrInvalid},
		{"wrong head", bad(func(y *queue.FlowExport) { y.Flow.HeadSeq = 1 }), ErrInvalid},
		{"pending before head", bad(func(y *queue.FlowExport) { y.Events[0].State, y.Events[0].AckedAt = queue.StatePending, 0 }), ErrInvalid},
		{"unknown state", bad(func(y *queue.FlowExport) { y.Events[2].State = "lost" }), ErrInvalid},
		{"unregistered destination", bad(func(y *queue.FlowExport) {
			for k := range y.Events {
				y.Events[k].ID += "-y"
			}
			y.Audit = nil
			y.Flow.Destination = "nowhere"
		}), queue.ErrUnknownDestination},
	}
	for _, c := range cases {
		if err := dst.ImportFlow(ctx, c.x, now); !errors.Is(err, c.want) {
			t.Errorf("%s: ImportFlow error = %v, want %v", c.name, err, c.want)
		}
	}
	assertUnchanged(t, "refused imports", before, snap(t, dst))
	if err := dst.ImportAudit(ctx, []AuditRecord{{Kind: AuditRedrive, EventID: "a1", Generation: 1, Reason: "r", At: 1}}, now); !errors.Is(err, ErrInvalid) {
		t.Errorf("ImportAudit(redrive row) error = %v, want ErrInvalid", err)
	}
	if _, err := dst.FlowNames(ctx, "", 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("FlowNames(limit 0) error = %v, want ErrInvalid", err)
	}
	assertUnchanged(t, "refused audit import", before, snap(t, dst))
}

func TestShardLabel(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	if _, ok, err := s.ShardLabel(ctx); ok || err != nil {
		t.Fatalf("ShardLabel of a new store = %v, %v; want none", ok, err)
	}
	for _, l := range []queue.ShardLabel{{Index: 2, Count: 2}, {Index: -1, Count: 2}, {Index: 0, Count: 0}, {Index: 0, Count: queue.MaxShards + 1}, {Index: 0, Count: 1, Epoch: -1}} {
		if err := s.SetShardLabel(ctx, l, "r", 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetShardLabel(%+v) error = %v, want ErrInvalid", l, err)
		}
	}
	if err := s.SetShardLabel(ctx, queue.ShardLabel{Index: 0, Count: 2}, "", 1); !errors.Is(err, ErrEmptyReason) {
		t.Errorf("SetShardLabel without reason error = %v, want ErrEmptyReason", err)
	}
	want := queue.ShardLabel{Index: 1, Count: 2, Epoch: 3}
	if err := s.SetShardLabel(ctx, want, "split", 5); err != nil {
		t.Fatal(err)
	}
	before := snap(t, s)
	if err := s.SetShardLabel(ctx, want, "again", 6); err != nil {
		t.Errorf("the same label again: %v", err)
	}
	for _, l := range []queue.ShardLabel{{Index: 0, Count: 2, Epoch: 3}, {Index: 1, Count: 3, Epoch: 3}, {Index: 1, Count: 2, Epoch: 4}} {
		if err := s.SetShardLabel(ctx, l, "r", 6); !errors.Is(err, queue.ErrShardLabel) {
			t.Errorf("SetShardLabel(%+v) on a labeled store error = %v, want ErrShardLabel", l, err)
		}
	}
	assertUnchanged(t, "refused labels", before, snap(t, s))
	all, err := s.AuditAll(ctx)
	if err != nil || len(all) != 1 || all[0].Kind != queue.AuditShard || all[0].Detail != `{"new":{"index":1,"count":2,"epoch":3}}` || all[0].At != 5 {
		t.Errorf("AuditAll = %+v, %v; want one shard row", all, err)
	}
	// The label is in the file.
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if l, ok, err := s2.ShardLabel(ctx); !ok || err != nil || l != want {
		t.Errorf("ShardLabel after reopening = %+v, %v, %v; want %+v", l, ok, err, want)
	}
}
