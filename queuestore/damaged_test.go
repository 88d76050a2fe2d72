package queuestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/fairrelay/fairrelay/dbfile"
)

// listDir lists the names in dir.
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// closedQueue makes a queue with 40 events (5 claimed) in dir and closes
// it; it returns the path and the file's bytes.
func closedQueue(t testing.TB, dir string) (string, []byte) {
	t.Helper()
	path := filepath.Join(dir, "good.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		enqueue(t, s, fmt.Sprintf("e%02d", i), fmt.Sprintf("f%d", i%8), `{"delta":1}`, 1)
	}
	for range 5 {
		mustClaim(t, s, 2)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

// sqliteFile makes an SQLite database of another program at path.
func sqliteFile(t testing.TB, path, script string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(script); err != nil {
		t.Fatal(err)
	}
}

// Every wrong file is refused with a typed error naming the path and the
// cause; the folder and the file are left exactly as they were: no lock
// file, no -wal or -shm, not a byte written. Each case is tried read-write
// and read-only.
func TestOpen_WrongFilesAreRefusedAndLeftAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, good := closedQueue(t, dir)
	put := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newer := put("newer.db", good)
	sqliteFile(t, newer, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1))
	other := filepath.Join(dir, "other.db")
	sqliteFile(t, other, "CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('mine')")
	receiverLike := filepath.Join(dir, "receiverlike.db")
	sqliteFile(t, receiverLike, "PRAGMA journal_mode=WAL; CREATE TABLE flows (flow TEXT); CREATE TABLE receipts (id TEXT); CREATE TABLE conflicts (id TEXT); PRAGMA user_version = 1")
	if err := os.Mkdir(filepath.Join(dir, "adir.db"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		path  string
		want  []error // every one must match, read-write and read-only
		rwOK  bool    // a read-write Open takes it (an empty file is a new queue)
		roErr []error // read-only wants these instead (nil: same as want)
	}{
		{name: "text file", path: put("text.db", []byte("this is a shopping list, not a database\n")), want: []error{ErrNotQueue, dbfile.ErrNotDatabase}},
		{name: "truncated copy", path: put("cut.db", good[:len(good)-4096]), want: []error{ErrNotQueue, dbfile.ErrTruncated}},
		{name: "cut mid-page", path: put("mid.db", good[:len(good)-1000]), want: []error{ErrNotQueue, dbfile.ErrTruncated}},
		{name: "header only", path: put("head.db", good[:50]), want: []error{ErrNotQueue, dbfile.ErrTruncated}},
		{name: "newer schema version", path: newer, want: []error{ErrSchemaVersion}},
		{name: "another program's database", path: other, want: []error{ErrNotQueue, ErrSchemaVersion}},
		{name: "a receiver's database", path: receiverLike, want: []error{ErrNotQueue, ErrSchemaVersion}},
		{name: "directory", path: filepath.Join(dir, "adir.db"), want: []error{ErrOpen, syscall.EISDIR}},
		{name: "missing parent folder", path: filepath.Join(dir, "nowhere", "q.db"), want: []error{ErrOpen, fs.ErrNotExist}},
		{name: "empty file", path: put("empty.db", nil), rwOK: true, roErr: []error{ErrNotQueue}},
	} {
		for _, ro := range []bool{false, true} {
			want := c.want
			if ro && c.roErr != nil {
				want = c.roErr
			}
			if !ro && c.rwOK {
				continue
			}
			before := listDir(t, dir)
			content, _ := os.ReadFile(c.path)
			var opts []Option
			if ro {
				opts = append(opts, WithReadOnly())
			}
			s, err := Open(c.path, opts...)
			if err == nil {
				s.Close()
				t.Errorf("%s (read-only %v): Open succeeded, want %v", c.name, ro, want)
				continue
			}
			for _, w := range want {
				if !errors.Is(err, w) {
					t.Errorf("%s (read-only %v): Open error = %v, want it to match %v", c.name, ro, err, w)
				}
			}
			if !bytes.Contains([]byte(err.Error()), []byte(c.path)) {
				t.Errorf("%s: error %q does not name the path", c.name, err)
			}
			if after := listDir(t, dir); !slices.Equal(before, after) {
				t.Errorf("%s (read-only %v): Open changed the folder:\n before %v\n after  %v", c.name, ro, before, after)
			}
			if now, _ := os.ReadFile(c.path); !bytes.Equal(now, content) {
				t.Errorf("%s (read-only %v): Open changed the file", c.name, ro)
			}
		}
	}
}

// A read-only store reads a closed queue without creating a file, sees what
// a writer commits while it is open, and refuses every write.
func TestOpen_ReadOnlyCreatesNothingAndRefusesWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path, _ := closedQueue(t, dir)
	before := listDir(t, dir)
	r, err := Open(path, WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Stats(ctx)
	if err != nil || st.Events.Pending+st.Events.Inflight != 40 || st.Events.Inflight != 5 {
		t.Errorf("read-only Stats = %+v, %v; want 40 events, 5 in flight", st, err)
	}
	if _, err := r.Snapshot(ctx); err != nil {
		t.Errorf("read-only Snapshot: %v", err)
	}
	if _, err := r.Enqueue(ctx, Event{ID: "x", Flow: "f", Body: []byte("{}")}, 3); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Enqueue error = %v, want ErrReadOnly", err)
	}
	if _, _, err := r.Claim(ctx, 3); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Claim error = %v, want ErrReadOnly", err)
	}
	if _, err := r.Settle(ctx, "e00", 1, Result{OK: true}, 3); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Settle error = %v, want ErrReadOnly", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Errorf("a read-only store changed the folder: %v -> %v", before, after)
	}

	w := reopenTest(t, path)
	enqueue(t, w, "w1", "f0", `{"delta":1}`, 3)
	before = listDir(t, dir)
	r, err = Open(path, WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if e, err := r.Event(ctx, "w1"); err != nil || e.State != "pending" {
		t.Errorf("read-only Event(w1) beside a writer = %+v, %v; want it pending", e, err)
	}
	enqueue(t, w, "w2", "f0", `{"delta":1}`, 3)
	if _, err := r.Event(ctx, "w2"); err != nil {
		t.Errorf("read-only Event(w2) after the writer's next commit: %v", err)
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Errorf("a read-only store beside a writer changed the folder: %v -> %v", before, after)
	}
}

// A version-1 file opened read-only is refused (reading it needs the
// migration, which writes); it is left as it was.
func TestOpen_ReadOnlyRefusesAVersion1File(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, _ := closedQueue(t, dir)
	sqliteFile(t, path, "PRAGMA user_version = 1") // what Open reads as a file to migrate
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before := listDir(t, dir)
	if _, err := Open(path, WithReadOnly()); !errors.Is(err, ErrSchemaVersion) {
		t.Errorf("read-only Open(version 1) error = %v, want ErrSchemaVersion", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, data) {
		t.Errorf("a read-only Open changed the version-1 file")
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Errorf("a read-only Open changed the folder: %v -> %v", before, after)
	}
}
