package pgreceiverstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
)

// planNodes is pgtest.PlanNodes: the plan's nodes, run inside tx.
func planNodes(t *testing.T, tx pgx.Tx, sql string, args ...any) []string {
	t.Helper()
	return pgtest.PlanNodes(t, tx, sql, args...)
}

// Retention (docs/contract.md §7.9) is index-driven: with 2,000 flows of 10
// receipts, analyzed, Prune's statements and Prunable find receipts
// through an index (receipts_accepted_at, or the primary key for the
// delete) and the flows by their key, and the accept path's
// reads (the flows' read holds the pruned mark) too; none scans receipts or
// flows sequentially.
func TestPlans_RetentionIndexDriven(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	s, _, _ := open(t, WithNow(func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) }))
	for k := range 10 {
		var ms []receiver.Message
		for f := range 2000 {
			ms = append(ms, msg(fmt.Sprintf("e%d-%d", f, k), fmt.Sprintf("f%04d", f), int64(k+1), 1))
		}
		for len(ms) > 0 { // batches of 500: 1,000 advisory locks, not 4,000, in the server's shared lock table
			n := min(len(ms), 500)
			if _, err := s.ReceiveBatch(ctx, ms[:n]); err != nil {
				t.Fatal(err)
			}
			ms = ms[n:]
		}
	}
	if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.receipts; ANALYZE {s}.flows`)); err != nil {
		t.Fatal(err)
	}
	before := base.Add(500 * time.Millisecond)
	// A prune deletes the receipts of at most maxPruneFlows flows (its
	// batch read stops there): the shape the delete and the flows' update
	// are planned for. 1,000 receipts of 1,000 flows, half the table, made
	// a hash join over every flow the right plan, and the test flaky.
	ids := make([]string, 0, maxPruneFlows*10)
	for f := range maxPruneFlows {
		for k := range 10 {
			ids = append(ids, fmt.Sprintf("e%d-%d", f, k))
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cases := writeCases(ids, before)
		cases = append(cases, planCase{"prunable", qPrunable, []any{before}, []string{"using receipts_accepted_at"}})
		// Each as a read transaction plans it, then as a write
		// transaction runs it (qKeyPlans: its generic plan).
		for _, c := range cases {
			checkPlan(t, c, planNodes(t, tx, s.q(c.sql), c.args...))
		}
		for _, c := range cases {
			checkGenericPlan(t, c, pgtest.GenericPlanNodes(t, tx, qKeyPlans, s.q(c.sql), c.args...))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A connection makes a write statement's generic plan once (qKeyPlans)
// and keeps it while the tables grow: made on a new store, empty and never
// analyzed, each still reaches its rows through the index the analyzed
// store's plans use (docs/decisions/postgres-custom-plans.md).
func TestPlans_WriteGeneric(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	before := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, c := range writeCases([]string{"e1-1", "e2-1"}, before) {
			checkGenericPlan(t, c, pgtest.GenericPlanNodes(t, tx, qKeyPlans, s.q(c.sql), c.args...))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A plan case is a statement, arguments to plan it with, and what its plan
// must contain.
type planCase struct {
	name string
	sql  string
	args []any
	want []string
}

// inOrder are the statements whose generic plan, the one a write
// transaction runs, reads the rows in the statement's order from an index,
// with no Sort node: no sort of every row it matches, nor of each run of
// equal leading keys (an Incremental Sort). Prune's batch takes ties of
// accepted_at in order of flow, then seq (docs/contract.md §7.9), straight
// from receipts_accepted_at (accepted_at, flow, seq).
var inOrder = map[string]bool{qPruneBatch: true}

// writeCases are the statements of a receive and a prune whose plans
// read receipts or flows; ids are the prune's messages.
func writeCases(ids []string, before time.Time) []planCase {
	var names []string
	var was, next []int64
	for i := range 16 {
		names, was, next = append(names, fmt.Sprintf("f%04d", i)), append(was, 5), append(next, 6)
	}
	return []planCase{
		{"prune batch", qPruneBatch, []any{before, receiver.DefaultPruneBatch}, []string{"using receipts_accepted_at"}},
		{"prune", qPrune, []any{ids, before}, []string{"using receipts_", "on flows using flows_pkey"}},
		{"read", qRead, []any{[]string{"e1-1", "e2-1"}, []string{"f0001", "f0002"}, []int64{2, 3}}, []string{"using receipts_pkey", "using receipts_flow_seq_key", "using flows_pkey"}},
		{"advance flows", qAdvanceFlows, []any{names, was, next, []int64{1}}, []string{"using flows_pkey"}},
	}
}

// checkGenericPlan is checkPlan on the generic plan of c, which must also
// sort nothing when c's statement is one of inOrder.
func checkGenericPlan(t *testing.T, c planCase, nodes []string) {
	t.Helper()
	checkPlan(t, c, nodes)
	if !inOrder[c.sql] {
		return
	}
	for _, n := range nodes {
		if strings.Contains(n, "Sort") {
			t.Errorf("%s: generic plan has %q, want the index's order: %v", c.name, n, nodes)
		}
	}
}

// checkPlan fails t when nodes, the plan of c, scans a table sequentially
// or lacks one of c's wants.
func checkPlan(t *testing.T, c planCase, nodes []string) {
	t.Helper()
	t.Logf("%s: %s", c.name, strings.Join(nodes, " | "))
	for _, n := range nodes {
		if strings.HasPrefix(n, "Seq Scan") {
			t.Errorf("%s: plan has %q: %v", c.name, n, nodes)
		}
	}
	for _, w := range c.want {
		if !slices.ContainsFunc(nodes, func(n string) bool { return strings.Contains(n, w) }) {
			t.Errorf("%s: plan does not use %q: %v", c.name, w, nodes)
		}
	}
}

// The receive path's statements over arrays find their rows through the
// keys on tables never analyzed (a new store's, until autovacuum's first
// analyze): 4,000 receipts over 1,000 flows, then the read and the flows'
// update of a batch of 16 scan neither receipts nor flows
// (docs/decisions/postgres-per-event-cost.md).
func TestPlans_ReceiveWithoutStatistics(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	var ms []receiver.Message
	for j := range 4000 {
		ms = append(ms, msg(fmt.Sprintf("e%d", j), fmt.Sprintf("f%03d", j%1000), int64(j/1000+1), 1))
	}
	for len(ms) > 0 {
		n := min(len(ms), 500)
		if _, err := s.ReceiveBatch(ctx, ms[:n]); err != nil {
			t.Fatal(err)
		}
		ms = ms[n:]
	}
	var ids, flows []string
	var seqs, was, next, add []int64
	for f := range 16 {
		ids, flows, seqs = append(ids, fmt.Sprintf("n%d", f)), append(flows, fmt.Sprintf("f%03d", f*7)), append(seqs, 5)
		was, next, add = append(was, 5), append(next, 6), append(add, 1)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, c := range []planCase{
			{"read", qRead, []any{ids, flows, seqs}, nil},
			{"advance flows", qAdvanceFlows, []any{flows, was, next, add}, nil},
		} {
			checkPlan(t, c, pgtest.GenericPlanNodes(t, tx, qKeyPlans, s.q(c.sql), c.args...))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// receive_accepted's statements run under the plan settings of a write
// transaction (its SET clauses, as qKeyPlans): each statement that reads
// receipts or flows reaches them through their keys (the read's three
// probes, the flows' update, the receipts' foreign key check, which the
// function runs before it returns), with generic plans, never
// JIT-compiled. On a
// store with a few rows, never analyzed and analyzed (where a sequential
// scan of a one-page table looks cheapest), and on 4,000 receipts over
// 1,000 flows. auto_explain (a superuser's LOAD; the test is skipped without
// it) sends the plans of the function's statements, as they run, to the
// client as notices. Migrations 3 and 4.
func TestPlans_OneCall(t *testing.T) {
	for _, c := range []struct {
		name    string
		flows   int
		analyze bool
	}{{"a few rows", 4, false}, {"a few rows, analyzed", 4, true}, {"4,000 receipts", 1000, false}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, url, _ := open(t)
			var ms []receiver.Message
			for j := range 4 * c.flows {
				ms = append(ms, msg(fmt.Sprintf("e%d", j), fmt.Sprintf("f%03d", j%c.flows), int64(j/c.flows+1), 1))
			}
			for len(ms) > 0 {
				n := min(len(ms), 500)
				if _, err := s.ReceiveBatch(ctx, ms[:n]); err != nil {
					t.Fatal(err)
				}
				ms = ms[n:]
			}
			if c.analyze {
				if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.receipts; ANALYZE {s}.flows`)); err != nil {
					t.Fatal(err)
				}
			}
			plans := oneCallPlans(t, url, s, []receiver.Message{msg("n1", "f001", 5, 1), msg("n2", "f002", 5, 2), msg("n3", "f002", 6, 3), msg("n4", "new", 1, 1)})
			stmts := map[string]string{ // the statement, by its first words, and what its plan must use
				"SELECT bool_and":    " receipts_pkey | receipts_flow_seq_key | flows_pkey ",
				"UPDATE flows":       " flows_pkey |Function Scan on u",
				"SELECT 1 FROM ONLY": " flows_pkey |(flow = $1)", // the receipts' foreign key
			}
			if c.flows >= 1000 {
				// Past a few rows, a key probe per flow of the arrays (on a
				// table of a few rows the planner may read the flows once
				// instead, through the key).
				stmts["UPDATE flows"] += "|Index Cond: (flow = (u.flow)"
			}
			pgtest.CheckPlans(t, plans, stmts, "Seq Scan", "JIT:", "Gather")
		})
	}
}

// oneCallPlans calls receive_accepted for ms, every one accepted, on a
// connection of its own with auto_explain on, and returns the plans of
// its statements.
func oneCallPlans(t *testing.T, url string, s *Store, ms []receiver.Message) []string {
	t.Helper()
	ctx := context.Background()
	n := pgtest.ExplainNested(t, url, nil)
	deltas := make([]int64, len(ms))
	for i, m := range ms {
		var err error
		if deltas[i], err = receiver.Validate(m); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.oneCall(ctx, n.Pool, ms, deltas); err != nil || !ok {
		t.Fatalf("receive_accepted = %v, %v", ok, err)
	}
	return n.Plans()
}
