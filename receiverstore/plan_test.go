package receiverstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Batch operations and retention: the statements ReceiveBatch, the accept
// check, Prune and Prunable run find every row through an index or the
// rowid, never by scanning receipts or flows,
// and sort nothing in a temporary B-tree. Plans are read after ANALYZE on
// a store with many flows and receipts.
func TestPlan_BatchStatementsUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := open(t)
	var ms []Message
	for i := range 500 {
		ms = append(ms, Message{ID: fmt.Sprintf("m%d", i), Flow: fmt.Sprintf("f%d", i%50), Seq: int64(i/50 + 1), Body: []byte(`{"delta": 1}`)})
	}
	if _, err := s.ReceiveBatch(ctx, ms); err != nil {
		t.Fatalf("ReceiveBatch() error = %v", err)
	}
	if _, err := s.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatalf("ANALYZE error = %v", err)
	}
	for name, tc := range map[string]struct {
		q    string
		args []any
		want []string // what the plan must name
	}{
		"check rows":    {qCheckRows, []any{"m1", "f1", 2}, []string{"sqlite_autoindex_receipts_1", "sqlite_autoindex_receipts_2", "sqlite_autoindex_flows_1"}},
		"advance flows": {qAdvanceFlows, []any{"[[1,1,2,3],[2,1,2,3]]"}, []string{"INTEGER PRIMARY KEY"}},
		"check":         {qCheck, []any{"m1", "f1", 2}, []string{"sqlite_autoindex_receipts_1", "sqlite_autoindex_receipts_2", "sqlite_autoindex_flows_1"}},
		// Retention (docs/contract.md §7.9, prune.go).
		"prune batch":  {qPruneBatch, []any{int64(1) << 62, 1000}, []string{"receipts_accepted_at"}},
		"prune delete": {qPruneDelete, []any{"[1,2,3]"}, []string{"INTEGER PRIMARY KEY"}},
		"prune mark":   {qPruneMark, []any{`[["f1",3],["f2",4]]`}, []string{"sqlite_autoindex_flows_1"}},
		"prunable":     {qPrunable, []any{int64(1) << 62}, []string{"COVERING INDEX receipts_accepted_at"}},
	} {
		rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+tc.q, tc.args...)
		if err != nil {
			t.Fatalf("%s: EXPLAIN QUERY PLAN error = %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatalf("%s: scan plan: %v", name, err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		t.Logf("%s:\n%s", name, text)
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN receipts") || strings.HasPrefix(line, "SCAN flows") ||
				strings.HasPrefix(line, "SCAN r") || strings.HasPrefix(line, "SCAN o") || strings.HasPrefix(line, "SCAN f") {
				t.Errorf("%s: plan scans a table: %q\nfull plan:\n%s", name, line, text)
			}
			if strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("%s: plan sorts in a temporary B-tree: %q", name, line)
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: plan does not use %s:\n%s", name, w, text)
			}
		}
	}
}
