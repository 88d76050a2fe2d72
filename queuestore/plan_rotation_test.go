package queuestore

import (
	"context"
	"testing"
)

// §7.6: under FairRotation every statement of the claim, enqueue, settle
// and redrive paths is index-driven too: the pick walks flows_rotation in
// (pass, joined) order, with no scan and no temporary B-tree, and the
// statements that clamp a pass read meta by its primary key.
func TestPlan_7_6_RotationPathUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := DefaultPolicy()
	p.Fairness = FairRotation
	s := openPolicy(t, p)
	var es []Event
	for i := 0; i < 500; i++ {
		es = append(es, Event{ID: "e" + itoa(i), Flow: "f" + itoa(i%50), Body: []byte("x")})
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	if _, err := s.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatalf("ANALYZE error = %v", err)
	}
	checkPlans(t, s, map[string]planCase{
		"promote":       {qRotPromote, []any{1}, "flows_due"},
		"pick heads":    {qRotPickHeads, []any{-1, 0, 64, ""}, "flows_rotation (ready=? AND dest=? AND"},
		"heads' event":  {qRotPickHeads, []any{-1, 0, 64, ""}, "sqlite_autoindex_events_2"},
		"dests' keys":   {qRotPickDestKeys, []any{`["d1",""]`, 2}, "COVERING INDEX flows_rotation (ready=? AND dest=?)"},
		"dests' key":    {qRotPickDestKey, []any{`["d1",""]`}, "COVERING INDEX flows_rotation (ready=? AND dest=?)"},
		"keys of d1":    {qRotPickKeys, []any{-1, 0, 64, "d1"}, "COVERING INDEX flows_rotation (ready=? AND dest=? AND"},
		"load heads":    {qLoadHeads, []any{"[1,2]"}, "INTEGER PRIMARY KEY"},
		"loaded event":  {qLoadHeads, []any{"[1,2]"}, "sqlite_autoindex_events_2"},
		"pick of d1":    {qRotPickHeads, []any{-1, 0, 64, "d1"}, "flows_rotation (ready=? AND dest=? AND"},
		"serve flow":    {qRotServeFlow, []any{1, 6, 720720}, "INTEGER PRIMARY KEY"},
		"serve flows":   {qRotServeFlows, []any{"[[1,720720],[2,720720]]", 6}, "INTEGER PRIMARY KEY"},
		"set clock":     {qRotSetClock, []any{1, 0, 720720}, ""},
		"set head":      {qRotSetHead, []any{"f1", 2, 0, 1, 0}, "sqlite_autoindex_flows_1"},
		"set heads":     {qRotSetHeads, []any{"[[1,2,0],[2,null,null]]", 1}, "INTEGER PRIMARY KEY"},
		"ready now":     {qRotSetReadyNow, []any{"f1", 1}, "sqlite_autoindex_flows_1"},
		"redrive flows": {qRotRedriveFlows, []any{redriveChunkJSON, 1}, "INTEGER PRIMARY KEY"},
		"head weight":   {qFlowHeadWeight, []any{"f1"}, "sqlite_autoindex_flows_1"},
		"arrive":        {qRotArrive, []any{"f1"}, "sqlite_autoindex_flows_1"},
		"join":          {qRotJoin, nil, ""},
		"set weight":    {qSetWeight, []any{"f1", 2}, "sqlite_autoindex_flows_1"},
		"weight audit":  {qInsertAuditKind, []any{"weight", "r", "{}", 1}, ""},
		"find ev flow":  {qFindEventFlow, []any{"e1", "f1"}, "sqlite_autoindex_events_1"},
		"next seq":      {qNextSeq, []any{"f1", 2}, "sqlite_autoindex_flows_1"},
		"claim events":  {qClaimEvents, []any{"[1,2]", 6, 1}, "INTEGER PRIMARY KEY"},
		"due ready":     {qNextDueReady, nil, "INDEX flows_"}, // flows_due, flows_ready or flows_rotation: one seek into the ready flows
		"due waiting":   {qNextDueWaiting, nil, "flows_due"},
		"oldest ready":  {qOldestReady, nil, "flows_due"},
		"block flow":    {qBlockFlow, []any{"f1"}, "sqlite_autoindex_flows_1"},
		"wait flow":     {qWaitFlow, []any{"f1", 3}, "sqlite_autoindex_flows_1"},
		"claim event":   {qClaimEvent, []any{1, 6, 1}, "INTEGER PRIMARY KEY"},
		"quarantine ex": {qQuarantineExpired, []any{"e1"}, "sqlite_autoindex_events_1"},
	})
}

// §7.6: a min_served queue has no rotation index (it would cost every
// write that turns a ready flag), a rotation queue has it, and SetPolicy
// creates and drops it with the switch.
func TestPlan_7_6_RotationIndexFollowsPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	has := func(s *Store) bool {
		t.Helper()
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'flows_rotation'`).Scan(&n); err != nil {
			t.Fatalf("read schema: %v", err)
		}
		return n == 1
	}
	if has(s) {
		t.Fatal("a min_served queue has flows_rotation")
	}
	rot := DefaultPolicy()
	rot.Fairness = FairRotation
	if err := s.SetPolicy(ctx, rot, "bounded waiting", 1); err != nil {
		t.Fatalf("SetPolicy(rotation) error = %v", err)
	}
	if !has(s) {
		t.Fatal("after SetPolicy(rotation) there is no flows_rotation")
	}
	if err := s.SetPolicy(ctx, DefaultPolicy(), "back", 2); err != nil {
		t.Fatalf("SetPolicy(min_served) error = %v", err)
	}
	if has(s) {
		t.Fatal("after SetPolicy(min_served) flows_rotation is still there")
	}
	if !has(openPolicy(t, rot)) {
		t.Fatal("a new rotation queue has no flows_rotation")
	}
}
