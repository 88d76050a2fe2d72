package dbfile

import (
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	_ "modernc.org/sqlite"
)

// newDB makes a closed WAL database at dir/name with n rows in table t.
func newDB(t *testing.T, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "x.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (x BLOB); PRAGMA user_version = 7"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := db.Exec("INSERT INTO t VALUES (randomblob(3000))"); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// files lists the names in dir.
func files(t *testing.T, dir string) []string {
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

func TestCheckRefusesWrongFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := newDB(t, dir, 20)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		path  string
		write bool
		kind  error
		cause error
	}{
		{"text file", write("text.db", []byte("hello, this is not a database\n")), true, ErrNotDatabase, nil},
		{"short text", write("short.db", []byte("hi")), true, ErrNotDatabase, nil},
		{"header only", write("head.db", data[:60]), true, ErrTruncated, nil},
		{"cut mid-page", write("mid.db", data[:len(data)-100]), true, ErrTruncated, nil},
		{"cut at a page", write("page.db", data[:len(data)-4096]), true, ErrTruncated, nil},
		{"bad page size", write("ps.db", append(append([]byte(magic), 0, 3), data[18:]...)), true, ErrNotDatabase, nil},
		{"directory", filepath.Join(dir, "adir"), true, ErrPath, syscall.EISDIR},
		{"missing folder", filepath.Join(dir, "nope", "q.db"), true, ErrPath, fs.ErrNotExist},
		{"missing file, read", filepath.Join(dir, "none.db"), false, ErrPath, fs.ErrNotExist},
	} {
		before := files(t, dir)
		_, err := Check(c.path, c.write)
		if !errors.Is(err, c.kind) || (c.cause != nil && !errors.Is(err, c.cause)) {
			t.Errorf("%s: Check error = %v, want %v (%v)", c.name, err, c.kind, c.cause)
		}
		if after := files(t, dir); !slices.Equal(before, after) {
			t.Errorf("%s: Check changed the folder: %v -> %v", c.name, before, after)
		}
	}
	// A file whose -wal is beside it may be mid-checkpoint: shorter than its
	// header for a moment (the soak met this with a live writer), so the
	// size checks are left to SQLite then.
	live := write("live.db", data[:len(data)-4096])
	if err := os.WriteFile(live+"-wal", []byte("wal frames"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(live, true); err != nil {
		t.Errorf("Check(a short file with a -wal beside it) = %v, want no error", err)
	}
	info, err := Check(good, true)
	if err != nil || info.UserVersion != 7 || !info.WAL || info.PageSize != 4096 {
		t.Errorf("Check(good) = %+v, %v; want user_version 7, WAL, 4096-byte pages", info, err)
	}
	if info, err := Check(filepath.Join(dir, "new.db"), true); err != nil || info != (Info{}) {
		t.Errorf("Check(new file, write) = %+v, %v; want a zero Info", info, err)
	}
}

// OpenReadOnly of a closed WAL database creates no file, reads every row,
// and leaves the folder as it found it.
func TestOpenReadOnlyCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := newDB(t, dir, 5)
	before := files(t, dir)
	ro, err := OpenReadOnly(path, "_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	if !ro.Immutable {
		t.Errorf("OpenReadOnly of a closed database: Immutable = false, want true")
	}
	db, err := sql.Open("sqlite", ro.URI)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 5 {
		t.Errorf("count = %d, %v; want 5", n, err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES (1)"); err == nil {
		t.Errorf("INSERT through a read-only URI succeeded")
	}
	if err := errors.Join(db.Close(), ro.Close()); err != nil {
		t.Fatal(err)
	}
	if after := files(t, dir); !slices.Equal(before, after) {
		t.Errorf("read-only open changed the folder: %v -> %v", before, after)
	}
}

// With a writer holding the database open (the -wal and -shm exist), a
// read-only open sees the writer's latest commit and creates nothing; a
// writer that closes while the reader is open cannot checkpoint into the
// file under it (the guard), so the reader's count stays right.
func TestOpenReadOnlyBesideAWriter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := newDB(t, dir, 3)
	w, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Exec("INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	if !slices.Contains(before, "x.db-wal") || !slices.Contains(before, "x.db-shm") {
		t.Fatalf("an open writer left no -wal and -shm: %v", before)
	}
	ro, err := OpenReadOnly(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.Immutable {
		t.Errorf("OpenReadOnly beside a writer: Immutable = true, want false")
	}
	db, err := sql.Open("sqlite", ro.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func() int {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 4 {
		t.Errorf("count beside a writer = %d, want 4 (the writer's last commit)", n)
	}
	if _, err := w.Exec("INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 5 {
		t.Errorf("count after another commit = %d, want 5", n)
	}
	if after := files(t, dir); !slices.Equal(before, after) {
		t.Errorf("read-only open changed the folder: %v -> %v", before, after)
	}
}

// The guard keeps a closing writer from checkpointing into the file while an
// immutable reader reads it: the writer's WAL stays, the file is unchanged.
func TestGuardStopsACloseCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := newDB(t, dir, 3)
	ro, err := OpenReadOnly(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.Immutable {
		t.Fatalf("Immutable = false, want true")
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec("INSERT INTO t VALUES (randomblob(5000))"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("a writer's close rewrote the database file under a guarded reader")
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("the writer's -wal is gone under a guarded reader: %v", err)
	}
}

func TestOpenReadOnlyRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := newDB(t, dir, 1)
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(empty, ""); !errors.Is(err, ErrNotDatabase) {
		t.Errorf("OpenReadOnly(empty file) error = %v, want ErrNotDatabase", err)
	}
	if _, err := OpenReadOnly(filepath.Join(dir, "none.db"), ""); !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrPath) {
		t.Errorf("OpenReadOnly(missing) error = %v, want ErrPath and fs.ErrNotExist", err)
	}
	if err := os.WriteFile(path+"-wal", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(path, ""); !errors.Is(err, ErrNeedsWriter) {
		t.Errorf("OpenReadOnly(-wal without -shm) error = %v, want ErrNeedsWriter", err)
	}
}

func TestIsFull(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{syscall.ENOSPC, true},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EFBIG}, true},
		{syscall.EIO, false},
		{errors.New("disk I/O error (778)"), false},
	} {
		if got := IsFull(c.err, filepath.Join(t.TempDir(), "x.db")); got != c.want {
			t.Errorf("IsFull(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
