package queuestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
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
		rows, err := db.Query("SELECT * FROM " + tab + " ORDER BY rowid")
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

// A version-1 file made by the v1 build is migrated on Open: every row is
// kept (the snapshot is the v1 build's), the version is SchemaVersion, the default
// policy is recorded and the redrive audit row reads as kind 'redrive'.
// The store then works as a new one.
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
	if p, err := s.Policy(ctx); err != nil || p != DefaultPolicy() {
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
	if _, err := s.db.Exec("PRAGMA integrity_check"); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	s.Close()
	// Reopening a migrated file changes nothing.
	before := rawDump(t, path)
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("reopen error = %v", err)
	}
	s2.Close()
	if after := rawDump(t, path); after != before {
		t.Fatalf("reopen changed the file:\n%s\nwant\n%s", after, before)
	}
}

// failMigrationAt opens path once for each step in steps with a failure
// injected at that step of the migration, and checks that each Open fails
// and leaves the file as before (rawDump).
func failMigrationAt(t *testing.T, path, before string, steps []int) {
	t.Helper()
	for _, failAt := range steps {
		migrateStep = func(i int) error {
			if i == failAt {
				return errors.New("injected failure")
			}
			return nil
		}
		_, err := Open(path)
		migrateStep = nil
		if err == nil || !strings.Contains(err.Error(), "injected failure") {
			t.Fatalf("Open with a failure at step %d: error = %v", failAt, err)
		}
		if after := rawDump(t, path); after != before {
			t.Fatalf("failed migration at step %d changed the file:\n%s\nwant\n%s", failAt, after, before)
		}
	}
}

// A migration that fails midway leaves the file at version 1, untouched:
// it is one transaction. A later Open migrates it.
func TestMigrate_FailureMidwayLeavesV1Untouched(t *testing.T) {
	// Not parallel: migrateStep is package state.
	path := copyV1(t)
	before := rawDump(t, path)
	steps := strings.Count(migrateV1V2SQL, "\n-- step\n") + 1
	// Then steps of the v2 -> v3 rebuild that follows: its first
	// statement, one inside it, and the first index it creates again.
	v2v3 := strings.Count(migrateV2V3SQL, "\n-- step\n") + 1
	failMigrationAt(t, path, before, []int{1, steps / 2, steps - 1, steps, steps + 4, steps + v2v3})
	// A different explicit policy fails the migration the same way.
	p := DefaultPolicy()
	p.Lease = 6
	_, err := Open(path, WithPolicy(p))
	wantErr(t, "Open(v1, other policy)", err, ErrPolicyMismatch)
	if after := rawDump(t, path); after != before {
		t.Fatalf("refused Open changed the file")
	}
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open after failures error = %v", err)
	}
	s.Close()
}

// A migrated file has the new file's schema: same columns (with types,
// defaults, NOT NULL), same indexes, same foreign keys, and the same CHECK
// constraints (by table SQL here, whitespace collapsed). The version-2
// file's new twin gets its policy, so the rotation's index too.
func TestMigrate_SchemaEqualsNewFile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		copy func(*testing.T) string
		opts []Option
		want map[string]int // at least this many entries per key: schemaShape read enough
	}{
		{"v1", copyV1, nil, map[string]int{"events table_xinfo": 13, "index sql": 9, "events checks": 12, "meta checks": 10}},
		{"v2", copyV2, []Option{WithPolicy(v2Policy())}, map[string]int{"index sql": 10, "events checks": 12, "flows checks": 7}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			migrated := c.copy(t)
			s, err := Open(migrated)
			if err != nil {
				t.Fatalf("Open(%s) error = %v", c.name, err)
			}
			s.Close()
			freshPath := filepath.Join(t.TempDir(), "fresh.db")
			f2, err := Open(freshPath, c.opts...)
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			f2.Close()
			a, b := schemaShape(t, migrated), schemaShape(t, freshPath)
			for k, n := range c.want {
				if len(a[k]) != n {
					t.Fatalf("schemaShape read %d %q, want %d: %s", len(a[k]), k, n, jsonOf(a))
				}
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("migrated schema:\n%s\nnew file's schema:\n%s", jsonOf(a), jsonOf(b))
			}
		})
	}
}

func schemaShape(t *testing.T, path string) map[string][]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	defer db.Close()
	out := map[string][]string{}
	for _, tab := range []string{"meta", "flows", "events", "audit"} {
		for _, pragma := range []string{"table_xinfo", "index_list", "foreign_key_list"} {
			rows, err := db.Query(fmt.Sprintf("SELECT * FROM pragma_%s('%s')", pragma, tab))
			if err != nil {
				t.Fatalf("%s(%s): %v", pragma, tab, err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatalf("scan: %v", err)
				}
				if pragma == "index_list" {
					vals[0] = nil // seq depends on creation order
				}
				out[tab+" "+pragma] = append(out[tab+" "+pragma], fmt.Sprintf("%v", vals))
			}
			rows.Close()
			if pragma == "index_list" {
				sort.Strings(out[tab+" "+pragma]) // listed in creation order
			}
		}
	}
	rows, err := db.Query("SELECT name, sql FROM sqlite_schema WHERE type = 'table' ORDER BY name")
	if err != nil {
		t.Fatalf("tables: %v", err)
	}
	for rows.Next() {
		var name, text string
		rows.Scan(&name, &text)
		checks := checkClauses(text)
		sort.Strings(checks)
		out[name+" checks"] = checks
	}
	rows.Close()
	rows, err = db.Query("SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
	if err != nil {
		t.Fatalf("indexes: %v", err)
	}
	for rows.Next() {
		var name, text string
		rows.Scan(&name, &text)
		out["index sql"] = append(out["index sql"], name+": "+text)
	}
	rows.Close()
	return out
}

// checkClauses returns every CHECK (...) of a CREATE TABLE, whitespace
// collapsed.
func checkClauses(sqlText string) []string {
	text := strings.Join(strings.Fields(sqlText), " ")
	var out []string
	for {
		i := strings.Index(text, "CHECK (")
		if i < 0 {
			return out
		}
		depth, j := 0, i+len("CHECK ")
		for ; j < len(text); j++ {
			if text[j] == '(' {
				depth++
			} else if text[j] == ')' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		out = append(out, text[i:j+1])
		text = text[j+1:]
	}
}

// A file with a version above SchemaVersion is still refused.
func TestMigrate_NewerVersionRefused(t *testing.T) {
	t.Parallel()
	path := copyV1(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1)); err != nil {
		t.Fatalf("set version: %v", err)
	}
	db.Close()
	_, err = Open(path)
	wantErr(t, "Open(newer version)", err, ErrSchemaVersion)
}

// v2Policy is the policy testdata/v2-queue.db records.
func v2Policy() Policy {
	p := DefaultPolicy()
	p.Lease, p.BackoffCap, p.Fairness = 7, 16, FairRotation
	return p
}

// rowLines is rawDump's rows of the queue's tables, without the version
// and the schema.
func rowLines(dump string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(dump, "\n") {
		for _, tab := range []string{"meta [", "flows [", "events [", "audit ["} {
			if strings.HasPrefix(line, tab) {
				b.WriteString(line)
			}
		}
	}
	return b.String()
}

// rowids lists each row's rowid of flows and events, in rowid order.
func rowids(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	defer db.Close()
	var js string
	q := `SELECT json_array((SELECT json_group_array(json_array(rowid, flow)) FROM (SELECT rowid, flow FROM flows ORDER BY rowid)),
	    (SELECT json_group_array(json_array(rowid, id)) FROM (SELECT rowid, id FROM events ORDER BY rowid)))`
	if err := db.QueryRow(q).Scan(&js); err != nil {
		t.Fatalf("rowids: %v", err)
	}
	return js
}

// A version-2 file made by the version-2 build is migrated on Open: every
// row is kept with its rowid (the snapshot is the version-2 build's), the
// version is SchemaVersion, the policy and the rotation's index are kept,
// and the store then works.
func TestMigrate_V2FileKeepsEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := copyV2(t)
	before, ids := rawDump(t, path), rowids(t, path)
	if !strings.HasPrefix(before, "user_version 2\n") {
		t.Fatalf("testdata is not a version-2 file:\n%s", before)
	}
	s, err := Open(path, WithPolicy(v2Policy()))
	if err != nil {
		t.Fatalf("Open(v2 file) error = %v", err)
	}
	defer s.Close()
	wantSnapshotFile(t, s, "v2-queue.snapshot.json")
	after := rawDump(t, path)
	if !strings.HasPrefix(after, fmt.Sprintf("user_version %d\n", SchemaVersion)) {
		t.Fatalf("after Open:\n%s", after)
	}
	if rowLines(after) != rowLines(before) || rowids(t, path) != ids {
		t.Fatalf("rows changed:\nbefore:\n%s%s\nafter:\n%s%s", rowLines(before), ids, rowLines(after), rowids(t, path))
	}
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
	if _, err := s.db.Exec("PRAGMA integrity_check"); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
}

// A migration from version 2 that fails at any step leaves the file
// untouched: it is one transaction.
func TestMigrate_V2FailureMidwayLeavesItUntouched(t *testing.T) {
	// Not parallel: migrateStep is package state.
	path := copyV2(t)
	before := rawDump(t, path)
	// Count the steps on another copy: the script's statements, then one
	// per index the rebuild creates again.
	steps := 0
	migrateStep = func(i int) error { steps = i + 1; return nil }
	s, err := Open(copyV2(t))
	migrateStep = nil
	if err != nil {
		t.Fatalf("Open(counting copy) error = %v", err)
	}
	s.Close()
	if want := strings.Count(migrateV2V3SQL, "\n-- step\n") + 1 + 10; steps != want {
		t.Fatalf("the migration ran %d steps, want %d (the script and 10 indexes)", steps, want)
	}
	var every []int
	for i := range steps {
		every = append(every, i)
	}
	failMigrationAt(t, path, before, every)
	s, err = Open(path)
	if err != nil {
		t.Fatalf("Open after failures error = %v", err)
	}
	s.Close()
}

// A version-2 file made before OldestDue has no flows_ready_due index: the
// migration adds it, and every row is kept.
func TestMigrate_V2FileWithoutTheReadyDueIndexGetsIt(t *testing.T) {
	t.Parallel()
	path := copyV2(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DROP INDEX flows_ready_due"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := rawDump(t, path)
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	if due, ok, err := s.OldestDue(context.Background(), 31); err != nil || !ok || due != 25 {
		t.Fatalf("OldestDue(31) = %d, %v, %v; want 25 (b-2's backoff ended), true, nil", due, ok, err)
	}
	s.Close()
	after := rawDump(t, path)
	want := "index flows_ready_due: CREATE INDEX flows_ready_due ON flows (ready, ready_at) WHERE ready = 1\n"
	if !strings.Contains(after, want) {
		t.Fatalf("after Open the file has no flows_ready_due index:\n%s", after)
	}
	if rowLines(after) != rowLines(before) {
		t.Fatalf("Open changed rows:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
