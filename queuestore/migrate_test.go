package queuestore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/migration/migrationtest"
)

// copyTestdata copies testdata/name (a file made by an older build) into a
// fresh temporary directory and returns the copy's path; the file itself is
// never opened in place.
func copyTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read testdata: %v", err)
	}
	path := filepath.Join(t.TempDir(), "queue.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatalf("copy: %v", err)
	}
	return path
}

// wantSnapshotFile fails t unless s's snapshot is testdata/name, the
// snapshot the older build that made the file wrote of it.
func wantSnapshotFile(t *testing.T, s *Store, name string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read want: %v", err)
	}
	if got := jsonOf(snap(t, s)) + "\n"; got != string(want) {
		t.Fatalf("snapshot after migration:\n%s\nwant (testdata/%s, the older build's):\n%s", got, name, want)
	}
}

// copyV1 copies testdata/v1-queue.db (made by the v1 build).
func copyV1(t *testing.T) string { return copyTestdata(t, "v1-queue.db") }

// copyV2 copies testdata/v2-queue.db (made by the version-2 build, with the
// FairRotation policy).
func copyV2(t *testing.T) string { return copyTestdata(t, "v2-queue.db") }

// copyV2WithoutReadyDue is testdata/v2-queue.db as a version-2 build made
// before OldestDue left it: without the flows_ready_due index.
func copyV2WithoutReadyDue(t *testing.T) string {
	path := copyV2(t)
	rawExec(t, path, "DROP INDEX flows_ready_due")
	return path
}

// rawExec runs q on the file at path without this package.
func rawExec(t *testing.T, path, q string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	defer db.Close()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// rawDump reads a file without this package: its user_version, its schema
// and every row of every table, as text.
func rawDump(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	defer db.Close()
	var b strings.Builder
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatalf("user_version: %v", err)
	}
	fmt.Fprintf(&b, "user_version %d\n", v)
	rows, err := db.Query("SELECT type, name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name")
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	var tables []string
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			t.Fatalf("schema: %v", err)
		}
		fmt.Fprintf(&b, "%s %s: %s\n", typ, name, text)
		if typ == "table" {
			tables = append(tables, name)
		}
	}
	rows.Close()
	for _, tab := range tables {
		order := "rowid"
		if tab == "history" { // WITHOUT ROWID: its primary key's order
			order = "event_id, generation"
		}
		rows, err := db.Query("SELECT * FROM " + tab + " ORDER BY " + order)
		if err != nil {
			t.Fatalf("rows of %s: %v", tab, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("row of %s: %v", tab, err)
			}
			fmt.Fprintf(&b, "%s %v\n", tab, vals)
		}
		rows.Close()
	}
	return b.String()
}

// migrationBackend is the queue file under the migration tests shared with
// the other stores (migrationtest). Its catalog leaves out the rotation's
// index, which follows the recorded policy rather than the version
// (TestMigrate_V2FileKeepsTheRotation).
func migrationBackend() migrationtest.Backend {
	b := migrationtest.SQLite(queueTables, "flows_rotation")
	b.Version = SchemaVersion
	b.Open = func(t *testing.T, loc string) error {
		s, err := Open(loc)
		if err != nil {
			return err
		}
		return s.Close()
	}
	b.Olds = []migrationtest.Old{
		{Name: "V1Build", Version: 1, Make: copyV1},
		{Name: "V2Build", Version: 2, Make: copyV2},
		{Name: "V2BuildBeforeOldestDue", Version: 2, Make: copyV2WithoutReadyDue},
		// A version-3 file made by a build that created new files from one
		// full schema.sql instead of running the migrations.
		{Name: "V3FullSchemaBuild", Version: 3, Make: func(t *testing.T) string { return copyTestdata(t, "v3-queue.db") }},
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
	b.ErrNewer = ErrSchemaVersion
	return b
}

// TestMigrations runs the migration clauses every store shares
// (migrationtest): a new file, each older build's file, a newer file, a
// failure after each migration. Not parallel: it sets migrateHook.
func TestMigrations(t *testing.T) {
	migrationtest.Run(t, migrationBackend())
}

// A version-1 file made by the v1 build is migrated on Open: the snapshot
// is the v1 build's, the version is SchemaVersion, the default policy is
// recorded and the redrive audit row reads as kind 'redrive'. The store
// then works as a new one.
func TestMigrate_V1FileKeepsEverythingAndGetsDefaultPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := copyV1(t)
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(v1 file) error = %v", err)
	}
	defer s.Close()
	wantSnapshotFile(t, s, "v1-queue.snapshot.json")
	st, err := s.Stats(ctx)
	if err != nil || st.SchemaVersion != SchemaVersion {
		t.Fatalf("Stats() = %+v, %v; want schema version %d", st, err, SchemaVersion)
	}
	if p, err := s.Policy(ctx); err != nil || !p.Equal(DefaultPolicy()) {
		t.Fatalf("Policy() = %+v, %v; want the default", p, err)
	}
	all, err := s.AuditAll(ctx)
	if err != nil || len(all) != 1 || all[0].Kind != AuditRedrive || all[0].EventID != "r-1" || all[0].Generation != 4 {
		t.Fatalf("AuditAll() = %s, %v", jsonOf(all), err)
	}
	var fk int
	if err := s.db.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d, %v; want 1 on the pool's connections", fk, err)
	}
	// The migrated store works: ack the in-flight a-2 (lease 68), claim a-3.
	e := event(t, s, "a-2")
	if o := settle(t, s, "a-2", e.Generation, Result{OK: true}, 64); o != Acked {
		t.Fatalf("settle a-2 = %s", o)
	}
	if err := s.SetPolicy(ctx, DefaultPolicy(), "check audit kinds after migration", 64); err != nil {
		t.Fatalf("SetPolicy() error = %v", err)
	}
	q := event(t, s, "q-1")
	if err := s.Redrive(ctx, "q-1", q.Generation, "again", 65); err != nil {
		t.Fatalf("Redrive() error = %v", err)
	}
	checkIntegrity(t, s, "the migration")
}

// A version-1 file opened with a policy other than the one its migration
// records (the default) is refused, and the migration with it: the file
// stays at version 1, unchanged. A later Open migrates it.
func TestMigrate_V1OtherPolicyLeavesItUntouched(t *testing.T) {
	t.Parallel()
	path := copyV1(t)
	before := rawDump(t, path)
	p := DefaultPolicy()
	p.Lease = 6
	_, err := Open(path, WithPolicy(p))
	wantErr(t, "Open(v1, other policy)", err, ErrPolicyMismatch)
	if after := rawDump(t, path); after != before {
		t.Fatalf("refused Open changed the file:\n%s\nwant\n%s", after, before)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open after the refusal error = %v", err)
	}
	s.Close()
}

// v2Policy is the policy testdata/v2-queue.db records.
func v2Policy() Policy {
	p := DefaultPolicy()
	p.Lease, p.BackoffCap, p.Fairness = 7, 16, FairRotation
	return p
}

// A version-2 file made by the version-2 build (FairRotation) is migrated
// on Open: the snapshot is the version-2 build's, the policy and the
// rotation's index are kept, only meta's two checks still list values with
// IN, and the store then works.
func TestMigrate_V2FileKeepsTheRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := copyV2(t)
	s, err := Open(path, WithPolicy(v2Policy()))
	if err != nil {
		t.Fatalf("Open(v2 file) error = %v", err)
	}
	defer s.Close()
	wantSnapshotFile(t, s, "v2-queue.snapshot.json")
	after := rawDump(t, path)
	if !strings.Contains(after, "index flows_rotation: ") {
		t.Fatalf("the rotation's index is gone:\n%s", after)
	}
	if n := strings.Count(after, " IN ("); n != 2 {
		t.Fatalf("%d IN lists; want only meta's two checks:\n%s", n, after)
	}
	// The migrated store works: a-4 (in flight, lease 31) is acked and
	// a-5 claimed; b-2 is due at 25.
	e := event(t, s, "a-4")
	if o := settle(t, s, "a-4", e.Generation, Result{OK: true}, 25); o != Acked {
		t.Fatalf("settle a-4 = %s", o)
	}
	cs, err := s.ClaimBatch(ctx, 25, 10)
	if err != nil || len(cs) != 2 {
		t.Fatalf("ClaimBatch(25) = %+v, %v; want a-5 and b-2", cs, err)
	}
	if err := s.SetWeight(ctx, "a", 2, "after migration", 26); err != nil {
		t.Fatalf("SetWeight() error = %v", err)
	}
	checkIntegrity(t, s, "the migration")
}

// A version-2 file made before OldestDue gets flows_ready_due from
// migration 3 (the migration tests compare its catalog with a new file's),
// and OldestDue reads the ready heads stored before.
func TestMigrate_V2FileWithoutTheReadyDueIndexGetsIt(t *testing.T) {
	t.Parallel()
	s, err := Open(copyV2WithoutReadyDue(t))
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	if due, ok, err := s.OldestDue(context.Background(), 31); err != nil || !ok || due != 25 {
		t.Fatalf("OldestDue(31) = %d, %v, %v; want 25 (b-2's backoff ended), true, nil", due, ok, err)
	}
}

// A version-3 file made by the build that created new files from one full
// schema.sql opens as it was: its snapshot is that build's, and it keeps
// its rotation index.
func TestMigrate_V3FullSchemaFileOpensAsItWas(t *testing.T) {
	t.Parallel()
	path := copyTestdata(t, "v3-queue.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(v3 file) error = %v", err)
	}
	defer s.Close()
	wantSnapshotFile(t, s, "v3-queue.snapshot.json")
	if !strings.Contains(rawDump(t, path), "index flows_rotation: ") {
		t.Fatal("the rotation's index is gone")
	}
}

// A new file with FairRotation gets the rotation's index with its policy,
// in the transaction that ran the migrations; with the default policy it
// has none.
func TestMigrate_NewFileGetsTheRotationIndexWithItsPolicy(t *testing.T) {
	t.Parallel()
	p := DefaultPolicy()
	p.Fairness = FairRotation
	for _, c := range []struct {
		opts []Option
		want bool
	}{{nil, false}, {[]Option{WithPolicy(p)}, true}} {
		path := filepath.Join(t.TempDir(), "queue.db")
		s, err := Open(path, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if got := strings.Contains(rawDump(t, path), "index flows_rotation: "); got != c.want {
			t.Fatalf("Open(%d options): flows_rotation %v, want %v", len(c.opts), got, c.want)
		}
	}
}

// Migration 4 fills flows.head_enqueued_at from each head's event, so
// OldestWaiting on a file of every older build is the enqueue tick of its
// oldest event that is not acked (read from the snapshot); the policy gets
// no schedule and no retry-after cap, and the file has no history.
func TestMigrate_V4OldestWaitingOnOlderFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"v1-queue.db", "v2-queue.db", "v3-queue.db"} {
		s, err := Open(copyTestdata(t, name))
		if err != nil {
			t.Fatalf("Open(%s) error = %v", name, err)
		}
		sn := snap(t, s)
		var want clock.Tick
		wantOK := false
		for _, e := range sn.Events {
			if e.State != "acked" && (!wantOK || e.EnqueuedAt < want) {
				want, wantOK = e.EnqueuedAt, true
			}
		}
		if !wantOK {
			t.Fatalf("%s: every event acked; the test needs one that is not", name)
		}
		if at, ok, err := s.OldestWaiting(ctx); err != nil || !ok || at != want {
			t.Fatalf("%s: OldestWaiting() = %d, %v, %v; want %d, true", name, at, ok, err, want)
		}
		p, err := s.Policy(ctx)
		if err != nil || p.Schedule != nil || p.RetryAfterCap != 0 {
			t.Fatalf("%s: Policy() = %+v, %v; want no schedule, no cap", name, p, err)
		}
		if sn.Failures != nil {
			t.Fatalf("%s: migrated snapshot has failures %s", name, jsonOf(sn.Failures))
		}
		s.Close()
	}
}

// Migration 5 (docs/contract.md §7.9) gives each acked event of an older
// file the clock mark as its AckedAt (its ack tick was not recorded: the
// mark is the latest it can have been, so it waits a full window), and
// every other event 0; the policy gets no retention, no flow is paused,
// and the file keeps its auto_vacuum mode (none: VACUUM converts it). The
// first Prune under a retention deletes every old acked event a full
// window after the mark, and none before.
func TestMigrate_V5AckedAtIsTheMarkOnOlderFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"v1-queue.db", "v2-queue.db", "v3-queue.db"} {
		s, err := Open(copyTestdata(t, name))
		if err != nil {
			t.Fatalf("Open(%s) error = %v", name, err)
		}
		sn := snap(t, s)
		acked := int64(0)
		for _, e := range sn.Events {
			got := event(t, s, e.ID).AckedAt
			want := clock.Tick(0)
			if e.State == "acked" {
				want = sn.ClockMark
				acked++
			}
			if got != want {
				t.Fatalf("%s: event %s (%s) AckedAt = %d, want %d", name, e.ID, e.State, got, want)
			}
		}
		if acked == 0 {
			t.Fatalf("%s: no acked event; the test needs one", name)
		}
		st, err := s.Stats(ctx)
		if err != nil || st.PausedFlows != 0 {
			t.Fatalf("%s: Stats() = %+v, %v; want no paused flow", name, st, err)
		}
		var av int
		if err := s.db.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&av); err != nil || av != 0 {
			t.Fatalf("%s: auto_vacuum = %d, %v; want 0 (an older file keeps its mode)", name, av, err)
		}
		p, err := s.Policy(ctx)
		if err != nil || p.Retention != 0 {
			t.Fatalf("%s: Policy() = %+v, %v; want no retention", name, p, err)
		}
		const window = 50
		p.Retention = window
		mark := sn.ClockMark
		if err := s.SetPolicy(ctx, p, "keep 50 ticks", mark); err != nil {
			t.Fatalf("%s: SetPolicy() error = %v", name, err)
		}
		if r, err := s.Prunable(ctx, mark+window-1); err != nil || r.Events != 0 {
			t.Fatalf("%s: Prunable(mark + window - 1) = %+v, %v; want no event", name, r, err)
		}
		r, err := s.Prune(ctx, mark+window, MaxPruneBatch)
		if err != nil || r.Events != acked {
			t.Fatalf("%s: Prune(mark + window) = %+v, %v; want the %d acked events", name, r, err, acked)
		}
		s.Close()
	}
}

// A new file is created with auto_vacuum=INCREMENTAL (docs/contract.md
// §7.9), so that Prune can give freed pages back.
func TestMigrate_NewFileIsIncrementalVacuum(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	var av int
	if err := s.db.QueryRowContext(context.Background(), "PRAGMA auto_vacuum").Scan(&av); err != nil || av != 2 {
		t.Fatalf("auto_vacuum of a new file = %d, %v; want 2 (incremental)", av, err)
	}
}
