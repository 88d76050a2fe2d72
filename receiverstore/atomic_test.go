package receiverstore

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// docs/contract.md §2.7/§3: the receiver's accept is atomic. A trigger makes the total
// update fail after the receipt insert; the receipt must be undone too, and
// the SQL error returned, wrapped, not swallowed.
func TestAccept_FailedTotalUpdateUndoesReceipt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, trigger string
		setup         []Message
		probe         Message
	}{
		{
			name:    "update of an existing flow",
			trigger: `CREATE TRIGGER boom BEFORE UPDATE OF total ON flows BEGIN SELECT RAISE(ABORT, 'injected total failure'); END`,
			setup:   []Message{msg("e1", "f", 1, 5)},
			probe:   msg("e2", "f", 2, 7),
		},
		{
			name:    "first message of a flow",
			trigger: `CREATE TRIGGER boom BEFORE INSERT ON flows BEGIN SELECT RAISE(ABORT, 'injected total failure'); END`,
			probe:   msg("e1", "f", 1, 7),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, _ := open(t)
			for _, m := range c.setup {
				mustReceive(t, s, m, Accepted)
			}
			if _, err := s.db.Exec(c.trigger); err != nil {
				t.Fatal(err)
			}
			before := snap(t, s)
			out, err := s.Receive(context.Background(), c.probe)
			if err == nil || !strings.Contains(err.Error(), "injected total failure") {
				t.Fatalf("Receive() = %q, %v; want the trigger's error", out, err)
			}
			for _, sentinel := range []error{ErrInvalid, ErrInvalidBody} {
				if errors.Is(err, sentinel) {
					t.Errorf("Receive() error %v matches %v; an SQL error is not bad input", err, sentinel)
				}
			}
			assertUnchanged(t, s, before, "a failed accept")

			if _, err := s.db.Exec(`DROP TRIGGER boom`); err != nil {
				t.Fatal(err)
			}
			mustReceive(t, s, c.probe, Accepted)
		})
	}
}

// The hook runs exactly once per accepted message, inside the accept
// transaction: another connection does not see the receipt or the total yet.
func TestHook_RunsInsideAcceptBeforeCommit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r.db")
	observer := reopen(t, path) // a second Store: its reads see only committed data
	type seen struct {
		point HookPoint
		total int64
		next  int64
	}
	var calls []seen
	s := reopen(t, path, WithMaxDelta(100), WithHook(func(p HookPoint) {
		tot, err := observer.Total(context.Background(), "f")
		if err != nil {
			t.Errorf("observer Total() error = %v", err)
		}
		next, err := observer.NextExpected(context.Background(), "f")
		if err != nil {
			t.Errorf("observer NextExpected() error = %v", err)
		}
		calls = append(calls, seen{p, tot, next})
	}))
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	mustReceive(t, s, msg("e1", "f", 1, 5), Duplicate)
	mustReceive(t, s, msg("e1", "f", 1, 6), Conflict)
	mustReceive(t, s, msg("e3", "f", 3, 5), Gap)
	mustReceive(t, s, msg("e2", "f", 2, 500), UnsupportedDelta)
	mustReceive(t, s, msg("e2", "f", 2, 7), Accepted)

	want := []seen{
		{HookAcceptBeforeCommit, 0, 1}, // first accept not yet visible
		{HookAcceptBeforeCommit, 5, 2}, // second: only the first is visible
	}
	if len(calls) != len(want) {
		t.Fatalf("hook calls = %+v, want %+v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("hook call %d = %+v, want %+v", i, calls[i], want[i])
		}
	}
	if got := total(t, observer, "f"); got != 12 {
		t.Errorf("Total(f) after commit = %d, want 12", got)
	}
}

const crashEnv = "RECEIVERSTORE_TEST_CRASH_DB"

// TestHelperProcess is not a test: run as a child with crashEnv set, it
// receives one message with a hook that exits with status 73 before commit.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper process for TestHook_CrashBeforeCommitLeavesNothing")
	}
	s, err := Open(path, WithHook(func(HookPoint) { os.Exit(73) }))
	if err != nil {
		os.Exit(2)
	}
	_, _ = s.Receive(context.Background(), msg("e2", "f", 2, 7))
	os.Exit(3) // the hook did not fire
}

// A real process that dies at HookAcceptBeforeCommit leaves neither the
// receipt nor the total behind.
func TestHook_CrashBeforeCommitLeavesNothing(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	before := snap(t, s)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 73 {
		t.Fatalf("child exit = %v, want status 73; output:\n%s", err, out)
	}

	s2 := reopen(t, path)
	assertUnchanged(t, s2, before, "a crash before commit")
	var check string
	if err := s2.db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v; want ok", check, err)
	}
	mustReceive(t, s2, msg("e2", "f", 2, 7), Accepted)
}
