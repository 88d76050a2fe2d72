//go:build linux

package dbfile

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"modernc.org/sqlite"
)

// enospcEnv makes the test binary a child that mounts a small file system
// at the folder it names and fills a database on it.
const enospcEnv = "FAIRRELAY_DBFILE_ENOSPC"

// TestENOSPCChild is the child's body; it does nothing in a normal run. It
// runs in its own user and mount namespace (unshare), where it may mount.
func TestENOSPCChild(t *testing.T) {
	dir := os.Getenv(enospcEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestIsFullOnAFullFileSystem")
	}
	fail := func(what string, err error) {
		fmt.Printf("child: %s: %v\n", what, err)
		os.Exit(2)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		fmt.Println("child: cannot mount:", err)
		os.Exit(3)
	}
	path := filepath.Join(dir, "x.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		fail("open", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (x BLOB)"); err != nil {
		fail("create", err)
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 64<<10), 0o644); err != nil {
		fail("filler", err)
	}
	acked := 0
	for ; acked < 1000; acked++ {
		if _, err = db.Exec("INSERT INTO t VALUES (randomblob(2000))"); err != nil {
			break
		}
	}
	var se *sqlite.Error
	code := 0
	if errors.As(err, &se) {
		code = se.Code()
	}
	fmt.Printf("full=%v code=%d acked=%d err=%v\n", IsFull(err, path), code, acked, err)
	if err := os.Remove(filler); err != nil {
		fail("remove filler", err)
	}
	_, err = db.Exec("INSERT INTO t VALUES (randomblob(2000))")
	fmt.Printf("after space is back: err=%v\n", err)
	var n int
	var check string
	db.QueryRow("SELECT count(*) FROM t").Scan(&n)
	db.QueryRow("PRAGMA integrity_check").Scan(&check)
	fmt.Printf("rows=%d integrity=%s\n", n, check)
	os.Exit(0)
}

// On a real full file system (a 256 KiB tmpfs, mounted in a user and mount
// namespace of a child process), SQLite's error is SQLITE_FULL and IsFull
// says so; the rows committed before stay, the file passes integrity_check,
// and writes succeed once space is freed. Skipped where the machine does not
// allow unprivileged namespaces or mounts.
func TestIsFullOnAFullFileSystem(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux) to mount a small file system")
	}
	dir := t.TempDir()
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--mount", os.Args[0], "-test.run=^TestENOSPCChild$")
	cmd.Env = append(os.Environ(), enospcEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 || err != nil && strings.Contains(string(out), "unshare failed") {
		t.Skipf("this machine allows no small file system for the test: %s", out)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
	text := string(out)
	var acked, rows int
	for _, f := range []struct {
		key string
		v   *int
	}{{"acked=", &acked}, {"rows=", &rows}} {
		i := strings.Index(text, f.key)
		if i < 0 {
			t.Fatalf("child output lacks %s", f.key)
		}
		fmt.Sscanf(text[i:], f.key+"%d", f.v)
	}
	for _, want := range []string{"full=true code=13 ", "after space is back: err=<nil>", "integrity=ok"} {
		if !strings.Contains(text, want) {
			t.Errorf("child output lacks %q", want)
		}
	}
	if acked == 0 || rows != acked+1 {
		t.Errorf("rows = %d after %d acknowledged inserts and one after the space came back; want %d", rows, acked, acked+1)
	}
}
