package pgqueuestore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
)

// TestPlans_TransplantIndexDriven: with 2,000 flows of 3 events, an
// attempt row per event and a weight row per flow, analyzed, an export reads one flow's rows through
// keys and indexes, the audit rows about it through audit_event and
// audit_flow: no sequential scan of flows, events or audit.
func TestPlans_TransplantIndexDriven(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	var es []queue.Event
	for k := range 3 {
		for f := range 2000 {
			es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%d", f), Body: []byte("x")})
		}
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.q(`INSERT INTO {s}.audit (id, kind, reason, detail, at)
SELECT g, 'weight', 'w', '{"flow":"f' || g || '","old":1,"new":2}', 1 FROM generate_series(1, 2000) AS g`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.q(`INSERT INTO {s}.attempts (event_id, generation, attempt, at, outcome, reason, error)
SELECT id, 1, 1, 1, 'retry_scheduled', 'r', '' FROM {s}.events`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.flows; ANALYZE {s}.events; ANALYZE {s}.audit; ANALYZE {s}.flow_seqs; ANALYZE {s}.attempts`)); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	cases := []struct {
		name, sql string
		args      []any
		want      string
	}{
		{"flow names", qFlowNames, []any{"f1", 10}, "flow_seqs_pkey"},
		{"export flow", qExportFlow, []any{"f1"}, "flows_pkey"},
		{"export events", qExportEvents, []any{"f1"}, "events_flow_seq_key"},
		{"export history", qExportHistory, []any{"f1"}, "attempts_pkey"},
		{"audit by flow", qExportAudit, []any{"f1"}, "audit_flow"},
		{"audit redrive", qExportAudit, []any{"f1"}, "audit_event"},
		{"find flow", qImportFindFlow, []any{"f1"}, "flow_seqs_pkey"},
		{"find events", qImportFindEvents, []any{[]string{"e1-1", "e2-2"}}, "events_pkey"},
	}
	// Each as the export's read transaction plans it, then as the
	// import's write transaction runs it (qKeyPlans: its generic plan).
	for i := range 2 * len(cases) {
		c := cases[i%len(cases)]
		var nodes []string
		if i < len(cases) {
			nodes = planNodes(t, tx, s.q(c.sql), c.args...)
		} else {
			nodes = pgtest.GenericPlanNodes(t, tx, qKeyPlans, s.q(c.sql), c.args...)
		}
		text := strings.Join(nodes, "\n")
		if strings.Contains(text, "Seq Scan") {
			t.Errorf("%s: a sequential scan:\n%s", c.name, text)
		}
		if !strings.Contains(text, c.want) {
			t.Errorf("%s: plan does not use %s:\n%s", c.name, c.want, text)
		}
	}
}
