package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/jackc/pgx/v5"
)

// The program runs against the real PostgreSQL server (skipped when there
// is none, failed with FAIRRELAY_REQUIRE_POSTGRES=1): the orders taken and
// their events commit together, the refused order leaves neither, and the
// inbox's effect ran exactly once per event. A second run over the same
// database and inbox adds nothing and applies nothing twice.
func TestOutbox(t *testing.T) {
	url, shop := pgtest.Schema(t)
	_, queueSchema := pgtest.Schema(t)
	inboxPath := filepath.Join(t.TempDir(), "inbox.db")
	args := []string{"-postgres", url, "-schema", shop, "-queue-schema", queueSchema, "-inbox", inboxPath}
	ctx := context.Background()

	var out bytes.Buffer
	if err := run(ctx, args, &out); err != nil {
		t.Fatalf("run() = %v; output:\n%s", err, out.String())
	}
	want := `order o-1 taken: 2 events enqueued with it
order o-2 taken: 2 events enqueued with it
order o-3 taken: 2 events enqueued with it
order o-4 refused: rolled back with its events
relay idle: 6 delivered, 0 retried, 0 quarantined
inbox: 4 events of alice applied
inbox: 2 events of bob applied
`
	if out.String() != want {
		t.Fatalf("first run's output:\n%s\nwant:\n%s", out.String(), want)
	}
	wantApplied := []string{"o-1/placed 1", "o-1/ship 1", "o-2/placed 1", "o-2/ship 1", "o-3/placed 1", "o-3/ship 1"}
	if got := applied(t, inboxPath); !slices.Equal(got, wantApplied) {
		t.Fatalf("applied (event, times) = %v, want %v", got, wantApplied)
	}
	if got := orderIDs(t, url, shop); !slices.Equal(got, []string{"o-1", "o-2", "o-3"}) {
		t.Fatalf("orders = %v, want o-1..o-3 (o-4 rolled back)", got)
	}

	out.Reset()
	if err := run(ctx, args, &out); err != nil {
		t.Fatalf("second run() = %v; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "order o-1 taken: 0 events enqueued with it\n") ||
		!strings.Contains(out.String(), "relay idle: 0 delivered, 0 retried, 0 quarantined\n") ||
		!strings.Contains(out.String(), "inbox: 4 events of alice applied\n") {
		t.Fatalf("second run's output:\n%s\nwant nothing new enqueued, delivered or applied", out.String())
	}
	if got := applied(t, inboxPath); !slices.Equal(got, wantApplied) {
		t.Fatalf("applied after a second run = %v, want %v", got, wantApplied)
	}
}

// applied reads the inbox's effect table: "event times" per event ID.
func applied(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT event_id, count(*) FROM applied GROUP BY event_id ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d", id, n))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// orderIDs reads the shop's orders table.
func orderIDs(t *testing.T, url, schema string) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT id FROM `+pgx.Identifier{schema, "orders"}.Sanitize()+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
