//go:build linux

package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fairrelay/fairrelay/queuestore"
)

// The users of TestSharedQueueAsAnotherUser: a service user and an
// operator, both in one group (docs/operations.md, "Permissions").
const (
	svcUser     = "frsvc"
	opsUser     = "frops"
	sharedGroup = "frshare"
)

// ensureUsers creates the service user, the operator and their shared
// group where they do not exist. It skips the test where it cannot: not
// root, or no useradd/groupadd/setpriv.
func ensureUsers(t *testing.T) (svc, ops *user.User, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a service user and an operator (useradd) and to run relayctl as them")
	}
	for _, tool := range []string{"useradd", "groupadd", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s to run relayctl as another user", tool)
		}
	}
	if _, err := user.LookupGroup(sharedGroup); err != nil {
		if out, err := exec.Command("groupadd", "-f", sharedGroup).CombinedOutput(); err != nil {
			t.Fatalf("groupadd %s: %v\n%s", sharedGroup, err, out)
		}
	}
	for _, name := range []string{svcUser, opsUser} {
		if _, err := user.Lookup(name); err != nil {
			out, err := exec.Command("useradd", "--no-create-home", "--system", "--shell", "/usr/sbin/nologin", "--groups", sharedGroup, name).CombinedOutput()
			if err != nil && !strings.Contains(string(out), "already exists") {
				t.Fatalf("useradd %s: %v\n%s", name, err, out)
			}
		}
	}
	var err error
	if svc, err = user.Lookup(svcUser); err != nil {
		t.Fatal(err)
	}
	if ops, err = user.Lookup(opsUser); err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroup(sharedGroup)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ = strconv.Atoi(g.Gid)
	for _, u := range []*user.User{svc, ops} {
		gids, err := u.GroupIds()
		if err != nil || !slices.Contains(gids, g.Gid) {
			t.Fatalf("user %s is not in group %s (%v, %v)", u.Username, sharedGroup, gids, err)
		}
	}
	return svc, ops, gid
}

// relayctlBinary copies this test binary, which runs relayctl's main when
// called relayctl (TestMain), to a folder every user can read.
func relayctlBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	openUp(t, dir)
	bin := filepath.Join(dir, "relayctl")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// openUp lets every user through dir and the temporary folders above it.
func openUp(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// as runs relayctl as the named user with that user's groups and returns
// the exit status and the combined output.
func as(t *testing.T, bin, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("setpriv", append([]string{"--reuid=" + name, "--regid=" + name, "--init-groups", bin}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("run relayctl as %s: %v", name, err)
	}
	return 0, string(out)
}

// fileGroupMode returns a file's group and permission bits.
func fileGroupMode(t *testing.T, path string) (int, os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Gid), fi.Mode().Perm()
}

// The permission model of docs/operations.md, tried with real users: a
// service user owns the queue; an operator in the queue's group reads it
// with every read command, in a folder the operator cannot write, while the
// service is stopped and while it holds the queue open, and creates nothing;
// and where the group may write, whoever opens the queue first leaves lock
// files the other can use.
func TestSharedQueueAsAnotherUser(t *testing.T) {
	svc, _, gid := ensureUsers(t)
	bin := relayctlBinary(t)
	svcUID, _ := strconv.Atoi(svc.Uid)
	root := t.TempDir()
	openUp(t, root)

	// 1. The operator may read, not write: folder 2750 frsvc:frshare.
	qdir := filepath.Join(root, "readonly")
	if err := os.Mkdir(qdir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(qdir, svcUID, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(qdir, os.ModeSetgid|0o750); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(qdir, "queue.db")
	if code, out := as(t, bin, svcUser, "--queue", q, "enqueue", "--id", "e1", "--flow", "f", "--body", `{"delta":1}`, "--now", "1"); code != 0 {
		t.Fatalf("service enqueue: exit %d\n%s", code, out)
	}
	before := names(t, qdir)
	for _, args := range [][]string{{"status"}, {"flows"}, {"events", "--flow", "f"}, {"quarantined"}, {"audit"}, {"snapshot"}} {
		code, out := as(t, bin, opsUser, append([]string{"--queue", q, "--receiver", ""}, args...)...)
		if code != 0 {
			t.Errorf("operator relayctl %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if code, out := as(t, bin, opsUser, "--queue", q, "events", "--flow", "f"); code != 0 || !strings.Contains(out, "e1") {
		t.Errorf("operator events: exit %d, output lacks e1:\n%s", code, out)
	}
	code, out := as(t, bin, opsUser, "--queue", q, "enqueue", "--id", "x", "--flow", "f", "--body", "x")
	if code != exitFail || !strings.Contains(out, "permission denied") || !strings.Contains(out, "cannot open the database file") {
		t.Errorf("operator enqueue without write permission: exit %d, want 1 with a permission message:\n%s", code, out)
	}
	if after := names(t, qdir); !slices.Equal(before, after) {
		t.Errorf("the operator's commands changed the folder: %v -> %v", before, after)
	}

	// While the service holds the queue open (its -wal and -shm exist), the
	// operator sees its latest commit and still creates nothing.
	s, err := queuestore.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(context.Background(), queuestore.Event{ID: "e2", Flow: "f", Body: []byte(`{"delta":2}`)}, 1); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"", "-wal", "-shm"} {
		if g, _ := fileGroupMode(t, q+side); g != gid {
			t.Errorf("queue.db%s group = %d, want the database's %d", side, g, gid)
		}
	}
	before = names(t, qdir)
	if code, out := as(t, bin, opsUser, "--queue", q, "events", "--flow", "f"); code != 0 || !strings.Contains(out, "e2") {
		t.Errorf("operator events beside the running service: exit %d, output lacks e2:\n%s", code, out)
	}
	if after := names(t, qdir); !slices.Equal(before, after) {
		t.Errorf("the operator's read beside the service changed the folder: %v -> %v", before, after)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// 2. The group may write: folder 0770 (no set-group-ID bit), database
	// 0660 in the shared group. The operator opens it first and makes the
	// lock files; the service can still write.
	wdir := filepath.Join(root, "shared")
	if err := os.Mkdir(wdir, 0o770); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(wdir, svcUID, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wdir, 0o770); err != nil { // past the umask
		t.Fatal(err)
	}
	w := filepath.Join(wdir, "queue.db")
	if code, out := as(t, bin, svcUser, "--queue", w, "enqueue", "--id", "e1", "--flow", "f", "--body", "x", "--now", "1"); code != 0 {
		t.Fatalf("service enqueue: exit %d\n%s", code, out)
	}
	if err := os.Chown(w, svcUID, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(w, 0o660); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"-writer", "-writer-gate"} {
		if err := os.Remove(w + side); err != nil {
			t.Fatal(err)
		}
	}
	if code, out := as(t, bin, opsUser, "--queue", w, "enqueue", "--id", "e2", "--flow", "f", "--body", "x"); code != 0 {
		t.Fatalf("operator enqueue in the shared folder: exit %d\n%s", code, out)
	}
	for _, side := range []string{"-writer", "-writer-gate"} {
		g, m := fileGroupMode(t, w+side)
		if g != gid || m != 0o660 {
			t.Errorf("queue.db%s made by the operator: group %d mode %v, want the database's %d and -rw-rw----", side, g, m, gid)
		}
	}
	if code, out := as(t, bin, svcUser, "--queue", w, "enqueue", "--id", "e3", "--flow", "f", "--body", "x"); code != 0 {
		t.Errorf("service enqueue after the operator's: exit %d\n%s", code, out)
	}
}
