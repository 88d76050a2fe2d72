package queuestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// v5File is testdata/v2-queue.db (FairRotation, flows with events in every
// state) brought to version 5 as a version-5 build left it: migrations 3 to
// 5 run as they are, and the rotation's index of that build, which Open
// created beside the migrations.
func v5File(t *testing.T) string {
	t.Helper()
	path := copyV2(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	defer db.Close()
	for _, m := range migrations[2:5] {
		if _, err := db.Exec(m.SQL); err != nil {
			t.Fatalf("migration %s: %v", m.Name, err)
		}
	}
	for _, q := range []string{
		`CREATE INDEX IF NOT EXISTS flows_rotation ON flows (ready, pass, joined) WHERE ready = 1`,
		`PRAGMA user_version = 5`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return path
}

// Migration 6 on a version-5 file keeps every row of every table (flows and
// events get dest ”, the default destination, as their last column; audit
// is rebuilt with its ids), replaces flows_ready and the rotation's index
// with their destination-prefixed forms, and the store then works with
// destinations: a registration (a new audit kind) and a claim that leaves a
// destination out.
func TestMigrate_V6DestinationsFromV5(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := v5File(t)
	before := rawDump(t, path)
	if !strings.Contains(before, "user_version 5\n") || !strings.Contains(before, "ON flows (ready, pass, joined)") {
		t.Fatalf("the version-5 file is not as a version-5 build left it:\n%s", before)
	}
	s, err := Open(path, WithPolicy(v2Policy()))
	if err != nil {
		t.Fatalf("Open(v5 file) error = %v", err)
	}
	defer s.Close()
	after := rawDump(t, path)
	rows := func(dump string) map[string][]string {
		out := map[string][]string{}
		for _, line := range strings.Split(dump, "\n") {
			tab, _, ok := strings.Cut(line, " [")
			if ok && !strings.Contains(tab, ":") {
				out[tab] = append(out[tab], line)
			}
		}
		return out
	}
	b, a := rows(before), rows(after)
	if len(b["flows"]) == 0 || len(b["events"]) == 0 || len(b["audit"]) == 0 {
		t.Fatalf("the file has no flows, events or audit rows; the test needs them:\n%s", before)
	}
	for tab, lines := range b {
		if len(a[tab]) != len(lines) {
			t.Fatalf("table %s: %d rows after the migration, want %d", tab, len(a[tab]), len(lines))
		}
		for i, line := range lines {
			want := line
			if tab == "flows" || tab == "events" {
				want = strings.TrimSuffix(line, "]") + " ]" // dest '' last
			}
			if tab == "meta" && SchemaVersion >= 7 {
				want = strings.TrimSuffix(line, "]") + " <nil> <nil> <nil>]" // migration 7: no shard label
			}
			if a[tab][i] != want {
				t.Fatalf("table %s row %d after the migration:\n%s\nwant\n%s", tab, i, a[tab][i], want)
			}
		}
	}
	for _, want := range []string{
		fmt.Sprintf("user_version %d\n", SchemaVersion),
		"index flows_ready: CREATE INDEX flows_ready ON flows (ready, dest, served, flow) WHERE ready = 1\n",
		"index flows_rotation: CREATE INDEX flows_rotation ON flows (ready, dest, pass, joined) WHERE ready = 1\n",
		"index events_dest_inflight: ",
		"index flows_dest: ",
		"table destinations: ",
	} {
		if !strings.Contains(after, want) {
			t.Fatalf("after the migration the file has no %q:\n%s", want, after)
		}
	}
	wantSnapshotFile(t, s, "v2-queue.snapshot.json") // the snapshot of the v2 build, unchanged
	if err := s.PutDestination(ctx, Destination{Name: "alpha", URL: "http://127.0.0.1:9/", Secrets: []string{"k"}}, "after migration", 25); err != nil {
		t.Fatalf("PutDestination() error = %v", err)
	}
	if _, err := s.Enqueue(ctx, Event{ID: "z-1", Flow: "z", Body: []byte("x"), Destination: "alpha"}, 25); err != nil {
		t.Fatalf("Enqueue(to alpha) error = %v", err)
	}
	cs, err := s.ClaimFor(ctx, 25, 10, ClaimFilter{Exclude: []string{"alpha"}})
	if err != nil {
		t.Fatalf("ClaimFor() error = %v", err)
	}
	for _, c := range cs {
		if c.Flow == "z" || c.Destination != "" {
			t.Fatalf("ClaimFor(exclude alpha) = %+v, want no claim of alpha", cs)
		}
	}
	cs, err = s.ClaimFor(ctx, 25, 10, ClaimFilter{})
	if err != nil || len(cs) != 1 || cs[0].Flow != "z" || cs[0].Destination != "alpha" {
		t.Fatalf("ClaimFor() = %+v, %v; want z's head to alpha", cs, err)
	}
	checkIntegrity(t, s, "migration 6")
}
