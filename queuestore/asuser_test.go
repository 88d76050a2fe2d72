//go:build linux

package queuestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// asUserEnv makes the test binary a child that opens the queue at the
// path it names, as whatever user it runs as.
const asUserEnv = "FAIRRELAY_QUEUE_ASUSER"

// nobody is the unprivileged user the test runs its child as.
const nobody = "65534"

// runAsNobody runs this test binary's test run as user and group 65534 with
// no supplementary groups, through setpriv, and returns its output. It skips
// the test where that cannot be done: not root, or no setpriv.
func runAsNobody(t *testing.T, run string, env ...string) ([]byte, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a child as another user (uid 65534)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux) to run a child as another user")
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil { // the binary must be reachable
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "test.bin")
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
	cmd := exec.Command(setpriv, "--reuid="+nobody, "--regid="+nobody, "--clear-groups", bin, "-test.run=^"+run+"$")
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// TestAsUserChild is the child's body; it does nothing in a normal run. It
// prints one line per check.
func TestAsUserChild(t *testing.T) {
	path := os.Getenv(asUserEnv)
	if path == "" {
		t.Skip("runs only as the child of TestOpen_AsAnotherUser")
	}
	_, err := Open(path)
	fmt.Printf("read-write: permission=%v open=%v err=%v\n", errors.Is(err, fs.ErrPermission), errors.Is(err, ErrOpen), err)
	s, err := Open(path, WithReadOnly())
	if err != nil {
		fmt.Println("read-only open:", err)
		os.Exit(1)
	}
	st, err := s.Stats(context.Background())
	fmt.Printf("read-only events=%d err=%v\n", st.Events.Pending+st.Events.Inflight, err)
	if err := s.Close(); err != nil {
		fmt.Println("close:", err)
	}
	os.Exit(0)
}

// A user who may read a queue but not write it, nor its folder (the
// operator of a service's database), gets a clear ErrOpen with the
// permission cause from a read-write Open, reads it with WithReadOnly, and
// leaves no file behind in either case.
func TestOpen_AsAnotherUser(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, _ := closedQueue(t, dir)
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	before := listDir(t, dir)
	out, err := runAsNobody(t, "TestAsUserChild", asUserEnv+"="+path)
	if err != nil {
		t.Fatalf("child as uid %s: %v\n%s", nobody, err, out)
	}
	t.Logf("child:\n%s", out)
	for _, want := range []string{"read-write: permission=true open=true", "read-only events=40 err=<nil>"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Errorf("another user's opens changed the folder: %v -> %v", before, after)
	}

	// The file and its lock files writable, the folder not: SQLite could
	// not create the -wal and -shm, so the read-write Open is the same
	// clear ErrOpen, before anything is written.
	for _, name := range []string{"", "-writer", "-writer-gate"} {
		if err := os.Chmod(path+name, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	out, err = runAsNobody(t, "TestAsUserChild", asUserEnv+"="+path)
	if err != nil {
		t.Fatalf("child as uid %s: %v\n%s", nobody, err, out)
	}
	if want := "read-write: permission=true open=true"; !strings.Contains(string(out), want) {
		t.Errorf("with the file writable and the folder not, child output lacks %q:\n%s", want, out)
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Errorf("another user's opens changed the folder: %v -> %v", before, after)
	}
}
