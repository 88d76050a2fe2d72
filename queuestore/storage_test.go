package queuestore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// docs/contract.md §2.7: WAL, synchronous=FULL, a busy timeout, foreign keys, on every
// connection of the pool.
func TestStorage_2_7_Pragmas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatalf("Conn() error = %v", err)
	}
	defer conn.Close()
	for pragma, want := range map[string]string{
		"journal_mode": "wal",
		"synchronous":  "2", // FULL
		"busy_timeout": "10000",
		"foreign_keys": "1",
	} {
		var got string
		if err := conn.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s error = %v", pragma, err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}
}

// docs/contract.md §2.7: write transactions start IMMEDIATE: a second store cannot begin
// a write while the first holds one open (it waits, then gets SQLITE_BUSY
// at begin, never at a lock upgrade).
func TestStorage_2_7_WritesBeginImmediate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatalf("BeginTx() error = %v", err)
	}
	defer tx.Rollback()
	// Under BEGIN DEFERRED no lock would be held yet; under IMMEDIATE the
	// write lock is, so a second BEGIN IMMEDIATE (busy_timeout 0) fails.
	other, err := sql.Open("sqlite", "file:"+dbPath(t, s)+"?_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		t.Fatalf("sql.Open() error = %v", err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "BEGIN IMMEDIATE"); err == nil {
		t.Fatalf("second BEGIN IMMEDIATE succeeded while the store's transaction was open: it was not IMMEDIATE")
	} else if !strings.Contains(err.Error(), "locked") && !strings.Contains(err.Error(), "busy") {
		t.Fatalf("second BEGIN IMMEDIATE error = %v, want SQLITE_BUSY", err)
	}
}

func dbPath(t testing.TB, s *Store) string {
	t.Helper()
	var seq int
	var name, file string
	if err := s.db.QueryRow("PRAGMA database_list").Scan(&seq, &name, &file); err != nil {
		t.Fatalf("PRAGMA database_list error = %v", err)
	}
	return file
}

// docs/contract.md §2.7: opening an existing file never clears it: every record and the
// clock mark survive a close and reopen.
func TestStorage_2_7_ReopenKeepsEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "queue.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	enqueue(t, s, "q1", "q", "x", 0)
	q, now := quarantineHead(t, s, 0)
	if err := s.Redrive(ctx, "q1", q.Generation, "r", now); err != nil {
		t.Fatalf("Redrive() error = %v", err)
	}
	enqueue(t, s, "a1", "a", "x", now)
	mustClaim(t, s, now+7)
	before := snap(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("reopen error = %v", err)
	}
	defer s2.Close()
	after := snap(t, s2)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("reopen changed the store:\nbefore %s\nafter  %s", jsonOf(before), jsonOf(after))
	}
	_, _, err = s2.Claim(ctx, now+6)
	wantErr(t, "Claim below the mark after reopen", err, ErrTimeRegression)
}

// docs/contract.md §2.7: the schema carries its version in user_version; a
// newer version, or a foreign file, is refused with a clear error.
func TestStorage_2_7_SchemaVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "queue.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, SchemaVersion)
	}
	newer := SchemaVersion + 1
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", newer)); err != nil {
		t.Fatalf("set user_version error = %v", err)
	}
	s.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d", newer)) {
		t.Fatalf("Open(newer file) error = %v, want ErrSchemaVersion naming version %d", err, newer)
	} else {
		wantErr(t, "Open(newer file)", err, ErrSchemaVersion)
	}

	foreign := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", "file:"+foreign)
	if err != nil {
		t.Fatalf("sql.Open() error = %v", err)
	}
	if _, err := db.Exec("CREATE TABLE t (x)"); err != nil {
		t.Fatalf("create error = %v", err)
	}
	db.Close()
	_, err = Open(foreign)
	wantErr(t, "Open(foreign file)", err, ErrSchemaVersion)

	_, err = Open("")
	wantErr(t, "Open(empty path)", err, ErrInvalid)
}

// docs/contract.md §2.7: a path with characters special in SQLite URIs opens that very
// file, and reopening it finds the records.
func TestStorage_2_7_PathsWithURICharacters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"a?b.db", "c#d.db", "e%20f.db", "g h.db"} {
		path := filepath.Join(dir, name)
		s, err := Open(path)
		if err != nil {
			t.Fatalf("Open(%q) error = %v", name, err)
		}
		enqueue(t, s, "e1", "f", name, 0)
		s.Close()
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("Open(%q) did not create that file: %v", name, err)
		}
		s, err = Open(path)
		if err != nil {
			t.Fatalf("reopen %q error = %v", name, err)
		}
		if e := event(t, s, "e1"); string(e.Body) != name {
			t.Fatalf("reopened %q: body %q, want %q", name, e.Body, name)
		}
		s.Close()
	}
}
