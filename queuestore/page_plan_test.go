package queuestore

import (
	"context"
	"strings"
	"testing"
)

// The console's paged reads go through an index whatever the page: no
// table scan, no temporary B-tree for the order (page.go), except the pages
// of flows in an order other than by name, which read the flows and sort
// them (bounded by the page's LIMIT) before joining only the page's rows
// to their heads.
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
		// readsFlows is set for a page of flows by a key: the flows are
		// read and sorted inside a co-routine, whose LIMIT bounds the rows
		// joined to events.
		readsFlows bool
	}
	queries := map[string]query{
		"audit":          {q: qAuditPage, args: []any{10, 51}, want: "INTEGER PRIMARY KEY", seeks: true},
		"audit of event": {q: qAuditPageEvent, args: []any{10, 51, "e1"}, want: "audit_event", seeks: true},
		"reasons":        {q: qQuarantinedReasons, want: "events_quarantined", sorts: true},
	}
	for _, sort := range []FlowSort{SortByFlow, SortByBacklog, SortByServed, SortByBlocked} {
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
				stmt := flowsPageQuery(key, cursor, backward, false)
				if key == "" {
					queries[name] = query{q: stmt, args: args, want: "sqlite_autoindex_flows_1", seeks: cursor}
				} else {
					queries[name] = query{q: stmt, args: args, want: "CO-ROUTINE f", sorts: true, readsFlows: true}
				}
				queries[name+" head"] = query{q: stmt, args: args, want: "SEARCH e USING INDEX sqlite_autoindex_events_2", sorts: key != "", readsFlows: key != ""}
			}
		}
	}
	for name, f := range map[string]RedriveFilter{"": {}, " flow": {Flow: "f1"}, " reason": {Reason: "boom"}, " both": {Flow: "f1", Reason: "boom"}} {
		page, count, args := quarantinedPageQuery(f)
		idx := "events_quarantined"
		if f.Reason != "" {
			idx = "events_quarantined_reason"
		}
		queries["quarantined page"+name] = query{q: page, args: append(append([]any{"", 0}, args...), 51), want: idx, seeks: true}
		queries["quarantined count"+name] = query{q: count, args: args, want: idx}
	}
	// A name search is a range of the primary key, in any order.
	queries["flows search"] = query{q: flowsPageQuery("", true, false, true), args: []any{0, "f1", "f1", prefixEnd("f1"), 51}, want: "sqlite_autoindex_flows_1", seeks: true}
	queries["flows search by backlog"] = query{q: flowsPageQuery(sortKeys[SortByBacklog], true, false, true), args: []any{0, "f1", "f1", prefixEnd("f1"), 51},
		want: "SEARCH f USING INDEX sqlite_autoindex_flows_1", sorts: true, readsFlows: true}
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
			if strings.HasPrefix(line, "SCAN") && !strings.Contains(line, "INDEX") && (!tc.readsFlows || line != "SCAN f") {
				t.Errorf("%s: plan scans a table: %q\nfull plan:\n%s", name, line, text)
			}
			if strings.Contains(line, "TEMP B-TREE") && !tc.sorts {
				t.Errorf("%s: plan sorts in a temporary B-tree: %q\nfull plan:\n%s", name, line, text)
			}
		}
		if tc.seeks && !strings.Contains(text, "SEARCH f USING INDEX "+tc.want) && !strings.Contains(text, "SEARCH audit USING") && !strings.Contains(text, "SEARCH events USING") {
			t.Errorf("%s: plan does not seek in %s:\n%s", name, tc.want, text)
		}
		if tc.readsFlows && (!strings.Contains(text, "CO-ROUTINE f") || strings.Count(text, "TEMP B-TREE") != 1) {
			t.Errorf("%s: plan does not pick the page's flows (one sort) before joining their heads:\n%s", name, text)
		}
		if !strings.Contains(text, tc.want) {
			t.Errorf("%s: plan does not use %s:\n%s", name, tc.want, text)
		}
	}
}
