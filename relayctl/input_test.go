package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// names lists the names in dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// runStdin is runIn with stdin.
func runStdin(t *testing.T, dir string, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"--queue", filepath.Join(dir, "queue.db"), "--receiver", filepath.Join(dir, "receiver.db")}, args...)
	code := run(full, bytes.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// storedBody reads event id's body from the queue in dir, read-only.
func storedBody(t *testing.T, dir, id string) []byte {
	t.Helper()
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	e, err := q.Event(context.Background(), id)
	if err != nil {
		t.Fatalf("Event(%s): %v", id, err)
	}
	return e.Body
}

// --body-file enqueues a file's bytes exactly (binary, newlines, the
// queue's largest size), from a path or from standard input ("-"); a body
// too large, an empty one, a missing file, or an --at or --in that is no
// time in any clock mode is refused with a clear message before the queue
// is opened: no queue file is created.
func TestEnqueueBodyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := make([]byte, 1<<20) // 1 MB: too long for an argument list, and for the queue
	rand.Read(big)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bigPath := write("big.bin", big)
	write("empty.bin", nil)

	for _, c := range []struct {
		name  string
		args  []string
		stdin []byte
		code  int
		want  string
	}{
		{"1 MB file", []string{"enqueue", "--id", "b", "--flow", "f", "--body-file", bigPath}, nil, exitFail,
			"relayctl enqueue: body file " + bigPath + ": longer than 65536 bytes, the largest body the queue takes; nothing changed"},
		{"1 MB on stdin", []string{"enqueue", "--id", "b", "--flow", "f", "--body-file", "-"}, big, exitFail,
			"relayctl enqueue: body file stdin: longer than 65536 bytes"},
		{"empty file", []string{"enqueue", "--id", "b", "--flow", "f", "--body-file", filepath.Join(dir, "empty.bin")}, nil, exitFail,
			"is empty: a body has 1..65536 bytes; nothing changed"},
		{"empty stdin", []string{"enqueue", "--id", "b", "--flow", "f", "--body-file", "-"}, nil, exitFail,
			"relayctl enqueue: body file stdin is empty"},
		{"missing file", []string{"enqueue", "--id", "b", "--flow", "f", "--body-file", filepath.Join(dir, "nope.bin")}, nil, exitFail,
			"nope.bin: no such file or directory; nothing changed"},
		{"both bodies", []string{"enqueue", "--id", "b", "--flow", "f", "--body", "x", "--body-file", bigPath}, nil, exitUsage,
			"--body and --body-file both give the body: use one"},
		{"no body", []string{"enqueue", "--id", "b", "--flow", "f"}, nil, exitUsage,
			"--body or --body-file is required"},
		{"with --file", []string{"enqueue", "--file", "-", "--body-file", bigPath}, nil, exitUsage,
			"--body-file goes with a single event, not with --file"},
		{"a mistyped --at", []string{"enqueue", "--id", "b", "--flow", "f", "--body", "x", "--at", "tomorrow"}, nil, exitUsage,
			"--at tomorrow: want a tick number such as 120, or an RFC 3339 time"},
		{"a mistyped --in", []string{"enqueue", "--id", "b", "--flow", "f", "--body", "x", "--in", "soon"}, nil, exitUsage,
			"--in soon: want a tick count such as 5, or a Go duration"},
	} {
		before := names(t, dir)
		code, _, errs := runStdin(t, dir, c.stdin, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, code, errs, c.code, c.want)
		}
		if after := names(t, dir); !slices.Equal(before, after) {
			t.Errorf("%s: the refused enqueue changed the folder: %v -> %v", c.name, before, after)
		}
	}

	exact := append(big[:queuestore.MaxBodyLen-3:queuestore.MaxBodyLen-3], '\n', 0, '\n')
	write("exact.bin", exact)
	mustRun(t, dir, "enqueue", "--id", "file", "--flow", "f", "--body-file", filepath.Join(dir, "exact.bin"))
	if got := storedBody(t, dir, "file"); !bytes.Equal(got, exact) {
		t.Errorf("--body-file stored %d bytes, want the file's %d exactly", len(got), len(exact))
	}
	in := []byte("{\"delta\": 4}\n\x00tail")
	if code, out, errs := runStdin(t, dir, in, "enqueue", "--id", "stdin", "--flow", "f", "--body-file", "-"); code != exitOK {
		t.Fatalf("--body-file -: exit %d, %s", code, errs)
	} else if !strings.Contains(out, "enqueued stdin: flow f, seq 2") {
		t.Errorf("--body-file - stdout = %q", out)
	}
	if got := storedBody(t, dir, "stdin"); !bytes.Equal(got, in) {
		t.Errorf("--body-file - stored %q, want %q", got, in)
	}
	// The same file again is a duplicate.
	if out := mustRun(t, dir, "enqueue", "--id", "file", "--flow", "f", "--body-file", filepath.Join(dir, "exact.bin")); !strings.HasPrefix(out, "duplicate file:") {
		t.Errorf("the same --body-file again: %q, want a duplicate", out)
	}
}

// Every read command opens the stores read-only: after a run of each, the
// folder holds exactly the files it held before (no -wal, -shm or lock file
// appears), and the files are byte for byte the same.
func TestReadCommandsCreateNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustRun(t, dir, "enqueue", "--id", "e1", "--flow", "f", "--body", `{"delta":1}`, "--now", "1")
	// A window, so that a dry run reads what it would prune (the policy
	// row of the audit).
	mustRun(t, dir, "policy", "set", "--retention", "1", "--reason", "a window", "--now", "2")
	rs, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Receive(context.Background(), receiverstore.Message{ID: "e1", Flow: "f", Seq: 1, Body: []byte(`{"delta":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := rs.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"queue.db-writer", "queue.db-writer-gate", "receiver.db-writer", "receiver.db-writer-gate"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	before := names(t, dir)
	content := func() map[string]string {
		m := map[string]string{}
		for _, n := range names(t, dir) {
			b, _ := os.ReadFile(filepath.Join(dir, n))
			m[n] = string(b)
		}
		return m
	}
	bytesBefore := content()
	for _, args := range [][]string{
		{"status"}, {"flows"}, {"events", "--flow", "f"}, {"quarantined"}, {"audit"},
		{"receiver", "totals"}, {"receiver", "conflicts"}, {"snapshot"},
		{"status", "--json"}, {"flows", "--json"}, {"event", "e1"}, {"policy"}, {"policy", "--json"},
		{"prune", "--dry-run", "--now", "10"}, {"prune", "--dry-run", "--json", "--now", "10"}, {"prune", "receiver", "--dry-run", "--retention", "1h"},
		{"prune", "--dry-run", "--clock", "wall"}, {"redrive", "--all", "--dry-run"}, {"destinations"},
	} {
		out := mustRun(t, dir, args...)
		if slices.Equal(args, []string{"prune", "--dry-run", "--now", "10"}) && !strings.Contains(out, "1 audit row") {
			t.Errorf("relayctl %s: %q, want the policy's audit row counted", strings.Join(args, " "), out)
		}
		if after := names(t, dir); !slices.Equal(before, after) {
			t.Errorf("relayctl %s changed the folder: %v -> %v", strings.Join(args, " "), before, after)
		}
	}
	for n, b := range content() {
		if bytesBefore[n] != b {
			t.Errorf("a read command changed %s", n)
		}
	}
}
