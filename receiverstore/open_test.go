package receiverstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// WithMaxDelta accepts 1..1000 and nothing else (an error at Open).
func TestOpen_WithMaxDeltaRange(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1, 1001, 1 << 40} {
		path := filepath.Join(t.TempDir(), "r.db")
		s, err := Open(path, WithMaxDelta(n))
		if !errors.Is(err, ErrInvalidOption) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("Open(WithMaxDelta(%d)) error = %v, want ErrInvalidOption", n, err)
		}
	}
	for _, n := range []int{1, 1000} {
		s, _ := open(t, WithMaxDelta(n))
		if s.maxDelta != int64(n) {
			t.Errorf("Open(WithMaxDelta(%d)).maxDelta = %d", n, s.maxDelta)
		}
	}
	s, _ := open(t)
	if s.maxDelta != DefaultMaxDelta {
		t.Errorf("default maxDelta = %d, want %d", s.maxDelta, DefaultMaxDelta)
	}
}

// docs/contract.md §2.7 (storage rules shared by the receiver): WAL, synchronous=FULL,
// a busy timeout, foreign keys, on every connection of the pool.
func TestOpen_ConnectionPragmas(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	ctx := context.Background()
	// Hold two connections at once so the check covers more than one.
	c1, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for i, c := range []*sql.Conn{c1, c2} {
		for pragma, want := range map[string]string{
			"journal_mode": "wal",
			"synchronous":  "2", // FULL
			"busy_timeout": "10000",
			"foreign_keys": "1",
		} {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("conn %d: PRAGMA %s = %q, want %q", i, pragma, got, want)
			}
		}
	}
}

// docs/contract.md §2.7: the schema carries a version; STRICT tables.
func TestOpen_SchemaVersionAndStrictTables(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, SchemaVersion)
	}
	for _, table := range []string{"flows", "receipts", "conflicts"} {
		var strict int
		if err := s.db.QueryRow(`SELECT strict FROM pragma_table_list WHERE name = ?`, table).Scan(&strict); err != nil {
			t.Fatalf("table %s: %v", table, err)
		}
		if strict != 1 {
			t.Errorf("table %s strict = %d, want 1", table, strict)
		}
	}
	// STRICT refuses a wrongly typed value.
	if _, err := s.db.Exec(`INSERT INTO flows (flow, next_expected, total) VALUES ('f', 'two', 1)`); err == nil {
		t.Errorf("inserting TEXT into an INTEGER column succeeded; want a STRICT error")
	}
}

// A file written by a newer schema is refused and left as it was.
func TestOpen_NewerSchemaVersionRefused(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path)
	if !errors.Is(err, ErrSchemaVersion) {
		if s2 != nil {
			_ = s2.Close()
		}
		t.Fatalf("Open(newer file) error = %v, want ErrSchemaVersion", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v, n int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion+1 {
		t.Errorf("user_version after refused Open = %d, %v; want %d", v, err, SchemaVersion+1)
	}
	if err := db.QueryRow("SELECT count(*) FROM receipts").Scan(&n); err != nil || n != 1 {
		t.Errorf("receipts after refused Open = %d, %v; want 1", n, err)
	}
}

// docs/contract.md §2.7: opening an existing file never clears it.
func TestOpen_ReopenKeepsRecords(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	mustReceive(t, s, msg("e1", "f", 1, 6), Conflict)
	before := snap(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, path)
	assertUnchanged(t, s2, before, "reopening")
	mustReceive(t, s2, msg("e1", "f", 1, 5), Duplicate)
}

// Several Opens of one new file at once all succeed and share one schema:
// the same message received through each is accepted exactly once.
func TestOpen_ConcurrentOpensOfANewFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r.db")
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	done := make(chan int)
	for i := range n {
		go func() {
			stores[i], errs[i] = Open(path)
			done <- i
		}()
	}
	for range n {
		<-done
	}
	accepted := 0
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("concurrent Open #%d error = %v", i, errs[i])
		}
		defer s.Close()
		out, err := s.Receive(context.Background(), msg("e1", "f", 1, 5))
		if err != nil {
			t.Fatalf("Receive via store #%d error = %v", i, err)
		}
		if out == Accepted {
			accepted++
		}
	}
	if accepted != 1 {
		t.Fatalf("accepted %d times, want 1", accepted)
	}
}

// The file Open uses is exactly path, even when path holds characters that
// mean something in an SQLite URI ('#' and '?' once made every fuzz seed
// share one file named up to the '#').
func TestOpen_PathWithURICharacters(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a#b", "a?b", "a%23b", "a b", "é"} {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "receiver.db")
		s := reopen(t, path)
		mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
		if _, err := os.Stat(path); err != nil {
			t.Errorf("dir %q: Stat(path) error = %v; the store wrote elsewhere", name, err)
		}
		var file string
		if err := s.db.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
			t.Fatal(err)
		}
		if file != path {
			t.Errorf("dir %q: database file = %q, want %q", name, file, path)
		}
		var mode string
		if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("dir %q: journal_mode = %q, %v; want wal", name, mode, err)
		}
	}
}
