package pgqueuestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// pageSeedFlows is how many flows seedPages makes: the console's
// realistic size (queue.Pager).
const pageSeedFlows = 100_000

// seedPages fills the store's tables with set-based inserts, in a few
// seconds: 100,000 flows in 500 tenants (tenant-NNN/flow-NNNNNN), every
// tenth with three events; a third idle (every event acked), a third ready,
// a third waiting, one in seven of those with a quarantined head (reasons
// "gap" and "boom"); served counts 0..96; 100,000 policy audit rows and one
// redrive row per quarantined event. The rows keep every CHECK of the
// schema (the claim and settle paths are not what is measured here); the
// tables are then vacuumed and analyzed, as autovacuum would.
func seedPages(tb testing.TB, s *Store) {
	tb.Helper()
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready, head_enqueued_at)
SELECT format('tenant-%s/flow-%s', lpad((i % 500)::text, 3, '0'), lpad(i::text, 6, '0')),
       CASE WHEN i % 10 = 0 THEN 3 ELSE 1 END, i % 97,
       CASE WHEN i % 3 = 0 THEN NULL ELSE 1 END,
       CASE WHEN i % 3 = 0 THEN NULL WHEN i % 3 = 1 THEN i % 50 WHEN i % 7 = 0 THEN NULL ELSE 1000 END,
       i % 3 = 1,
       CASE WHEN i % 3 = 0 THEN NULL ELSE 0 END
FROM generate_series(0, ` + fmt.Sprint(pageSeedFlows-1) + `) AS i`,
		`INSERT INTO {s}.flow_seqs (flow, last_seq) SELECT flow, last_seq FROM {s}.flows`,
		`INSERT INTO {s}.events (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at)
SELECT f.flow || '#' || n, f.flow, n, '\x78'::bytea, st,
       CASE st WHEN 'quarantined' THEN 3 WHEN 'acked' THEN 1 ELSE 0 END,
       CASE st WHEN 'quarantined' THEN 3 WHEN 'acked' THEN 1 ELSE 0 END,
       CASE st WHEN 'quarantined' THEN 3 WHEN 'acked' THEN 1 ELSE 0 END,
       0, 0, 0,
       CASE WHEN st <> 'quarantined' THEN '' WHEN right(f.flow, 1) < '3' THEN 'gap' ELSE 'boom' END, 0
FROM {s}.flows f, generate_series(1, f.last_seq) AS n,
     LATERAL (SELECT CASE WHEN f.head_seq IS NULL THEN 'acked'
                          WHEN n = 1 AND f.ready_at IS NULL THEN 'quarantined' ELSE 'pending' END AS st) AS x`,
		`INSERT INTO {s}.audit (id, kind, reason, detail, at)
SELECT i, 'policy', 'seed', '{}', i FROM generate_series(1, ` + fmt.Sprint(pageSeedFlows) + `) AS i`,
		`INSERT INTO {s}.audit (id, kind, event_id, generation, reason, at)
SELECT ` + fmt.Sprint(pageSeedFlows) + ` + row_number() OVER (ORDER BY id), 'redrive', id, 3, 'fixed', 200000
FROM {s}.events WHERE quarantined`,
		`INSERT INTO {s}.attempts (event_id, generation, attempt, at, outcome, reason, error)
SELECT id, generation, attempts, 100, 'quarantined', reason, 'dial tcp: connection refused' FROM {s}.events WHERE quarantined`,
		`UPDATE {s}.meta SET clock_mark = 500 WHERE id = 1`,
		`VACUUM ANALYZE {s}.flows`, `VACUUM ANALYZE {s}.events`, `VACUUM ANALYZE {s}.audit`, `VACUUM ANALYZE {s}.attempts`,
	} {
		if _, err := s.pool.Exec(ctx, s.q(sql)); err != nil {
			tb.Fatalf("seed: %v\n%s", err, sql)
		}
	}
}

// explained is one EXPLAIN (ANALYZE, BUFFERS) of a statement: its nodes
// (type, relation, index) and the shared buffers it read.
type explained struct {
	nodes   []string
	buffers int64
}

// explainAnalyze runs sql with args under EXPLAIN (ANALYZE, BUFFERS,
// FORMAT JSON) in tx and returns its nodes and buffers.
func explainAnalyze(t *testing.T, tx pgx.Tx, sql string, args ...any) explained {
	t.Helper()
	var js []byte
	if err := tx.QueryRow(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&js); err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	var plans []struct{ Plan map[string]any }
	if err := json.Unmarshal(js, &plans); err != nil {
		t.Fatal(err)
	}
	var out explained
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		s := fmt.Sprint(n["Node Type"])
		if r, ok := n["Relation Name"]; ok {
			s += " on " + fmt.Sprint(r)
		}
		if i, ok := n["Index Name"]; ok {
			s += " using " + fmt.Sprint(i)
		}
		out.nodes = append(out.nodes, s)
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	walk(plans[0].Plan)
	for _, k := range []string{"Shared Hit Blocks", "Shared Read Blocks"} {
		if v, ok := plans[0].Plan[k].(float64); ok {
			out.buffers += int64(v)
		}
	}
	return out
}

// maxPageBuffers bounds the shared buffers one page of 50 reads: its index
// entries, its rows and one probe of events per flow for the head's state.
// The flows table of seedPages is over 1,000 pages and events over 2,000:
// a read of either whole, or a sort of all flows, is far above it.
const maxPageBuffers = 600

// narrowPrefixBuffers bounds a page of a prefix of 200 flows in an order by
// a key, when the server reads the prefix's names and sorts them: 200 rows
// of flows and 200 probes of events, well below a read of either table.
const narrowPrefixBuffers = 1000

// Every paged read of the console is index-driven at 100,000 flows
// (seedPages): the first page and the last, forward and backward, of each
// order, with and without a prefix, run as index range reads, with no
// sequential scan of flows, events or audit and no Sort, and read at most
// maxPageBuffers shared buffers. The exceptions are named: a page of flows
// in an order other than by name (migration 10, sortKeys) reads the flows
// (the prefix's names with a prefix) and sorts them, keeping Limit+1, and
// probes events for those rows only: at most the flows table's pages and
// maxPageBuffers; the reasons' count sorts its groups (the reasons, not the
// rows). The pages' statements are the store's own (flowsPageQuery,
// quarantinedPageQuery, the audit's), with cursors the store handed out.
func TestPlans_PagedReads(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	seedPages(t, s)
	type check struct {
		name, sql string
		args      []any
		want      string // an index the plan must use ("" for any)
		sorts     bool   // a Sort is allowed (bounded: see above)
		buffers   int64  // the most shared buffers it may read
		scans     bool   // a Seq Scan of flows is allowed (an order by a key)
	}
	var flowPages int64
	if err := s.pool.QueryRow(ctx, s.q(`SELECT relpages FROM pg_class WHERE oid = '{s}.flows'::regclass`)).Scan(&flowPages); err != nil || flowPages < 1000 {
		t.Fatalf("flows has %d pages, %v; want the seed's 1,000 or more", flowPages, err)
	}
	var checks []check
	for _, sort := range []queue.FlowSort{queue.SortByFlow, queue.SortByBacklog, queue.SortByServed, queue.SortByBlocked} {
		idx := "" // an order by a key has no index (migration 10)
		if sort == queue.SortByFlow {
			idx = "flows_pkey"
		}
		last, err := s.FlowsPage(ctx, queue.FlowQuery{Sort: sort, Last: true})
		if err != nil || last.Prev == "" || len(last.Flows) != queue.DefaultPageLimit {
			t.Fatalf("FlowsPage(%s, Last) = %d flows, Prev %q, %v", sort, len(last.Flows), last.Prev, err)
		}
		lastCur, err := queue.ParseCursor(last.Prev)
		if err != nil {
			t.Fatal(err)
		}
		// The cursor before the last page: its Prev's page ends there.
		before, err := s.FlowsPage(ctx, queue.FlowQuery{Sort: sort, Before: last.Prev})
		if err != nil || before.Prev == "" {
			t.Fatalf("FlowsPage(%s, Before) = %+v, %v", sort, before.Prev, err)
		}
		beforeCur, _ := queue.ParseCursor(before.Prev)
		key := sortKeys[sort]
		n := queue.DefaultPageLimit + 1
		add := func(name string, cur *queue.Cursor, backward bool, prefix []string, want string, sorts bool) {
			sql, args := flowsPageQuery(key, cur, backward, prefix, n)
			buffers := int64(maxPageBuffers)
			if sorts {
				// The prefix's 200 flows, each with its head's probe.
				buffers = narrowPrefixBuffers
			}
			c := check{fmt.Sprintf("flows by %s, %s", sort, name), sql, args, want, sorts, buffers, false}
			if key != "" && !sorts {
				// No index (migration 10): the flows, a bounded sort, and
				// the page's rows joined to their heads.
				c.scans, c.sorts, c.buffers = true, true, flowPages+maxPageBuffers
			}
			checks = append(checks, c)
		}
		add("first page", nil, false, nil, idx, false)
		add("last page (Last)", nil, true, nil, idx, false)
		add("page after the cursor before the last", &beforeCur, false, nil, idx, false)
		add("page before the last (Before)", &lastCur, true, nil, idx, false)
		lo, hi, _ := prefixRange("tenant-")
		add("wide prefix, first page", nil, false, []string{lo, hi}, "", false)
		add("wide prefix, after a cursor", &beforeCur, false, []string{lo, hi}, "", false)
		lo, hi, _ = prefixRange("tenant-042/")
		add("narrow prefix, first page", nil, false, []string{lo, hi}, "", true)
		add("narrow prefix, last page", nil, true, []string{lo, hi}, "", true)
	}
	qs, err := s.QuarantinedPage(ctx, queue.QuarantinedQuery{Limit: queue.MaxPageLimit})
	if err != nil || qs.Next == "" || qs.Total < 4000 {
		t.Fatalf("QuarantinedPage = %d events of %d, Next %q, %v; want a full page of many", len(qs.Events), qs.Total, qs.Next, err)
	}
	far := qs.Events[len(qs.Events)-1]
	for _, f := range []queue.RedriveFilter{{}, {Reason: "gap"}, {Flow: far.Flow}, {Flow: far.Flow, Reason: far.Reason}} {
		page, count, args := quarantinedPageQuery(f)
		want := "events_quarantined"
		if f.Reason != "" && f.Flow == "" {
			want = "events_quarantined_reason"
		}
		for _, at := range []struct {
			name string
			flow string
			seq  int64
		}{{"first page", "", 0}, {"after a cursor", far.Flow, far.Seq}} {
			checks = append(checks, check{fmt.Sprintf("quarantined %+v, %s", f, at.name), page,
				append([]any{at.flow, at.seq, queue.DefaultPageLimit + 1}, args...), want, false, maxPageBuffers, false})
		}
		checks = append(checks, check{fmt.Sprintf("quarantined %+v, count", f), count, args, "", false, maxPageBuffers, false})
	}
	checks = append(checks,
		check{"quarantined reasons", qQuarantinedReasons, nil, "events_quarantined_reason", true, maxPageBuffers, false},
		check{"audit, first page", qAuditPage, []any{int64(1<<63 - 1), queue.DefaultPageLimit + 1}, "audit_pkey", false, maxPageBuffers, false},
		check{"audit, an old page", qAuditPage, []any{int64(100), queue.DefaultPageLimit + 1}, "audit_pkey", false, maxPageBuffers, false},
		check{"audit of an event", qAuditPageEvent, []any{int64(1<<63 - 1), queue.DefaultPageLimit + 1, far.EventID}, "audit_event", false, maxPageBuffers, false},
		check{"clock mark", qClockMark, nil, "", false, 10, false},
	)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, c := range checks {
		e := explainAnalyze(t, tx, s.q(c.sql), c.args...)
		joined := strings.Join(e.nodes, " / ")
		for _, n := range e.nodes {
			if (strings.HasPrefix(n, "Seq Scan on flows") && !c.scans) || strings.HasPrefix(n, "Seq Scan on events") || strings.HasPrefix(n, "Seq Scan on audit") {
				t.Errorf("%s scans: %s", c.name, joined)
			}
			if (n == "Sort" || n == "Incremental Sort") && !c.sorts {
				t.Errorf("%s sorts: %s", c.name, joined)
			}
		}
		if c.want != "" && !strings.Contains(joined, "using "+c.want) {
			t.Errorf("%s does not use %s: %s", c.name, c.want, joined)
		}
		if e.buffers > c.buffers {
			t.Errorf("%s read %d buffers, more than %d: %s", c.name, e.buffers, c.buffers, joined)
		}
		t.Logf("%s: %d buffers: %s", c.name, e.buffers, joined)
	}
}
