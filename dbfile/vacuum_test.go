package dbfile

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// IncrementalVacuum asks for what a batch freed and limit more, never for
// 0 (SQLite's "everything"), and on a real auto_vacuum=INCREMENTAL file
// gives back exactly that many pages of a longer free list.
func TestIncrementalVacuum(t *testing.T) {
	for _, c := range []struct {
		before, after int64
		limit         int
		want          string
	}{
		{10, 25, 5, "PRAGMA incremental_vacuum(20)"},
		{10, 10, 5, "PRAGMA incremental_vacuum(5)"},
		{30, 10, 5, "PRAGMA incremental_vacuum(5)"}, // the list shrank: a delete reused pages
		{0, 0, 0, "PRAGMA incremental_vacuum(1)"},
	} {
		if got := IncrementalVacuum(c.before, c.after, c.limit); got != c.want {
			t.Errorf("IncrementalVacuum(%d, %d, %d) = %q, want %q", c.before, c.after, c.limit, got, c.want)
		}
	}

	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "v.db")+
		"?_pragma=auto_vacuum(INCREMENTAL)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	free := func() int64 {
		t.Helper()
		var n int64
		if err := db.QueryRowContext(ctx, FreePagesSQL).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (x BLOB);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 40)
		INSERT INTO t SELECT randomblob(3000) FROM n`); err != nil {
		t.Fatal(err)
	}
	// An older build's free list: 20 rows deleted, nothing given back.
	if _, err := db.ExecContext(ctx, `DELETE FROM t WHERE rowid <= 20`); err != nil {
		t.Fatal(err)
	}
	left := free()
	if left < 20 {
		t.Fatalf("free pages after deleting 20 rows of a page each: %d, want at least 20", left)
	}
	// A batch: 10 more rows, then its vacuum with a limit of 3.
	before := free()
	if _, err := db.ExecContext(ctx, `DELETE FROM t WHERE rowid BETWEEN 21 AND 30`); err != nil {
		t.Fatal(err)
	}
	after := free()
	if _, err := db.ExecContext(ctx, IncrementalVacuum(before, after, 3)); err != nil {
		t.Fatal(err)
	}
	if got, want := free(), left-3; got != want {
		t.Errorf("free pages after the batch's vacuum: %d, want %d (the batch's %d given back and 3 of the older %d)", got, want, after-before, left)
	}
}
