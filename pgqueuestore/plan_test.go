package pgqueuestore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// planNodes is pgtest.PlanNodes: the plan's nodes, run inside tx.
func planNodes(t *testing.T, tx pgx.Tx, sql string, args ...any) []string {
	t.Helper()
	return pgtest.PlanNodes(t, tx, sql, args...)
}

// The claim, settle, extend, redrive and next-due paths are index-driven
// on PostgreSQL as they are on SQLite: with 3,000 flows of 4 events,
// analyzed, no statement that a write or NextDue runs scans flows or
// events sequentially, and the pick uses flows_ready (MinServed order
// straight from the index).
func TestPlans_IndexDriven(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	fillForPlans(t, s, false)
	// A history the size of a queue that failed often: three rows for
	// every event, besides the settles' own.
	if _, err := s.pool.Exec(ctx, s.q(`INSERT INTO {s}.attempts (event_id, generation, attempt, at, outcome, reason, error)
SELECT e.id, g, 1, 1, 'retry_scheduled', 'unavailable', 'connection refused' FROM {s}.events AS e, generate_series(1, 3) AS g
ON CONFLICT DO NOTHING`)); err != nil {
		t.Fatal(err)
	}
	// Audit rows and acks of many ticks, as a long-lived queue has, for
	// Prune's plans.
	if _, err := s.pool.Exec(ctx, s.q(`INSERT INTO {s}.audit (id, kind, reason, detail, at)
SELECT i, 'pause', 'ops', '{"flow":"f0001"}', i FROM generate_series(1, 20000) AS i`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.q(`INSERT INTO {s}.acked (at, event_id)
SELECT 100 + i, 'gone-' || i FROM generate_series(1, 20000) AS i`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.flows; ANALYZE {s}.events; ANALYZE {s}.audit; ANALYZE {s}.meta; ANALYZE {s}.attempts;
ANALYZE {s}.flow_seqs; ANALYZE {s}.acked; ANALYZE {s}.arrivals`)); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, c := range indexCases() {
		checkPlan(t, c, planNodes(t, tx, s.q(c.sql), c.args...), false)
	}
	// A write transaction runs each statement's generic plan
	// (qKeyPlans): index-driven too.
	for _, c := range indexCases() {
		checkPlan(t, c, pgtest.GenericPlanNodes(t, tx, qKeyPlans, s.q(c.sql), c.args...), false)
	}
}

// A connection makes a write statement's generic plan once (qKeyPlans)
// and keeps it while the tables grow: made on a new store, empty and never
// analyzed, every one still reaches its rows through the index the
// analyzed store's plans use, so a queue that grows from nothing never
// scans (docs/decisions/postgres-custom-plans.md).
func TestPlans_GenericOnEmptyStore(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, c := range indexCases() {
		checkPlan(t, c, pgtest.GenericPlanNodes(t, tx, qKeyPlans, s.q(c.sql), c.args...), false)
	}
	for _, c := range rotationCases() {
		checkPlan(t, c, pgtest.GenericPlanNodes(t, tx, qKeyPlans, s.q(c.sql), c.args...), true)
	}
}

// Under the rotation the claim is index-driven too: with 3,000 flows of
// 4 events in a rotation queue, analyzed, the pick reads flows_rotation
// ((pass, joined) order straight from the index, no sort), the promotion
// flows_waiting, and no statement of the rotation's claim, settle,
// redrive, enqueue or SetWeight scans flows or events sequentially.
func TestPlans_RotationIndexDriven(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t, WithPolicy(rotationPolicy()))
	fillForPlans(t, s, true)
	if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.flows; ANALYZE {s}.events; ANALYZE {s}.audit; ANALYZE {s}.meta; ANALYZE {s}.attempts`)); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, c := range rotationCases() {
		checkPlan(t, c, planNodes(t, tx, s.q(c.sql), c.args...), true)
	}
	for _, c := range rotationCases() {
		checkPlan(t, c, pgtest.GenericPlanNodes(t, tx, qKeyPlans, s.q(c.sql), c.args...), true)
	}
}

func ptr(v int64) *int64 { return &v }

// fillForPlans enqueues 3,000 flows of 4 events into s (weights 1 to 3
// when weighted), claims 600 heads and settles them: some flows in flight,
// some waiting for a retry, a few quarantined.
func fillForPlans(t *testing.T, s *Store, weighted bool) {
	t.Helper()
	ctx := context.Background()
	var es []queue.Event
	for k := range 4 {
		for f := range 3000 {
			e := queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%04d", f), Body: []byte("x")}
			if weighted {
				e.Weight = 1 + f%3
			}
			es = append(es, e)
		}
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimBatch(ctx, 1, 600)
	if err != nil {
		t.Fatal(err)
	}
	var items []queue.SettleItem
	for i, c := range cs {
		r := queue.Result{OK: true}
		if i%3 == 0 {
			r = queue.Result{Reason: "unavailable"}
		}
		items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: r})
	}
	if _, err := s.SettleBatch(ctx, items, 1); err != nil {
		t.Fatal(err)
	}
}

// A plan case is a statement, arguments to plan it with, and an index its
// plan must use ("" for any).
type planCase struct {
	name, sql string
	args      []any
	want      string
}

// checkPlan fails t when nodes, the plan of c, scans a table of the
// queue's sequentially, sorts when noSort says it must not, or misses c's
// index.
func checkPlan(t *testing.T, c planCase, nodes []string, noSort bool) {
	t.Helper()
	joined := strings.Join(nodes, " / ")
	for _, n := range nodes {
		for _, table := range []string{"flows", "events", "attempts", "flow_seqs", "acked", "audit"} {
			if n == "Seq Scan on "+table {
				t.Errorf("%s scans: %s", c.name, joined)
			}
		}
		if noSort && n == "Sort" {
			t.Errorf("%s sorts: %s", c.name, joined)
		}
	}
	if c.want != "" && !strings.Contains(joined, "using "+c.want) {
		t.Errorf("%s does not use %s: %s", c.name, c.want, joined)
	}
	t.Logf("%s: %s", c.name, joined)
}

// indexCases are the statements of the claim, settle, extend, redrive,
// enqueue, prune and next-due paths, with arguments for the store
// TestPlans_IndexDriven builds.
func indexCases() []planCase {
	return []planCase{
		{"take arrivals", qTakeArrivals, nil, ""},
		{"promote", qPromote, []any{int64(5)}, "flows_waiting"},
		// §7.9 and the transactional enqueue.
		{"lock flows", qLockSeqs, []any{[]string{"f0001", "new"}}, ""},
		{"read flows' counters", qReadSeqs, []any{[]string{"f0001", "f0002"}}, "flow_seqs_pkey"},
		{"set flows' counters", qSetSeqs, []any{[]string{"f0001", "f0002"}, []int64{5, 5}}, "flow_seqs_pkey"},
		{"insert events", qInsertEventsAt, []any{[]string{"x-1"}, []string{"f0001"}, []int64{5}, [][]byte{[]byte("x")}, []int64{9}, int64(4)}, ""},
		{"promote arrivals", qPromoteArrivals, []any{[]string{"f0001", "f0002", "new"}}, "flow_seqs_pkey"},
		{"record acks", qRecordAcks, []any{[]string{"e1-0", "e2-0"}, int64(4)}, ""},
		{"flow paused", qFlowPaused, []any{"f0001"}, "flows_pkey"},
		{"pause", qPause, []any{"f0001", "ops"}, "flows_pkey"},
		{"resume", qResume, []any{"f0001", int64(4), int64(4), false}, "flows_pkey"},
		{"prune events", qPruneEvents, []any{int64(1), 100}, "acked_pkey"},
		{"prune events: redrive rows", qPruneEvents, []any{int64(1), 100}, "audit_event"},
		{"prune audit", qPruneAudit, []any{int64(100), 100}, "audit_at"},
		// Prunable counts every prunable row: at a cutoff below the
		// acks (all at 1) and the audit rows, each count is an index range.
		{"prunable", qPrunable, []any{int64(0)}, "audit_at"},
		{"prunable acks", qPrunable, []any{int64(0)}, "acked_pkey"},
		{"pick head", qPickHead, nil, "flows_ready"},
		{"pick heads (ClaimBatch's page)", qPickHeads + " LIMIT 64", nil, "flows_ready"},
		{"claim event", qClaimEvent, []any{"e1-1", int64(10), int64(1)}, ""},
		{"serve flow", qServeFlow, []any{"f0001", int64(10)}, ""},
		{"claim events", qClaimEvents, []any{[]string{"e1-1", "e2-1"}, int64(10), int64(1)}, ""},
		{"serve flows", qServeFlows, []any{[]string{"f0001", "f0002"}, int64(10)}, ""},
		{"settle read", qSettleRead, []any{"e1-0"}, ""},
		{"settle read many", qSettleReadMany, []any{[]string{"e1-0", "e2-0", "e3-1", "nope"}}, ""},
		{"set head", qSetHead, []any{"f0001", int64(2), int64(3), int64(4), int64(1)}, ""},
		{"ack many", qAckMany, []any{[]string{"e1-0", "e2-0"}, int64(4)}, ""},
		{"set heads", qSetHeads, []any{[]string{"f0001", "f0002"}, []*int64{ptr(2), nil}, []*int64{ptr(3), nil}, int64(4), []*int64{ptr(1), nil}}, ""},
		{"retry many", qRetryMany, []any{[]string{"e1-0", "e2-0"}, []int64{5, 6}, []string{"a", "b"}}, ""},
		{"wait flows", qWaitFlows, []any{[]string{"f0001", "f0002"}, []int64{5, 6}}, ""},
		{"quarantine many", qQuarantineMany, []any{[]string{"e1-0", "e2-0"}, []string{"a", "b"}}, ""},
		{"block flows", qBlockFlows, []any{[]string{"f0001", "f0002"}}, ""},
		{"find events", qFindEvents, []any{[]string{"e1-0", "e2-3", "nope"}}, ""},
		{"next seqs", qNextSeqs, []any{[]string{"f0001", "f0002"}, []int64{5, 5}, []int64{6, 7}, int64(4), []int64{4, 4}}, ""},
		{"find flows", qFindFlows, []any{[]string{"f0001", "f0002", "nope"}}, ""},
		{"next due ready", qNextDueReady, nil, "flows_ready"},
		{"next due waiting", qNextDueWaiting, nil, "flows_waiting"},
		{"oldest ready", qOldestReady, nil, "flows_ready_due"},
		{"oldest waiting", qOldestWaiting, nil, "flows_head_enqueued"},
		{"redrive read", qRedriveRead, []any{"e1-0"}, ""},
		{"quarantined by reason", `SELECT id FROM {s}.events WHERE quarantined AND reason = $1 ORDER BY flow, seq LIMIT 500`, []any{"unavailable"}, "events_quarantined_reason"},
		{"quarantined", `SELECT id FROM {s}.events WHERE quarantined ORDER BY flow, seq LIMIT 500`, nil, "events_quarantined"},
		{"insert history", qInsertHistory, []any{[]string{"e1-1", "e2-1"}, []int64{1, 1}, []int64{1, 1},
			[]string{"quarantined", "retry_scheduled"}, []string{"a", "b"}, []string{"", "x"}, int64(2)}, ""},
		{"trim history", qTrimHistory, []any{[]string{"e0-0", "e3-0"}, int64(queue.MaxHistory)}, "attempts_pkey"},
		{"event with history", qEventHistory, []any{"e0-0"}, "attempts_pkey"},
		{"quarantined with errors", `SELECT id, ` + qErrorCol + ` FROM {s}.events WHERE quarantined ORDER BY flow, seq LIMIT 500`, nil, "attempts_pkey"},
	}
}

// rotationCases are the rotation's statements, for the store
// TestPlans_RotationIndexDriven builds; none may sort.
func rotationCases() []planCase {
	return []planCase{
		{"promote", qRotPromote, []any{int64(5)}, "flows_waiting"},
		{"pick head", qRotPickHead, nil, "flows_rotation"},
		{"pick heads (ClaimBatch's page)", qRotPickHeads + " LIMIT 64", nil, "flows_rotation"},
		{"serve flow", qRotServeFlow, []any{"f0001", int64(10), int64(720720)}, ""},
		{"serve flows", qRotServeFlows, []any{[]string{"f0001", "f0002"}, int64(10), []int64{720720, 5}}, ""},
		{"set clock", qRotSetClock, []any{int64(601), int64(5), int64(720720)}, ""},
		{"set head", qRotSetHead, []any{"f0001", int64(2), int64(3), int64(4), int64(1)}, ""},
		{"set heads", qRotSetHeads, []any{[]string{"f0001", "f0002"}, []*int64{ptr(2), nil}, []*int64{ptr(3), nil}, int64(4), []*int64{ptr(1), nil}}, ""},
		{"set ready now", qRotSetReadyNow, []any{"f0001", int64(4)}, ""},
		{"flow head and weight", qFlowHeadWeight, []any{"f0001"}, ""},
		{"arrive", qRotArrive, []any{"f0001"}, ""},
		{"set weight", qSetWeight, []any{"f0001", 3}, ""},
	}
}

// settle_claim's statements run under the plan settings of a write
// transaction (its SET clauses, as qKeyPlans), with generic plans: each
// reaches flows and events through the index the Go statements of the
// same step use (TestPlans_IndexDriven), never by a sequential scan,
// never JIT-compiled or in parallel, on the store fillForPlans makes,
// with and without an ANALYZE first. auto_explain sends the plans of the
// function's statements, as they run, to the client (pgtest.ExplainNested;
// the test is skipped without it). A ClaimBatch, a SettleClaimBatch, a
// Claim and a Settle run, each one call (migrations 11 and 13).
func TestPlans_SettleClaim(t *testing.T) {
	for _, analyze := range []bool{false, true} {
		t.Run(fmt.Sprintf("analyzed=%v", analyze), func(t *testing.T) {
			ctx := context.Background()
			s, url, schema := open(t)
			fillForPlans(t, s, false)
			if analyze {
				if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.flows; ANALYZE {s}.events; ANALYZE {s}.meta; ANALYZE {s}.acked`)); err != nil {
					t.Fatal(err)
				}
			}
			c := pgtest.NewCallCounter("settle_claim")
			n := pgtest.ExplainNested(t, url, c)
			e, err := OpenPool(ctx, n.Pool, WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			n.Plans()
			cs, err := e.ClaimBatch(ctx, 2, 16)
			if err != nil || len(cs) != 16 {
				t.Fatalf("ClaimBatch = %d claims, %v", len(cs), err)
			}
			items := make([]queue.SettleItem, len(cs))
			for i, cl := range cs {
				items[i] = queue.SettleItem{EventID: cl.EventID, Generation: cl.Generation, Result: queue.Result{OK: true}}
			}
			if _, cs, err = e.SettleClaimBatch(ctx, items, 3, 16); err != nil || len(cs) != 16 {
				t.Fatalf("SettleClaimBatch = %d claims, %v", len(cs), err)
			}
			one, ok, err := e.Claim(ctx, 4)
			if err != nil || !ok {
				t.Fatalf("Claim = %v, %v", ok, err)
			}
			if o, err := e.Settle(ctx, one.EventID, one.Generation, queue.Result{OK: true}, 4); err != nil || o != queue.Acked {
				t.Fatalf("Settle = %v, %v", o, err)
			}
			if c.Calls() != 4 || c.Taken() != 4 {
				t.Fatalf("settle_claim called %d times, %d without falling back; want 4 and 4", c.Calls(), c.Taken())
			}
			stmts := map[string]string{ // the statement, by its first words, and the indexes its plan must use
				"SELECT mt.clock_mark":           " meta_pkey ",
				"UPDATE meta SET clock_mark":     " meta_pkey ",
				"SELECT u.k, u.id":               " events_pkey | flows_pkey | events_flow_seq_key ",
				"UPDATE events SET state":        " events_pkey ",
				"UPDATE flows AS f SET head_seq": " flows_pkey ",
				"UPDATE flows SET ready = true":  " flows_waiting ",
				"SELECT f.flow, f.head_seq":      " flows_ready | events_flow_seq_key ",
				"UPDATE events AS ev SET state":  " events_pkey ",
				"UPDATE flows SET served":        " flows_pkey ",
				"UPDATE meta SET ticket":         " meta_pkey ",
			}
			var bad []string
			for _, table := range []string{"flows", "events", "acked", "flow_seqs", "attempts"} {
				bad = append(bad, "Seq Scan on "+table+" ")
			}
			pgtest.CheckPlans(t, n.Plans(), stmts, append(bad, "JIT:", "Gather")...)
		})
	}
}
