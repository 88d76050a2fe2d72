package pgqueuestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/migration/migrationtest"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// atVersion makes Open stop at migration v: the schema an older build
// made (TestAtVersionIsTheOldBuildsSchema), for the tests of what each
// migration does with the current code's writes.
func atVersion(v int) Option { return func(o *options) { o.version = v } }

// released are the SHA-256 sums of the SQL (comment lines left out) of
// every migration a released build ran. A released migration is never
// edited (a change to the schema is a new file), so the schema a
// version-v build made is the first v files run in order, as oldBuild
// makes it; TestReleasedMigrationsAreUnchanged holds the files to that.
var released = []string{
	"ecf1a3c0fb2147091c91938d54efb946fd6166760376856b8b9759688b03da07", // 0001_initial.sql
	"fcd1a3f375c6d16d9f4c34bc15683a393371b490aff21b8764c3c3392c0edd6b", // 0002_rotation.sql
	"26f52b0ccb526f2131a64ef3ad7fd50eebacde9c6c9ec69a1e7320aa6c049ca8", // 0003_oldest_due.sql
	"050154c0a9898811f98260f8b91b429f19b01e5d58397833c19c4d65930ac18e", // 0004_heap_only_updates.sql
	"e5280e1917d5f868aa4f650d9fa9dac4650dec32f0b6ad46622b1018906e890b", // 0005_paged_reads.sql
	"3244539e4241a5e7ee859bf5c38183af0607330f1009e429e0b593e26a1eccad", // 0006_failure_detail.sql
}

// sqlSum is the SHA-256 of a migration's lines other than comment lines,
// each with its newline, as hex.
func sqlSum(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if !strings.HasPrefix(line, "--") {
			b.WriteString(line)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// A migration file, once released, keeps its SQL: an edit would leave the
// stores the old file made unlike the ones the new file makes, and the
// older builds' schemas the migration tests start from (oldBuild) would
// no longer be what those builds made.
func TestReleasedMigrationsAreUnchanged(t *testing.T) {
	for i, want := range released {
		if i >= len(migrations) {
			t.Fatalf("released migration %d is missing", i+1)
		}
		if got := sqlSum(migrations[i].SQL); got != want {
			t.Errorf("migration %s was released and changed (SHA-256 of its SQL %s, released %s): add a new migration instead", migrations[i].Name, got, want)
		}
	}
}

// oldBuild makes, in a new schema, a queue as the version-v build left it,
// then adds the rows of testdata/data.sql: the statements that build's
// Open ran, which are the version table and the first v migrations, each
// followed by its version row (released migrations are unchanged:
// TestReleasedMigrationsAreUnchanged).
func oldBuild(v int) func(t *testing.T) string {
	return func(t *testing.T) string {
		_, schema := pgtest.Schema(t)
		var b strings.Builder
		b.WriteString(`CREATE TABLE {s}.schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
`)
		for _, m := range migrations[:v] {
			fmt.Fprintf(&b, "%s\nINSERT INTO {s}.schema_migrations (version) VALUES (%d);\n", m.SQL, m.Version)
		}
		pgtest.ExecIn(t, schema, b.String())
		file := "data.sql"
		if v >= 6 {
			file = "data_v6.sql" // flows have head_enqueued_at
		}
		if v >= 7 {
			file = "data_v7.sql" // flow_seqs, acked
		}
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		pgtest.ExecIn(t, schema, string(data))
		return schema
	}
}

// migrationBackend is the queue schema under the migration tests shared
// with the other stores (migrationtest).
func migrationBackend() migrationtest.Backend {
	b := pgtest.Migrations([]string{"meta", "flows", "events", "audit"})
	b.Version = SchemaVersion
	b.Open = func(t *testing.T, schema string) error {
		s, err := OpenPool(context.Background(), pgtest.Pool(t), WithSchema(schema))
		if err != nil {
			return err
		}
		return s.Close()
	}
	b.Olds = []migrationtest.Old{
		{Name: "V1Build", Version: 1, Make: oldBuild(1)},
		{Name: "V2Build", Version: 2, Make: oldBuild(2)},
		{Name: "V3Build", Version: 3, Make: oldBuild(3)},
		{Name: "V4Build", Version: 4, Make: oldBuild(4)},
		{Name: "V5Build", Version: 5, Make: oldBuild(5)},
		{Name: "V6Build", Version: 6, Make: oldBuild(6)},
		{Name: "V7Build", Version: 7, Make: oldBuild(7)},
	}
	b.FailAfter = func(v int) func() {
		migrateHook = func(at int) error {
			if at == v {
				return fmt.Errorf("injected failure after migration %d", v)
			}
			return nil
		}
		return func() { migrateHook = nil }
	}
	b.ErrNewer = queue.ErrSchemaVersion
	return b
}

// TestMigrations runs the migration clauses every store shares
// (migrationtest): a new schema, each older build's schema with rows in
// every table, a newer schema, a failure after each migration. Not
// parallel: it sets migrateHook.
func TestMigrations(t *testing.T) {
	pgtest.Require(t)
	migrationtest.Run(t, migrationBackend())
}

// TestAtVersionIsTheOldBuildsSchema: a schema that Open stopped at
// migration v (atVersion, which the tests of each migration's meaning
// start from) has the catalog of the version-v build's schema, so those
// tests start where an old build left a queue.
func TestAtVersionIsTheOldBuildsSchema(t *testing.T) {
	b := migrationBackend()
	for v := 1; v < SchemaVersion; v++ {
		_, _, schema := open(t, atVersion(v))
		old := oldBuild(v)(t)
		got, want := b.Catalog(t, schema), b.Catalog(t, old)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("atVersion(%d) catalog:\n%s\nthe version-%d build's:\n%s", v, strings.Join(got, "\n"), v, strings.Join(want, "\n"))
		}
	}
}

// enqueueAsOldBuild stores one event per flow (each a new flow, seq 1,
// pending at tick) with the statements of a build before migration 6,
// whose columns every migration since 1 has: the current code's writes
// read the policy columns of migration 6 and cannot run on an older
// schema.
func enqueueAsOldBuild(t *testing.T, s *Store, tick int64, flows ...string) {
	t.Helper()
	ctx := context.Background()
	for _, f := range flows {
		if _, err := s.pool.Exec(ctx, s.q(`INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready) VALUES ($1, 1, 0, 1, $2, true)`), f, tick); err != nil {
			t.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, s.q(`INSERT INTO {s}.events
    (id, flow, seq, body, state, generation, attempts, lifetime_attempts, available_at, lease_until, ticket, reason, enqueued_at)
VALUES ($1 || '-1', $1, 1, 'x', 'pending', 0, 0, 0, $2, 0, 0, '', $2)`), f, tick); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, s.q(`UPDATE {s}.meta SET clock_mark = greatest(clock_mark, $1) WHERE id = 1`), tick); err != nil {
		t.Fatal(err)
	}
}

// A version-3 schema, as a version-3 build made it (quarantine indexes on
// state, a foreign key from events to flows), holding an event in every
// state, is brought to the newest version by Open: the quarantined event
// is marked and listed (by reason too), can be redriven and claimed, the
// other events are unmarked, and the events table has its fill factor,
// the flow trigger and no foreign key.
func TestMigrationFromVersion3(t *testing.T) {
	ctx := context.Background()
	s, url, schema := open(t, atVersion(3))
	// As a version-3 build left them: all four enqueued at 1; a, b and c
	// claimed at 2 (tickets 1-3, leases until 7); a acked at 3; b-1
	// quarantined (there is no quarantined column to write yet).
	enqueueAsOldBuild(t, s, 1, "a", "b", "c", "d")
	s.Close()
	execSQL(t, url, `UPDATE `+schema+`.events SET state = 'inflight', generation = 1, attempts = 1, lifetime_attempts = 1, lease_until = 7,
    ticket = CASE flow WHEN 'a' THEN 1 WHEN 'b' THEN 2 ELSE 3 END WHERE flow IN ('a', 'b', 'c');
UPDATE `+schema+`.flows SET served = 1, ready_at = 7, ready = false WHERE flow IN ('a', 'b', 'c');
UPDATE `+schema+`.meta SET clock_mark = 3, ticket = 3;
UPDATE `+schema+`.events SET state = 'acked', lease_until = 0 WHERE id = 'a-1';
UPDATE `+schema+`.flows SET head_seq = NULL, ready_at = NULL, ready = false WHERE flow = 'a';
UPDATE `+schema+`.events SET state = 'quarantined', lease_until = 0, reason = 'unavailable' WHERE id = 'b-1';
UPDATE `+schema+`.flows SET ready_at = NULL, ready = false WHERE flow = 'b'`)
	cs := []queue.Claim{{EventID: "a-1", Generation: 1}, {EventID: "b-1", Generation: 1}}

	s2, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if st, err := s2.Stats(ctx); err != nil || st.SchemaVersion != SchemaVersion || st.Events != (queue.EventCounts{Pending: 1, Inflight: 1, Acked: 1, Quarantined: 1}) {
		t.Fatalf("Stats = %+v, %v; want version %d and one event in each state", st, err, SchemaVersion)
	}
	marked := map[string]bool{}
	rows, _ := s2.pool.Query(ctx, `SELECT id, quarantined FROM `+schema+`.events`)
	for rows.Next() {
		var id string
		var q bool
		if err := rows.Scan(&id, &q); err != nil {
			t.Fatal(err)
		}
		marked[id] = q
	}
	if rows.Err() != nil || len(marked) != 4 || !marked["b-1"] || marked["a-1"] || marked["c-1"] || marked["d-1"] {
		t.Fatalf("quarantined column: %v, %v; want only b-1", marked, rows.Err())
	}
	for _, f := range []queue.RedriveFilter{{}, {Reason: "unavailable"}, {Flow: "b"}} {
		qs, err := s2.QuarantinedMatching(ctx, f)
		if err != nil || len(qs) != 1 || qs[0].EventID != "b-1" || qs[0].Reason != "unavailable" {
			t.Fatalf("QuarantinedMatching(%+v) = %+v, %v; want b-1", f, qs, err)
		}
	}
	var opts []string
	var fks int
	if err := s2.pool.QueryRow(ctx, `SELECT coalesce(c.reloptions, '{}'),
    (SELECT count(*) FROM pg_constraint WHERE conrelid = c.oid AND contype = 'f')
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = 'events'`, schema).Scan(&opts, &fks); err != nil {
		t.Fatal(err)
	}
	if strings.Join(opts, ",") != "fillfactor=70" || fks != 0 {
		t.Fatalf("events: options %v, %d foreign keys; want fillfactor=70 and none", opts, fks)
	}
	if err := s2.Redrive(ctx, "b-1", cs[1].Generation, "fixed", 4); err != nil {
		t.Fatal(err)
	}
	if qs, err := s2.Quarantined(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("Quarantined after the redrive = %+v, %v; want none", qs, err)
	}
	// d (served 0) first, then the redriven b (served 1, before c in
	// flight); nothing else is dispatchable.
	got, err := s2.ClaimBatch(ctx, 4, 5)
	if err != nil || len(got) != 2 || got[0].EventID != "d-1" || got[1].EventID != "b-1" {
		t.Fatalf("ClaimBatch = %+v, %v; want d-1 then b-1", got, err)
	}
	expectOrphanRefused(t, s2, schema)
}

// TestEventsNeedTheirFlow: the trigger that replaced the foreign key
// refuses an event whose flow is not in flows, with the foreign key's
// SQLSTATE, and leaves the table as it was.
func TestEventsNeedTheirFlow(t *testing.T) {
	s, _, schema := open(t)
	if _, err := s.Enqueue(context.Background(), queue.Event{ID: "a-1", Flow: "a", Body: []byte("x")}, 1); err != nil {
		t.Fatal(err)
	}
	expectOrphanRefused(t, s, schema)
}

// expectOrphanRefused inserts, in one statement, an event of an existing
// flow (a) and one of a flow that does not exist, and wants the statement
// refused (SQLSTATE 23503) with neither row stored. schema is as it goes
// into SQL (quoted when it needs to be).
func expectOrphanRefused(t *testing.T, s *Store, schema string) {
	t.Helper()
	ctx := context.Background()
	var before int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.events`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO `+schema+`.events
    (id, flow, seq, body, state, generation, attempts, lifetime_attempts, available_at, lease_until, ticket, reason, enqueued_at)
VALUES ('a-x', 'a', 99, 'x', 'pending', 0, 0, 0, 9, 0, 0, '', 9),
       ('nobody-1', 'nobody', 1, 'x', 'pending', 0, 0, 0, 9, 0, 0, '', 9)`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23503" {
		t.Fatalf("insert of an event without its flow: %v; want SQLSTATE 23503", err)
	}
	var after int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.events`).Scan(&after); err != nil || after != before {
		t.Fatalf("events after the refused insert: %d, %v; want %d", after, err, before)
	}
}

// TestClaimAndAckCanStayOnTheirPage: no index of events reads a column
// that a claim, an ack or a lease extension writes, so PostgreSQL makes
// those updates heap-only (no new index entries) when the page has room
// (docs/decisions/postgres-hot-updates.md). An index added on
// one of them, or a predicate on state again, fails here.
func TestClaimAndAckCanStayOnTheirPage(t *testing.T) {
	s, _, schema := open(t)
	written := []string{"state", "generation", "attempts", "lifetime_attempts", "lease_until", "ticket"}
	rows, _ := s.pool.Query(context.Background(), `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'events'`, schema)
	n := 0
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		n++
		for _, col := range written {
			if regexp.MustCompile(`\b` + col + `\b`).MatchString(def) {
				t.Errorf("index %s reads %s, which claims or acks write: %s", name, col, def)
			}
		}
	}
	if rows.Err() != nil || n != 5 {
		t.Fatalf("events has %d indexes, %v; want 5 (the primary key, (flow, seq), the two quarantine indexes, events_inflight_dest on generated columns)", n, rows.Err())
	}

	// And the store's own claim and ack statements are heap-only on 10
	// new events (their page has room for the two new versions of each:
	// inside one transaction nothing can be pruned), counted by the server
	// for this transaction alone, which then rolls back.
	ctx := context.Background()
	var ids []string
	var es []queue.Event
	for i := range 10 {
		id := fmt.Sprintf("e%02d", i)
		ids = append(ids, id)
		es = append(es, queue.Event{ID: id, Flow: "f" + id, Body: []byte("x")})
	}
	if _, err := s.EnqueueBatch(ctx, es, 1); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, s.q(qClaimEvents), ids, int64(6), int64(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, s.q(qAckMany), ids, int64(6)); err != nil {
		t.Fatal(err)
	}
	var upd, hot int64
	if err := tx.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND relname = 'events'`, schema).Scan(&upd, &hot); err != nil {
		t.Fatal(err)
	}
	if upd != 20 || hot != 20 {
		t.Fatalf("the claim and the ack updated %d event rows, %d heap-only; want 20 and 20", upd, hot)
	}
}

// TestSchemaNameWithQuotes: a schema whose name holds a dollar quote and a
// double quote gets every migration (the trigger's body names no schema)
// and works: its trigger refuses an event without a flow.
func TestSchemaNameWithQuotes(t *testing.T) {
	ctx := context.Background()
	url, base := pgtest.Schema(t)
	name := base + `_$$"x`
	t.Cleanup(func() { execSQL(t, url, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE") })
	s, err := Open(ctx, url, WithSchema(name))
	if err != nil {
		t.Fatalf("Open(%q): %v", name, err)
	}
	defer s.Close()
	if _, err := s.Enqueue(ctx, queue.Event{ID: "a-1", Flow: "a", Body: []byte("x")}, 1); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx); err != nil || st.SchemaVersion != SchemaVersion || st.Events.Pending != 1 {
		t.Fatalf("Stats = %+v, %v; want version %d and one pending event", st, err, SchemaVersion)
	}
	expectOrphanRefused(t, s, pgx.Identifier{name}.Sanitize())
}

// TestEnqueueOnABacklogCanStayOnItsPage: no index of flows reads last_seq,
// the one column an enqueue onto a flow that has a head writes, so
// PostgreSQL makes that update heap-only when the page has room. The
// console's order by backlog never had an index for that reason
// (docs/decisions/postgres-paged-reads.md); an index that reads last_seq
// (queuestore's flows_by_backlog of migrations 2 to 7) fails here. The other columns of flows
// are written by every claim and settle, which change indexed columns
// (served, ready, ready_at) anyway.
func TestEnqueueOnABacklogCanStayOnItsPage(t *testing.T) {
	ctx := context.Background()
	s, _, schema := open(t)
	rows, _ := s.pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'flows'`, schema)
	n := 0
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		n++
		if regexp.MustCompile(`\blast_seq\b`).MatchString(def) {
			t.Errorf("index %s reads last_seq, which an enqueue writes: %s", name, def)
		}
	}
	if rows.Err() != nil || n != 7 {
		t.Fatalf("flows has %d indexes, %v; want 7 (the primary key, the four of the claim, flows_head_enqueued, flows_dest)", n, rows.Err())
	}
	// Ten flows with a head each; one more event for each is an update of
	// last_seq alone, heap-only in the server's count for this transaction
	// (the flows' page has room for ten new versions), which then rolls
	// back.
	var flows []string
	var es []queue.Event
	for i := range 10 {
		f := fmt.Sprintf("f%02d", i)
		flows = append(flows, f)
		es = append(es, queue.Event{ID: f + "-1", Flow: f, Body: []byte("x")})
	}
	if _, err := s.EnqueueBatch(ctx, es, 1); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	seqs := []int64{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}
	if _, err := tx.Exec(ctx, s.q(qNextSeqs), flows, seqs, seqs, int64(1), seqs); err != nil {
		t.Fatal(err)
	}
	var upd, hot int64
	if err := tx.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND relname = 'flows'`, schema).Scan(&upd, &hot); err != nil {
		t.Fatal(err)
	}
	if upd != 10 || hot != 10 {
		t.Fatalf("the enqueue updated %d flows, %d heap-only; want 10 and 10", upd, hot)
	}
}

// A version-5 schema with rows in every table (testdata/data.sql, as the
// builds before migration 6 wrote them) is brought to the newest version
// by Open: every flow with a head gets its head's enqueue tick, so
// OldestWaiting counts the events stored before it (a-2, enqueued at 2,
// in flight; b-1 quarantined; c-1 and d-1 later); the recorded policy
// reads as before (no schedule, no retry-after cap) and the history is
// empty. meta's new columns refuse what Policy.Validate refuses.
func TestMigrationFromVersion5(t *testing.T) {
	ctx := context.Background()
	schema := oldBuild(5)(t)
	s, err := OpenPool(ctx, pgtest.Pool(t), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if at, ok, err := s.OldestWaiting(ctx); err != nil || !ok || at != 2 {
		t.Fatalf("OldestWaiting = %d, %v, %v; want a-2's 2", at, ok, err)
	}
	p, err := s.Policy(ctx)
	if err != nil || !p.Equal(queue.DefaultPolicy()) || p.Schedule != nil || p.RetryAfterCap != 0 {
		t.Fatalf("Policy = %+v, %v; want the default", p, err)
	}
	if e, err := s.Event(ctx, "b-1"); err != nil || e.History != nil || e.Error != "" || e.Reason != "unavailable" {
		t.Fatalf("Event(b-1) = %+v, %v; want no history", e, err)
	}
	if sn, err := s.Snapshot(ctx); err != nil || sn.Failures != nil {
		t.Fatalf("Snapshot failures = %+v, %v; want none", sn.Failures, err)
	}
	for _, bad := range []string{
		`schedule = '{5, 0}', max_attempts = 3`,    // a wait below 1
		`schedule = '{5, NULL}', max_attempts = 3`, // a hole
		`schedule = '{5, 7}', max_attempts = 5`,    // MaxAttempts is not the waits plus one
		`schedule = '{{5}, {7}}', max_attempts = 3`,
		`retry_after_cap = -1`,
	} {
		_, err := s.pool.Exec(ctx, s.q(`UPDATE {s}.meta SET `+bad+` WHERE id = 1`))
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23514" {
			t.Errorf("meta SET %s: %v; want a check violation", bad, err)
		}
	}
	if _, err := s.pool.Exec(ctx, s.q(`UPDATE {s}.meta SET schedule = '{5, 7}', max_attempts = 3, retry_after_cap = 9 WHERE id = 1`)); err != nil {
		t.Fatal(err)
	}
	want := queue.DefaultPolicy().WithSchedule(5, 7)
	want.RetryAfterCap = 9
	if p, err := s.Policy(ctx); err != nil || !p.Equal(want) {
		t.Fatalf("Policy = %+v, %v; want %+v", p, err, want)
	}
}

// TestMetaRules: since migration 14 meta's rules on the policy and the
// shard label are a trigger's, fired when a statement writes a column
// they read; each still refuses what it refused as a CHECK (SQLSTATE
// 23514, the constraint's name), and a refused write changes nothing. The
// clock and the ticket, which every write turn sets, are meta's only
// CHECKs: one more would be prepared again at every turn
// (docs/decisions/postgres-check-constraints.md).
func TestMetaRules(t *testing.T) {
	ctx := context.Background()
	s, _, schema := open(t)
	for _, c := range []struct{ set, rule string }{
		{`id = 2`, "meta_id_check"},
		{`lease = 0`, "meta_lease_check"},
		{`max_attempts = 101`, "meta_max_attempts_check"},
		{`backoff_base = 0, backoff_cap = 0`, "meta_backoff_base_check"},
		{`backoff_cap = backoff_base - 1`, "meta_check"},
		{`backoff_base = backoff_cap + 1`, "meta_check"},
		{`fairness = 'fifo'`, "meta_fairness_check"},
		{`schedule = '{5}'`, "meta_check1"}, // max_attempts is not 2
		{`schedule = '{5, 0}', max_attempts = 3`, "meta_check1"},
		{`schedule = '{5, NULL}', max_attempts = 3`, "meta_check1"},
		{`schedule = '{5, 7}', max_attempts = 5`, "meta_check1"},
		{`schedule = '{{5}, {7}}', max_attempts = 3`, "meta_check1"},
		{`retry_after_cap = -1`, "meta_retry_after_cap_check"},
		{`retention = -1`, "meta_retention_check"},
		{`shard_index = -1, shard_count = 2, shard_epoch = 1`, "meta_shard_index_check"},
		{`shard_index = 0, shard_count = 257, shard_epoch = 1`, "meta_shard_count_check"},
		{`shard_index = 0, shard_count = 2, shard_epoch = -1`, "meta_shard_epoch_check"},
		{`shard_index = 0, shard_count = 2`, "meta_shard_label_whole"},
		{`shard_index = 2, shard_count = 2, shard_epoch = 1`, "meta_shard_label_whole"},
		{`clock_mark = -1`, "meta_clock_mark_check"},
		{`ticket = -1`, "meta_ticket_check"},
	} {
		_, err := s.pool.Exec(ctx, s.q(`UPDATE {s}.meta SET `+c.set+` WHERE id = 1`))
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23514" || pe.ConstraintName != c.rule {
			t.Errorf("meta SET %s: %v; want a violation of %s", c.set, err, c.rule)
		}
	}
	_, err := s.pool.Exec(ctx, s.q(`INSERT INTO {s}.meta SELECT * FROM {s}.meta`))
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.ConstraintName != "meta_pkey" {
		t.Errorf("a second meta row: %v; want a violation of meta_pkey", err)
	}
	_, err = s.pool.Exec(ctx, s.q(`INSERT INTO {s}.meta (id, clock_mark, ticket, lease, max_attempts, backoff_base, backoff_cap, jitter, fairness)
		VALUES (2, 0, 0, 1, 1, 1, 1, false, 'min_served')`))
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.ConstraintName != "meta_id_check" {
		t.Errorf("a meta row of id 2: %v; want a violation of meta_id_check", err)
	}
	if p, err := s.Policy(ctx); err != nil || !p.Equal(queue.DefaultPolicy()) {
		t.Fatalf("Policy = %+v, %v; want the default, unchanged", p, err)
	}
	var checks []string
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(array_agg(conname::text ORDER BY conname), '{}') FROM pg_constraint
		WHERE conrelid = (quote_ident($1) || '.meta')::regclass AND contype = 'c'`, schema).Scan(&checks); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(checks, []string{"meta_clock_mark_check", "meta_ticket_check"}) {
		t.Fatalf("meta's CHECKs = %v; want the clock's and the ticket's alone", checks)
	}
}
