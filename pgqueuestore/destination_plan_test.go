package pgqueuestore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
)

// The destination-aware claim is index-driven (docs/contract.md §7.11):
// with 3,000 flows of 4 events over 30 destinations and the default one,
// some in flight, analyzed, the merged pick reads one range of flows_ready
// (or flows_rotation) per destination and counts leases on
// events_inflight_dest, and no statement of the claim, the enqueue's
// destination checks or the operator's read scans flows or events; the
// pick of a store without destinations is the default destination's range of the same index
// without a sort.
func TestPlans_DestinationsIndexDriven(t *testing.T) {
	for _, rot := range []bool{false, true} {
		t.Run(fmt.Sprintf("rotation=%v", rot), func(t *testing.T) { destPlans(t, rot) })
	}
}

func destPlans(t *testing.T, rot bool) {
	ctx := context.Background()
	var opts []Option
	if rot {
		opts = append(opts, WithPolicy(rotationPolicy()))
	}
	s, _, _ := open(t, opts...)
	for d := range 30 {
		if err := s.PutDestination(ctx, queue.Destination{Name: fmt.Sprintf("d%02d", d), URL: "http://127.0.0.1:9/", Secrets: []string{"k"},
			Concurrency: 50, Rate: 1000}, "plan", 0); err != nil {
			t.Fatal(err)
		}
	}
	var es []queue.Event
	for k := range 4 {
		for f := range 3000 {
			dest := ""
			if f%31 != 0 {
				dest = fmt.Sprintf("d%02d", f%30)
			}
			es = append(es, queue.Event{ID: fmt.Sprintf("e%d-%d", f, k), Flow: fmt.Sprintf("f%04d", f), Body: []byte("x"), Destination: dest})
		}
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimBatch(ctx, 1, 600)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 600 {
		t.Fatalf("ClaimBatch claimed %d, want 600 (30 destinations of 50 and the default)", len(cs))
	}
	if _, err := s.pool.Exec(ctx, s.q(`ANALYZE {s}.flows; ANALYZE {s}.events; ANALYZE {s}.destinations; ANALYZE {s}.meta; ANALYZE {s}.flow_seqs`)); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ready := "flows_ready"
	if rot {
		ready = "flows_rotation"
	}
	merged, margs := s.pickMerged(rot, 5, 64, queue.ClaimFilter{Exclude: []string{"d03"}, Room: map[string]int{"d04": 2, "": 7}}, map[string]int{"d04": 1})
	cases := []struct {
		name, sql string
		args      []any
		want      []string // indexes the plan must use
		sort      bool     // a sort is allowed (the merge of the ranges)
	}{
		{"pick without destinations", s.pickDefault(rot, 64), nil, []string{ready}, false},
		{"merged pick", merged, margs, []string{ready, "events_inflight_dest", "events_flow_seq_key"}, true},
		{"claim events with destinations", s.q(qClaimEventsDest), []any{[]string{"e1-1", "e2-1"}, int64(10), int64(1), []string{"d01", ""}}, nil, false},
		{"spend tokens", s.q(qSpendTokens), []any{[]string{"d01", "d02"}, []int64{1, 2}, int64(5)}, nil, false},
		{"destinations", s.q(qDestinations), nil, []string{"flows_dest", "events_inflight_dest"}, true},
		{"registered names", s.q(qDestExists), []any{[]string{"d01", "zz"}}, nil, false},
		{"record destinations", s.q(qSetSeqDests), []any{[]string{"f0001"}, []string{"d01"}}, []string{"flow_seqs_pkey"}, false},
		{"flow destination", s.q(qFlowDest), []any{"f0001"}, []string{"flows_pkey"}, false},
		{"paused destinations", s.q(qPausedDests), nil, nil, false},
		{"next due ready, some paused", s.q(qNextDueReadyDests), nil, []string{"flows_ready"}, false},
		{"next due waiting, some paused", s.q(qNextDueWaitingDests), []any{[]string{"d05"}}, []string{"flows_waiting"}, false},
		{"oldest ready, some paused", s.q(qOldestReadyDests), []any{[]string{"d05"}}, []string{"flows_ready_due"}, false},
	}
	// Each as the console's reads plan it, then as a write transaction
	// runs it (qKeyPlans: its generic plan).
	for i := range 2 * len(cases) {
		c := cases[i%len(cases)]
		var nodes []string
		if i < len(cases) {
			nodes = planNodes(t, tx, c.sql, c.args...)
		} else {
			nodes = pgtest.GenericPlanNodes(t, tx, qKeyPlans, c.sql, c.args...)
		}
		joined := strings.Join(nodes, " / ")
		for _, n := range nodes {
			if strings.HasPrefix(n, "Seq Scan on flows") || strings.HasPrefix(n, "Seq Scan on events") ||
				strings.HasPrefix(n, "Seq Scan on flow_seqs") || (!c.sort && strings.HasPrefix(n, "Sort")) {
				t.Errorf("%s scans or sorts: %s", c.name, joined)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(joined, "using "+w) {
				t.Errorf("%s does not use %s: %s", c.name, w, joined)
			}
		}
		t.Logf("%s: %s", c.name, joined)
	}
}
