package receiverstore

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

// closedReceiver makes a receiver database with a few receipts in dir and
// closes it; it returns the path and the file's bytes.
func closedReceiver(t testing.TB, dir string) (string, []byte) {
	t.Helper()
	path := filepath.Join(dir, "good.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 30; i++ {
		mustReceive(t, s, msg("e"+string(rune('a'+i%26))+string(rune('0'+i/26)), "f", int64(i), i), Accepted)
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
	_, good := closedReceiver(t, dir)
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
	queueLike := filepath.Join(dir, "queuelike.db")
	sqliteFile(t, queueLike, "CREATE TABLE flows (flow TEXT); CREATE TABLE events (id TEXT); PRAGMA user_version = 1")
	if err := os.Mkdir(filepath.Join(dir, "adir.db"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		path  string
		want  []error // every one must match, read-write and read-only
		rwOK  bool    // a read-write Open creates it (a missing file)
		roErr []error // read-only wants these instead (nil: same as want)
	}{
		{name: "text file", path: put("text.db", []byte("this is a shopping list, not a database\n")), want: []error{ErrNotReceiver, dbfile.ErrNotDatabase}},
		{name: "truncated copy", path: put("cut.db", good[:len(good)-4096]), want: []error{ErrNotReceiver, dbfile.ErrTruncated}},
		{name: "cut mid-page", path: put("mid.db", good[:len(good)-1000]), want: []error{ErrNotReceiver, dbfile.ErrTruncated}},
		{name: "header only", path: put("head.db", good[:50]), want: []error{ErrNotReceiver, dbfile.ErrTruncated}},
		{name: "newer schema version", path: newer, want: []error{ErrSchemaVersion}},
		{name: "another program's database", path: other, want: []error{ErrNotReceiver}},
		{name: "a queue's database", path: queueLike, want: []error{ErrNotReceiver}},
		{name: "directory", path: filepath.Join(dir, "adir.db"), want: []error{ErrOpen, syscall.EISDIR}},
		{name: "missing parent folder", path: filepath.Join(dir, "nowhere", "r.db"), want: []error{ErrOpen, fs.ErrNotExist}},
		{name: "empty file", path: put("empty.db", nil), rwOK: true, roErr: []error{ErrNotReceiver}},
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

// A read-only store reads a closed database without creating a file, sees
// what a writer commits while it is open, and refuses writes.
func TestOpen_ReadOnlyCreatesNothingAndRefusesWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, _ := closedReceiver(t, dir)
	before := listDir(t, dir)
	r, err := Open(path, WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got := total(t, r, "f"); got != 465 {
		t.Errorf("read-only Total = %d, want 465", got)
	}
	if _, err := r.Receive(ctx, msg("new", "f", 31, 1)); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Receive error = %v, want ErrReadOnly", err)
	}
	if _, err := r.ReceiveBatch(ctx, []Message{msg("new", "f", 31, 1)}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only ReceiveBatch error = %v, want ErrReadOnly", err)
	}
	if _, err := r.Snapshot(ctx); err != nil {
		t.Errorf("read-only Snapshot: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Errorf("a read-only store changed the folder: %v -> %v", before, after)
	}

	w := reopen(t, path)
	mustReceive(t, w, msg("w1", "f", 31, 5), Accepted)
	before = listDir(t, dir)
	r = reopen(t, path, WithReadOnly())
	if got := total(t, r, "f"); got != 470 {
		t.Errorf("read-only Total beside a writer = %d, want 470", got)
	}
	mustReceive(t, w, msg("w2", "f", 32, 5), Accepted)
	if got := total(t, r, "f"); got != 475 {
		t.Errorf("read-only Total after the writer's next commit = %d, want 475", got)
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Errorf("a read-only store beside a writer changed the folder: %v -> %v", before, after)
	}
}
