package queuestore

import (
	"context"
	"testing"
)

// TestPlan_TransplantUsesIndexes: an export reads one flow through the
// flows key, its events through (flow, seq), its audit rows through
// audit_event and audit_flow; an import finds flows and events by key;
// FlowNames reads one range of the flows key.
func TestPlan_TransplantUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	var es []Event
	for i := 0; i < 500; i++ {
		es = append(es, Event{ID: "e" + itoa(i), Flow: "f" + itoa(i%50), Body: []byte("x")})
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := s.SetWeight(ctx, "f"+itoa(i), 2, "w", 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	checkPlans(t, s, map[string]planCase{
		"flow names":    {qFlowNames, []any{"f1", 10}, "sqlite_autoindex_flows_1"},
		"export flow":   {qExportFlow, []any{"f1"}, "sqlite_autoindex_flows_1"},
		"export events": {qExportEvents, []any{"f1"}, "sqlite_autoindex_events_2"},
		"audit by flow": {qExportAudit, []any{"f1"}, "audit_flow"},
		"audit redrive": {qExportAudit, []any{"f1"}, "audit_event"},
		"find flow":     {qImportFindFlow, []any{"f1"}, "sqlite_autoindex_flows_1"},
		"find event":    {qImportFindEvent, []any{"e1"}, "sqlite_autoindex_events_1"},
	})
}
