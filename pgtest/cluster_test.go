package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fairrelay/fairrelay/pgtest"
)

// A private cluster survives both restart modes with what it committed,
// and a session open across a restart is ended by it.
func TestCluster_RestartKeepsCommittedData(t *testing.T) {
	c := pgtest.StartCluster(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE t (n int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	for i, mode := range []string{pgtest.ShutdownFast, pgtest.ShutdownImmediate} {
		if err := c.Restart(ctx, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `SELECT 1`); err == nil {
			t.Fatalf("restart -m %s: a session from before the restart still works", mode)
		}
		conn2, err := pgx.Connect(ctx, c.URL)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := conn2.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != i+1 {
			t.Fatalf("after restart -m %s: %d rows, want %d", mode, n, i+1)
		}
		if _, err := conn2.Exec(ctx, `INSERT INTO t VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		conn2.Close(ctx)
	}
	if err := c.Stop(ctx, "smart"); err == nil {
		t.Fatal("Stop accepted a mode it does not know")
	}
}
