//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package writerlock

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The lock files take the database file's permission bits and group, so a
// service user and an operator in that group share them.
func TestLockFilesShareTheDatabasesGroupAndMode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	if err := os.WriteFile(path, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o660); err != nil { // past the umask
		t.Fatal(err)
	}
	gid := os.Getegid()
	if os.Geteuid() == 0 {
		gid = 4242 // root may give any group; a group nobody is in shows the copy
	} else if gs, err := os.Getgroups(); err == nil && len(gs) > 1 {
		gid = gs[len(gs)-1]
	}
	if err := os.Chown(path, -1, gid); err != nil {
		t.Fatalf("chown the database to group %d: %v", gid, err)
	}
	open(t, path, time.Second)
	for _, name := range []string{path + "-writer", path + "-writer-gate"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o660 {
			t.Errorf("%s mode = %v, want -rw-rw----", filepath.Base(name), fi.Mode().Perm())
		}
		if got := fi.Sys().(*syscall.Stat_t).Gid; int(got) != gid {
			t.Errorf("%s group = %d, want the database's %d", filepath.Base(name), got, gid)
		}
	}
}

// Remove deletes the lock files its Open created and keeps the ones that
// were there before.
func TestRemoveDeletesOnlyWhatOpenCreated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "queue.db")
	l, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path + "-writer", path + "-writer-gate"} {
		if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Remove, %s: %v; want it gone", filepath.Base(name), err)
		}
	}
	if err := os.WriteFile(path+"-writer", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-writer"); err != nil {
		t.Errorf("Remove deleted a lock file that existed before Open: %v", err)
	}
	if _, err := os.Stat(path + "-writer-gate"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove, -writer-gate: %v; want it gone", err)
	}
}
