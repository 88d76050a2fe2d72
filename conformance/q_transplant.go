package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// The clauses of docs/contract.md §7.10 a single store keeps: its shard
// label (queue.ShardMember) and the moving of flows whole to another store
// (queue.Transplanter), the store's part of an offline reshard.

// transplanter is s as a queue.Transplanter; the clause is skipped when
// the backend has none.
func transplanter(t *testing.T, s Queue) queue.Transplanter {
	return capability[queue.Transplanter](t, s, "Transplanter")
}

// shardMember is s as a queue.ShardMember; the clause is skipped when the
// backend has none.
func shardMember(t *testing.T, s Queue) queue.ShardMember {
	return capability[queue.ShardMember](t, s, "ShardMember")
}

// transplantDest is a destination the transplanted flow e delivers to.
var transplantDest = queue.Destination{Name: "hooks", URL: "http://127.0.0.1:9/hooks", Secrets: []string{destSecret}}

// richFlows gives s flows in every state an export must carry: acked
// events, a retried head with history, a quarantined head redriven and
// quarantined again, an in-flight head, a paused flow, a weight, a flow
// of a registered destination; it returns the tick after.
func richFlows(t *testing.T, s Queue) clock.Tick {
	t.Helper()
	ctx := context.Background()
	now := clock.Tick(1)
	putDest(t, dests(t, s), transplantDest, now)
	for _, f := range []string{"a", "b", "c", "d"} {
		for k := 1; k <= 3; k++ {
			id := f + itoa(k)
			enqueue(t, s, id, f, `{"id":"`+id+`"}`, now)
		}
	}
	enqueueTo(t, s, "e1", "e", transplantDest.Name, 0, now)
	if err := capability[queue.Weighter](t, s, "SetWeight").SetWeight(ctx, "b", 3, "heavier", now); err != nil {
		t.Fatal(err)
	}
	// Serve every flow's first event.
	cs, err := s.ClaimBatch(ctx, now, 4)
	if err != nil || len(cs) != 4 {
		t.Fatalf("ClaimBatch = %d, %v", len(cs), err)
	}
	ackAll(t, s, cs, now)
	now++
	// Fail heads until a2 quarantines (and b2 retries).
	for round := 0; round < queue.MaxAttempts; round++ {
		cs, err := s.ClaimBatch(ctx, now, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			switch c.Flow {
			case "a", "b":
				if _, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{Reason: "unavailable", Error: "503 from " + c.Flow}, now); err != nil {
					t.Fatal(err)
				}
			}
			// c's and d's heads stay in flight (d's expires later).
		}
		now += queue.BackoffCap + queue.Lease + 1
	}
	q, err := s.Quarantined(ctx)
	if err != nil || len(q) == 0 {
		t.Fatalf("Quarantined = %v, %v", q, err)
	}
	if err := s.Redrive(ctx, q[0].EventID, q[0].Generation, "fixed", now); err != nil {
		t.Fatal(err)
	}
	if err := pauser(t, s).PauseFlow(ctx, "d", "investigating", now); err != nil {
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

// flowView is what a flow looks like through a store's reads.
type flowView struct {
	Flow   queue.FlowState
	Events []queue.EventState
	Audit  []queue.AuditRecord
}

// viewFlow reads x's flow from s: its row (Flows), its events (FlowEvents,
// then Event for each) and the audit rows of x with their IDs cleared
// (IDs are a store's own numbering).
func viewFlow(t *testing.T, s Queue, x queue.FlowExport) flowView {
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

// Every flow, exported and imported into another store, reads there as it
// read in the first (Flows, FlowEvents, Event, its audit rows); FlowNames
// pages the flows in byte order; the importing store's ticket and clock
// mark are raised to the highest of the exports, its paused flow stays
// paused, and its claims go on from the ticket.
func queueTransplant_7_10_RoundTrip(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	transplantRoundTrip(t, bk.open(t), bk.open(t))
}

// transplantRoundTrip is the round trip from src to dst, two new stores
// of one backend or of two.
func transplantRoundTrip(t *testing.T, src, dst Queue) {
	ctx := context.Background()
	now := richFlows(t, src)
	putDest(t, dests(t, dst), transplantDest, now)
	from, to := transplanter(t, src), transplanter(t, dst)
	names, err := from.FlowNames(ctx, "", 2)
	if err != nil || !reflect.DeepEqual(names, []string{"a", "b"}) {
		t.Fatalf("FlowNames(\"\", 2) = %v, %v", names, err)
	}
	more, err := from.FlowNames(ctx, "b", 10)
	if err != nil || !reflect.DeepEqual(more, []string{"c", "d", "e"}) {
		t.Fatalf("FlowNames(b, 10) = %v, %v", more, err)
	}
	var maxTicket int64
	for _, f := range append(names, more...) {
		x, err := from.ExportFlow(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range x.Events {
			maxTicket = max(maxTicket, e.Ticket)
		}
		if err := to.ImportFlow(ctx, x, now); err != nil {
			t.Fatalf("ImportFlow(%s): %v", f, err)
		}
		y, err := to.ExportFlow(ctx, f)
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
	if e, err := to.ExportFlow(ctx, "e"); err != nil || e.Flow.Destination != transplantDest.Name {
		t.Errorf("flow e after import: destination %q, %v; want %q", e.Flow.Destination, err, transplantDest.Name)
	}
	if st.Ticket != maxTicket || st.ClockMark != now || st.PausedFlows != 1 {
		t.Errorf("Stats after import = %+v, want ticket %d, mark %d, one paused flow", st, maxTicket, now)
	}
	// The imported queue works on: claims go on from the ticket, c's
	// lease runs out and the head is claimed again.
	later := now + 3*queue.Lease
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

// An in-flight event moves with the destination its claim counts against
// (ExportedEvent.Dest), even when SetFlowDestination has changed its
// flow's since: in the importing store that destination stays full until
// the lease ends, as it was in the first (docs/contract.md §7.10, §7.11).
func queueTransplant_7_10_InFlightKeepsItsSlot(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	src, dst := bk.open(t), bk.open(t)
	one, other := testDest("one", 1, 0), testDest("other", 0, 0)
	for _, s := range []Queue{src, dst} {
		putDest(t, dests(t, s), one, 1)
		putDest(t, dests(t, s), other, 1)
	}
	enqueueTo(t, src, "x1", "x", one.Name, 0, 1)
	enqueueTo(t, src, "y1", "y", one.Name, 0, 1)
	cs, err := src.ClaimBatch(ctx, 2, 2)
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimBatch under a concurrency of 1 = %v, %v; want one claim", cs, err)
	}
	moved, lease := cs[0].Flow, cs[0].LeaseUntil
	if err := dests(t, src).SetFlowDestination(ctx, moved, other.Name, "move", 2); err != nil {
		t.Fatal(err)
	}
	if cs, err := src.ClaimBatch(ctx, 3, 2); err != nil || len(cs) != 0 {
		t.Fatalf("ClaimBatch with one's slot taken = %v, %v; want none", cs, err)
	}
	from, to := transplanter(t, src), transplanter(t, dst)
	for _, f := range []string{"x", "y"} {
		x, err := from.ExportFlow(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if f == moved && (x.Flow.Destination != other.Name || x.Events[0].Dest != one.Name) {
			t.Fatalf("ExportFlow(%s) = destination %q, in-flight slot %q; want %q and %q", f, x.Flow.Destination, x.Events[0].Dest, other.Name, one.Name)
		}
		if f != moved && x.Events[0].Dest != "" {
			t.Fatalf("ExportFlow(%s): pending event with slot %q", f, x.Events[0].Dest)
		}
		if err := to.ImportFlow(ctx, x, 3); err != nil {
			t.Fatalf("ImportFlow(%s): %v", f, err)
		}
		y, err := to.ExportFlow(ctx, f)
		if err != nil || !reflect.DeepEqual(y.Events, x.Events) {
			t.Fatalf("ExportFlow(%s) after import = %s, %v; want %s", f, jsonOf(y.Events), err, jsonOf(x.Events))
		}
	}
	if cs, err := dst.ClaimBatch(ctx, 3, 2); err != nil || len(cs) != 0 {
		t.Fatalf("ClaimBatch after the move = %s, %v; want none: one's slot is still taken", jsonOf(cs), err)
	}
	// Once the lease ends the slot is free and the moved flow's head is
	// taken over for its new destination.
	cs, err = dst.ClaimBatch(ctx, lease+1, 2)
	if err != nil || len(cs) != 2 {
		t.Fatalf("ClaimBatch after the lease = %s, %v; want both heads", jsonOf(cs), err)
	}
}

// ExportFlow of an unknown flow is ErrNotFound; ImportFlow refuses an
// event ID or a flow the store has (ErrConflict), an inconsistent export
// (ErrInvalid: an audit detail that is not JSON too) and an unregistered
// destination (ErrUnknownDestination); ImportAudit refuses a row about a
// flow or a detail that is not JSON (ErrInvalid), FlowNames a limit of 0
// (ErrInvalid). Every refusal changes nothing.
func queueTransplant_7_10_ImportRefusals(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	src := bk.open(t)
	now := richFlows(t, src)
	from := transplanter(t, src)
	x, err := from.ExportFlow(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	xc, err := from.ExportFlow(ctx, "c") // its head is in flight
	if err != nil {
		t.Fatal(err)
	}
	if _, err := from.ExportFlow(ctx, "nope"); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("ExportFlow(unknown) error = %v, want ErrNotFound", err)
	}
	dst := bk.open(t)
	to := transplanter(t, dst)
	enqueue(t, dst, x.Events[1].ID, "other", "x", now)
	before := snap(t, dst)
	bad := func(mut func(x *queue.FlowExport)) queue.FlowExport {
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
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
		{"event ID taken", x, queue.ErrConflict},
		{"flow taken", bad(func(y *queue.FlowExport) {
			y.Flow.Flow = "other"
			for k := range y.Events {
				y.Events[k].Flow, y.Events[k].ID = "other", y.Events[k].ID+"-x"
			}
			y.Audit = nil
		}), queue.ErrConflict},
		{"out of sequence", bad(func(y *queue.FlowExport) { y.Events[0].Seq, y.Events[1].Seq = y.Events[1].Seq, y.Events[0].Seq }), queue.ErrInvalid},
		{"wrong head", bad(func(y *queue.FlowExport) { y.Flow.HeadSeq = 1 }), queue.ErrInvalid},
		{"pending before head", bad(func(y *queue.FlowExport) { y.Events[0].State, y.Events[0].AckedAt = queue.StatePending, 0 }), queue.ErrInvalid},
		{"unknown state", bad(func(y *queue.FlowExport) { y.Events[2].State = "lost" }), queue.ErrInvalid},
		{"audit detail not JSON", bad(func(y *queue.FlowExport) {
			for k := range y.Events {
				y.Events[k].ID += "-z"
			}
			y.Audit = []queue.AuditRecord{{Kind: queue.AuditWeight, Reason: "r", Detail: "not json", At: 1}}
		}), queue.ErrInvalid},
		{"slot on an event not in flight", bad(func(y *queue.FlowExport) {
			for k := range y.Events {
				y.Events[k].ID += "-s"
			}
			y.Audit = nil
			y.Events[0].Dest = transplantDest.Name
		}), queue.ErrInvalid},
		{"in-flight slot of an unregistered destination", func() queue.FlowExport {
			y := xc
			y.Events = slices.Clone(xc.Events)
			for k := range y.Events {
				if y.Events[k].State == queue.StateInflight {
					y.Events[k].Dest = "nowhere"
				}
			}
			return y
		}(), queue.ErrUnknownDestination},
		{"unregistered destination", bad(func(y *queue.FlowExport) {
			for k := range y.Events {
				y.Events[k].ID += "-y"
			}
			y.Audit = nil
			y.Flow.Destination = "nowhere"
		}), queue.ErrUnknownDestination},
	}
	for _, c := range cases {
		if err := to.ImportFlow(ctx, c.x, now); !errors.Is(err, c.want) {
			t.Errorf("%s: ImportFlow error = %v, want %v", c.name, err, c.want)
		}
	}
	assertUnchanged(t, "refused imports", before, snap(t, dst))
	if err := to.ImportAudit(ctx, []queue.AuditRecord{{Kind: queue.AuditRedrive, EventID: "a1", Generation: 1, Reason: "r", At: 1}}, now); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("ImportAudit(redrive row) error = %v, want ErrInvalid", err)
	}
	if err := to.ImportAudit(ctx, []queue.AuditRecord{{Kind: queue.AuditPolicy, Reason: "r", Detail: "x", At: 1}}, now); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("ImportAudit(detail not JSON) error = %v, want ErrInvalid", err)
	}
	if _, err := to.FlowNames(ctx, "", 0); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("FlowNames(limit 0) error = %v, want ErrInvalid", err)
	}
	assertUnchanged(t, "refused audit import", before, snap(t, dst))
}

// A new store has no shard label. SetShardLabel refuses an index outside
// 0..Count-1, a count outside 1..MaxShards, a negative epoch (ErrInvalid)
// and an empty reason (ErrEmptyReason); it records a label with one audit
// row of kind shard. Like every write (§2.6) it refuses a tick below the
// mark before looking at the label, and records its tick: the same label
// again changes nothing but the mark; another is ErrShardLabel and changes
// nothing. The label is kept across a reopen.
func queueShard_7_10_Label(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	if bk.Labeled {
		t.Skip("the backend labels every store it opens")
	}
	ctx := context.Background()
	s, loc := bk.openTest(t)
	m := shardMember(t, s)
	if _, ok, err := m.ShardLabel(ctx); ok || err != nil {
		t.Fatalf("ShardLabel of a new store = %v, %v; want none", ok, err)
	}
	for _, l := range []queue.ShardLabel{{Index: 2, Count: 2}, {Index: -1, Count: 2}, {Index: 0, Count: 0}, {Index: 0, Count: queue.MaxShards + 1}, {Index: 0, Count: 1, Epoch: -1}} {
		if err := m.SetShardLabel(ctx, l, "r", 1); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("SetShardLabel(%+v) error = %v, want ErrInvalid", l, err)
		}
	}
	if err := m.SetShardLabel(ctx, queue.ShardLabel{Index: 0, Count: 2}, "", 1); !errors.Is(err, queue.ErrEmptyReason) {
		t.Errorf("SetShardLabel without reason error = %v, want ErrEmptyReason", err)
	}
	want := queue.ShardLabel{Index: 1, Count: 2, Epoch: 3}
	if err := m.SetShardLabel(ctx, want, "split", 5); err != nil {
		t.Fatal(err)
	}
	before := snap(t, s)
	for _, l := range []queue.ShardLabel{want, {Index: 0, Count: 2, Epoch: 3}} {
		err := m.SetShardLabel(ctx, l, "r", 4)
		wantErr(t, fmt.Sprintf("SetShardLabel(%+v) at a past tick", l), err, queue.ErrTimeRegression)
	}
	assertUnchanged(t, "labels at a past tick", before, snap(t, s))
	if err := m.SetShardLabel(ctx, want, "again", 6); err != nil {
		t.Errorf("the same label again: %v", err)
	}
	assertOnlyMark(t, "the same label again", before, snap(t, s), 6)
	before = snap(t, s)
	for _, l := range []queue.ShardLabel{{Index: 0, Count: 2, Epoch: 3}, {Index: 1, Count: 3, Epoch: 3}, {Index: 1, Count: 2, Epoch: 4}} {
		if err := m.SetShardLabel(ctx, l, "r", 7); !errors.Is(err, queue.ErrShardLabel) {
			t.Errorf("SetShardLabel(%+v) on a labeled store error = %v, want ErrShardLabel", l, err)
		}
	}
	assertUnchanged(t, "refused labels", before, snap(t, s))
	all, err := s.AuditAll(ctx)
	if err != nil || len(all) != 1 || all[0].Kind != queue.AuditShard || all[0].Detail != `{"new":{"index":1,"count":2,"epoch":3}}` || all[0].At != 5 {
		t.Errorf("AuditAll = %+v, %v; want one shard row", all, err)
	}
	// The label is in the store: another open reads it.
	again, err := bk.openAt(t, loc)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if l, ok, err := shardMember(t, again).ShardLabel(ctx); !ok || err != nil || l != want {
		t.Errorf("ShardLabel after reopening = %+v, %v, %v; want %+v", l, ok, err, want)
	}
}
