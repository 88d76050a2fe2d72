package queuestore

import (
	"context"
	"strings"
	"testing"
)

// Cost: every statement of the claim path (and of the settle and
// enqueue paths that keep the flow heads) is driven by an index: no SCAN of
// events or flows, and no temporary B-tree for the MinServed order. The
// plans are read from a store loaded with many flows, so the planner has
// statistics-free but realistic tables.
func TestPlan_ClaimPathUsesIndexes(t *testing.T) {
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
	queries := map[string]planCase{
		"admit":         {qAdmit, []any{1}, ""},
		"admit read":    {qAdmitRead, nil, ""},
		"promote":       {qPromote, []any{1}, "flows_due"},
		"quarantine":    {qQuarantineExpired, []any{"e1"}, "sqlite_autoindex_events_1"},
		"block flow":    {qBlockFlow, []any{"f1"}, "sqlite_autoindex_flows_1"},
		"claim event":   {qClaimEvent, []any{1, 6, 1}, "INTEGER PRIMARY KEY"},
		"serve flow":    {qServeFlow, []any{1, 6}, "INTEGER PRIMARY KEY"},
		"set ticket":    {qSetTicket, []any{1}, ""},
		"pick heads":    {qPickHeads, []any{-1, "", 64, ""}, "flows_ready (ready=? AND dest=? AND"},
		"heads' event":  {qPickHeads, []any{-1, "", 64, ""}, "sqlite_autoindex_events_2"},
		"claim events":  {qClaimEvents, []any{"[1,2]", 6, 1}, "INTEGER PRIMARY KEY"},
		"serve flows":   {qServeFlows, []any{"[1,2]", 6}, "INTEGER PRIMARY KEY"},
		"settle rows":   {qSettleReadRows, []any{`["e1","e2"]`}, "sqlite_autoindex_events_1"},
		"rows' flow":    {qSettleReadRows, []any{`["e1"]`}, "sqlite_autoindex_flows_1"},
		"rows' next":    {qSettleReadRows, []any{`["e1"]`}, "sqlite_autoindex_events_2"},
		"ack events":    {qAckEvents, []any{"[1,2]", 1}, "INTEGER PRIMARY KEY"},
		"set heads":     {qSetHeads, []any{"[[1,2,0],[2,null,null]]", 1}, "INTEGER PRIMARY KEY"},
		"settle read":   {qSettleRead, []any{"e1"}, "sqlite_autoindex_events_1"},
		"ack":           {qAck, []any{1, 1}, "INTEGER PRIMARY KEY"},
		"last seq":      {qSettleRead, []any{"e1"}, "sqlite_autoindex_flows_1"},
		"next avail":    {qSettleRead, []any{"e1"}, "sqlite_autoindex_events_2"},
		"set head":      {qSetHead, []any{1, 2, 0, 1, 0}, "INTEGER PRIMARY KEY"},
		"retry":         {qRetry, []any{"e1", 3, "r"}, "sqlite_autoindex_events_1"},
		"wait flow":     {qWaitFlow, []any{"f1", 3}, "sqlite_autoindex_flows_1"},
		"find ev flow":  {qFindEventFlow, []any{"e1", "f1"}, "sqlite_autoindex_events_1"},
		"flow of find":  {qFindEventFlow, []any{"e1", "f1"}, "sqlite_autoindex_flows_1"},
		"new flow":      {qNewFlow, []any{"f1", 1, 1, ""}, ""},
		"next seq":      {qNextSeq, []any{"f1", 2}, "sqlite_autoindex_flows_1"},
		"next seq head": {qNextSeqHead, []any{"f1", 2, 1, 1}, "sqlite_autoindex_flows_1"},
		"redrive":       {qRedrive, []any{"e1", 1}, "sqlite_autoindex_events_1"},
		"ready now":     {qSetReadyNow, []any{"f1", 1}, "sqlite_autoindex_flows_1"},
		"insert audit":  {qInsertAudit, []any{"e1", 1, "r", 1}, ""},
		"extend read":   {qExtendRead, []any{"e1"}, "sqlite_autoindex_events_1"},
		"extend":        {qExtend, []any{"e1", 9}, "sqlite_autoindex_events_1"},
		"extend flow":   {qExtendFlow, []any{"f1", 9}, "sqlite_autoindex_flows_1"},
		"due ready":     {qNextDueReady, nil, "INDEX flows_"}, // flows_due (ready = 1) or flows_ready: one seek either way
		"due waiting":   {qNextDueWaiting, nil, "flows_due"},
		"oldest ready":  {qOldestReady, nil, "flows_due"},
		"policy read":   {qPolicyRead, nil, ""},
		"policy audit":  {qInsertAuditKind, []any{"policy", "r", "{}", 1}, ""},
		"redrive all":   {qRedriveAll, nil, "events_quarantined"},
		"by flow":       {qRedriveFlow, []any{"f1"}, "events_quarantined"},
		"by reason":     {qRedriveReason, []any{"r"}, "events_quarantined_reason"},
		"by both":       {qRedriveBoth, []any{"f1", "r"}, "events_quarantined_reason"},
		"chunk all":     {qChunkAll, nil, "events_quarantined"},
		"chunk flow":    {qChunkFlow, []any{"f1"}, "events_quarantined"},
		"chunk reason":  {qChunkReason, []any{"r"}, "events_quarantined_reason"},
		"chunk both":    {qChunkBoth, []any{"f1", "r"}, "events_quarantined_reason"},
		"redrive evs":   {qRedriveEvents, []any{redriveChunkJSON, 1}, "INTEGER PRIMARY KEY"},
		"redrive flws":  {qRedriveFlows, []any{redriveChunkJSON, 1}, "INTEGER PRIMARY KEY"},
		"redrive aud":   {qRedriveAudit, []any{redriveChunkJSON, 1, "r"}, "INTEGER PRIMARY KEY"},
		"chunk's flow":  {qChunkAll, nil, "sqlite_autoindex_flows_1"},
		"ins history":   {qInsertHistory, []any{"e1", 1, 1, 1, "retry_scheduled", "r", ""}, ""},
		"trim history":  {qTrimHistory, []any{"e1", 10}, "PRIMARY KEY (event_id=?"},
		"ev history":    {qEventHistory, []any{"e1"}, "PRIMARY KEY (event_id=?"},
		"snap history":  {qSnapHistory, nil, ""},
		"oldest wait":   {qOldestWaiting, nil, "flows_head_enqueued"},
	}
	checkPlans(t, s, queries)
}

// Cost of docs/contract.md §7.11: with destinations registered, the claim
// reads each destination's range of flows_ready (ready, dest, served, flow)
// in MinServed order, with no temporary B-tree; it counts a destination's
// claims in flight in events_dest_inflight; it writes events and flows by
// rowid and a destination's bucket by its key. The enqueue's destination
// check reads two keys; the operator's reads walk flows_dest and
// events_dest_inflight. (A flow of the default destination is in neither
// of those indexes.)
func TestPlan_7_11_DestinationPathUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	for _, d := range []string{"d0", "d1", "d2", "d3", "d4"} {
		if err := s.PutDestination(ctx, Destination{Name: d, URL: "http://x/", Secrets: []string{"k"}, Concurrency: 4, Rate: 100}, "r", 0); err != nil {
			t.Fatal(err)
		}
	}
	var es []Event
	for i := 0; i < 500; i++ {
		d := ""
		if i%50 >= 10 {
			d = "d" + itoa(i%5)
		}
		es = append(es, Event{ID: "e" + itoa(i), Flow: "f" + itoa(i%50), Body: []byte("x"), Destination: d})
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	if _, err := s.ClaimBatch(ctx, 1, 20); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseDestination(ctx, "d2", "r", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatalf("ANALYZE error = %v", err)
	}
	checkPlans(t, s, map[string]planCase{
		"pick of d1":    {qPickHeads, []any{-1, "", 64, "d1"}, "flows_ready (ready=? AND dest=? AND"},
		"pick's event":  {qPickHeads, []any{-1, "", 64, "d1"}, "sqlite_autoindex_events_2"},
		"pick after":    {qPickHeads, []any{3, "f13", 64, "d3"}, "flows_ready (ready=? AND dest=? AND"},
		"dests' keys":   {qPickDestKeys, []any{`["d1","d2",""]`, 2}, "COVERING INDEX flows_ready (ready=? AND dest=?)"},
		"dests' key":    {qPickDestKey, []any{`["d1","d2",""]`}, "COVERING INDEX flows_ready (ready=? AND dest=?)"},
		"keys of d1":    {qPickKeys, []any{-1, "", 64, "d1"}, "COVERING INDEX flows_ready (ready=? AND dest=? AND"},
		"keys after":    {qPickKeys, []any{3, "f13", 64, "d3"}, "COVERING INDEX flows_ready (ready=? AND dest=? AND"},
		"load heads":    {qLoadHeads, []any{"[1,2,3]"}, "INTEGER PRIMARY KEY"},
		"loaded event":  {qLoadHeads, []any{"[1,2,3]"}, "sqlite_autoindex_events_2"},
		"rooms":         {qDestRooms, []any{1}, "events_dest_inflight (dest=? AND lease_until>?)"},
		"take tokens":   {qDestTakeTokens, []any{"d1", 1000, 2}, "sqlite_autoindex_destinations_1"},
		"claim one":     {qClaimEventDest, []any{1, 6, 1, "d1"}, "INTEGER PRIMARY KEY"},
		"claim of d1":   {qClaimEventsDest, []any{"[1,2]", 6, 1, "d1"}, "INTEGER PRIMARY KEY"},
		"claim mixed":   {qClaimEventsDests, []any{"[1,2]", 6, 1, `["d1",""]`}, "INTEGER PRIMARY KEY"},
		"event dest":    {qEventDest, []any{"d1", "f1"}, "sqlite_autoindex_destinations_1"},
		"event's flow":  {qEventDest, []any{"d1", "f1"}, "sqlite_autoindex_flows_1"},
		"flow dest":     {qFlowDest, []any{"f1"}, "sqlite_autoindex_flows_1"},
		"set flow dest": {qSetFlowDest, []any{"f1", "d2"}, "sqlite_autoindex_flows_1"},
		"dest read":     {qDestRead, []any{"d1"}, "sqlite_autoindex_destinations_1"},
		"list's flows":  {qDestList, nil, "flows_dest (dest=?)"},
		"list's flight": {qDestList, nil, "events_dest_inflight (dest=? AND lease_until>?)"},
		"snap dests":    {qSnapDests, nil, ""},
		"some paused":   {qSomeDestPaused, nil, ""},
		"due ready ds":  {qNextDueReadyDests, nil, "flows_ready (ready=? AND dest=?)"},
		"due wait ds":   {qNextDueWaitingDests, nil, "flows_due"},
		"wait's dest":   {qNextDueWaitingDests, nil, "sqlite_autoindex_destinations_1"},
		"oldest ds":     {qOldestReadyDests, nil, "flows_due"},
		"oldest's dest": {qOldestReadyDests, nil, "sqlite_autoindex_destinations_1"},
		"dest count":    {qDestCount, nil, ""},
	})
}

// Cost of docs/contract.md §7.9: PauseFlow and ResumeFlow read and write
// one flow through its key; Prune's deletes and Prunable's counts walk
// events_acked and audit_at from their oldest entry (an event's history
// is a range of its primary key, its redrive rows a range of audit_event),
// never a table: not events, flows, history or audit.
func TestPlan_LifeUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t, WithPolicy(func() Policy { p := DefaultPolicy(); p.Retention = 10; return p }()))
	var es []Event
	for i := 0; i < 500; i++ {
		es = append(es, Event{ID: "e" + itoa(i), Flow: "f" + itoa(i%50), Body: []byte("x")})
	}
	if _, err := s.EnqueueBatch(ctx, es, 0); err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	for i := 0; i < 3; i++ { // 150 acked events, the rest pending
		cs, err := s.ClaimBatch(ctx, 1, 50)
		if err != nil {
			t.Fatal(err)
		}
		var items []SettleItem
		for _, c := range cs {
			items = append(items, SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}})
		}
		if _, err := s.SettleBatch(ctx, items, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatalf("ANALYZE error = %v", err)
	}
	queries := map[string]planCase{
		"pause read":     {qPauseRead, []any{"f1"}, "sqlite_autoindex_flows_1"},
		"pause head":     {qPauseRead, []any{"f1"}, "sqlite_autoindex_events_2"},
		"pause":          {qPause, []any{"f1", "r"}, "sqlite_autoindex_flows_1"},
		"resume":         {qResume, []any{"f1", 1, 1}, "sqlite_autoindex_flows_1"},
		"rot resume":     {qRotResume, []any{"f1", 1, 1}, "sqlite_autoindex_flows_1"},
		"paused count":   {qPausedCount, nil, "flows_paused"},
		"prune audit":    {qPruneAudit, []any{5, 100}, "audit_at"},
		"prune history":  {qPruneHistory, []any{5, 100}, "events_acked"},
		"history range":  {qPruneHistory, []any{5, 100}, "PRIMARY KEY (event_id=?"},
		"prune events":   {qPruneEvents, []any{5, 100}, "events_acked"},
		"redrive rows":   {qPruneEvents, []any{5, 100}, "audit_event"},
		"prunable evs":   {qPrunableEvents, []any{5}, "events_acked"},
		"prunable audit": {qPrunableAudit, []any{5}, "audit_at"},
	}
	checkPlans(t, s, queries)
}

// planCase is a statement, its arguments and an index its plan must name.
type planCase struct {
	q    string
	args []any
	want string // an index the plan must name; "" for none
}

// checkPlans explains every statement on s and fails on a scan of events
// or flows (but of a partial index that holds exactly the rows the query
// counts or returns: the quarantined events, the paused flows), a
// temporary B-tree, or a missing index.
func checkPlans(t *testing.T, s *Store, queries map[string]planCase) {
	t.Helper()
	ctx := context.Background()
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
		t.Logf("%s:\n%s", name, text)
		for _, line := range plan {
			// A scan of a partial index that holds exactly the rows the
			// query returns (RedriveAll without a filter: the quarantined
			// events) reads no other row: that is index-driven.
			if strings.HasPrefix(line, "SCAN events USING INDEX events_quarantined") ||
				strings.HasPrefix(line, "SCAN flows USING INDEX flows_paused") ||
				strings.HasPrefix(line, "SCAN flows USING COVERING INDEX flows_paused") {
				continue
			}
			if strings.HasPrefix(line, "SCAN events") || strings.HasPrefix(line, "SCAN flows") ||
				strings.HasPrefix(line, "SCAN e") || strings.HasPrefix(line, "SCAN f") ||
				strings.HasPrefix(line, "SCAN audit") || strings.HasPrefix(line, "SCAN a ") {
				t.Errorf("%s: plan scans a table: %q\nfull plan:\n%s", name, line, text)
			}
			if strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("%s: plan sorts in a temporary B-tree: %q", name, line)
			}
		}
		if tc.want != "" && !strings.Contains(text, tc.want) {
			t.Errorf("%s: plan does not use index %s:\n%s", name, tc.want, text)
		}
	}
}

// The four forms of RedriveAll's chunk query.
var (
	qRedriveAll, _    = quarantinedQuery(RedriveFilter{}, RedriveChunk)
	qRedriveFlow, _   = quarantinedQuery(RedriveFilter{Flow: "f"}, RedriveChunk)
	qRedriveReason, _ = quarantinedQuery(RedriveFilter{Reason: "r"}, RedriveChunk)
	qRedriveBoth, _   = quarantinedQuery(RedriveFilter{Flow: "f", Reason: "r"}, RedriveChunk)
)

// The four forms of RedriveAll's chunk read (with rowids), and the rowids
// of a chunk of two events (or flows), for the chunk's set statements.
var (
	qChunkAll, _    = chunkQuery(RedriveFilter{})
	qChunkFlow, _   = chunkQuery(RedriveFilter{Flow: "f"})
	qChunkReason, _ = chunkQuery(RedriveFilter{Reason: "r"})
	qChunkBoth, _   = chunkQuery(RedriveFilter{Flow: "f", Reason: "r"})
)

const redriveChunkJSON = `[1,2]`

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}
