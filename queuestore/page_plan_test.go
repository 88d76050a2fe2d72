package queuestore

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// The console's paged reads go through an index whatever the page: no
// table scan, no temporary B-tree for the order (page.go).
func TestPlan_PagedReadsUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
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
	type query struct {
		q    string
		args []any
		want string
		// sorts is set where a temporary B-tree is expected and bounded:
		// grouping the quarantined events (only those) by reason.
		sorts bool
		// seeks is set for a page after a cursor: its index must be
		// searched (a range that starts at the cursor), never scanned
		// from its start.
		seeks bool
	}
	queries := map[string]query{
		"audit":          {qAuditPage, []any{10, 51}, "INTEGER PRIMARY KEY", false, true},
		"audit of event": {qAuditPageEvent, []any{10, 51, "e1"}, "audit_event", false, true},
		"reasons":        {qQuarantinedReasons, nil, "events_quarantined", true, false},
	}
	index := map[FlowSort]string{
		SortByFlow:    "sqlite_autoindex_flows_1",
		SortByBacklog: "flows_by_backlog",
		SortByServed:  "flows_by_served",
		SortByBlocked: "flows_by_blocked",
	}
	for sort, idx := range index {
		key := sortKeys[sort]
		for _, cursor := range []bool{false, true} {
			for _, backward := range []bool{false, true} {
				name := "flows " + string(sort)
				if cursor {
					name += " cursor"
				}
				if backward {
					name += " backward"
				}
				args := []any{-3, "f1", "", prefixEnd(""), 51}
				for i, stmt := range flowsPageQueries(key, cursor, backward, false) {
					n := fmt.Sprintf("%s #%d", name, i+1)
					queries[n] = query{stmt, args, idx, false, cursor}
					queries[n+" head"] = query{stmt, args, "sqlite_autoindex_events_2", false, false}
				}
			}
		}
	}
	for name, f := range map[string]RedriveFilter{"": {}, " flow": {Flow: "f1"}, " reason": {Reason: "boom"}, " both": {Flow: "f1", Reason: "boom"}} {
		page, count, args := quarantinedPageQuery(f)
		idx := "events_quarantined"
		if f.Reason != "" {
			idx = "events_quarantined_reason"
		}
		queries["quarantined page"+name] = query{page, append(append([]any{"", 0}, args...), 51), idx, false, true}
		queries["quarantined count"+name] = query{count, args, idx, false, false}
	}
	// A name search is a range of the primary key.
	queries["flows search"] = query{flowsPageQueries("", true, false, true)[0], []any{0, "f1", "f1", prefixEnd("f1"), 51}, "sqlite_autoindex_flows_1", false, true}
	for name, tc := range queries {
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
		for _, line := range plan {
			// A SCAN through an index in the page's order stops at LIMIT;
			// a SCAN without one reads the whole table.
			if strings.HasPrefix(line, "SCAN") && !strings.Contains(line, "INDEX") {
				t.Errorf("%s: plan scans a table: %q\nfull plan:\n%s", name, line, text)
			}
			if strings.Contains(line, "TEMP B-TREE") && !tc.sorts {
				t.Errorf("%s: plan sorts in a temporary B-tree: %q\nfull plan:\n%s", name, line, text)
			}
		}
		if tc.seeks && !strings.Contains(text, "SEARCH f USING INDEX "+tc.want) && !strings.Contains(text, "SEARCH audit USING") && !strings.Contains(text, "SEARCH events USING") {
			t.Errorf("%s: plan does not seek in %s:\n%s", name, tc.want, text)
		}
		if !strings.Contains(text, tc.want) {
			t.Errorf("%s: plan does not use %s:\n%s", name, tc.want, text)
		}
	}
}
