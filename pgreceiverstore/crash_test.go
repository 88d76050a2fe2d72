package pgreceiverstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"testing"

	"github.com/fairrelay/fairrelay/receiver"
)

const crashEnv = "PGRECEIVERSTORE_TEST_CRASH" // "url schema" of the store a child crashes in

func TestMain(m *testing.M) {
	if v := os.Getenv(crashEnv); v != "" {
		var url, schema string
		if _, err := fmt.Sscan(v, &url, &schema); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(crashChild(url, schema))
	}
	os.Exit(m.Run())
}

// crashChild accepts one message with a hook that exits with status 73
// inside the accept transaction, before its commit.
func crashChild(url, schema string) int {
	ctx := context.Background()
	s, err := Open(ctx, url, WithSchema(schema), WithHook(func(receiver.HookPoint) { os.Exit(73) }))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := s.Receive(ctx, msg("e2", "f", 2, 4)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0 // the hook did not fire
}

// A process killed with status 73 inside the accept transaction leaves
// nothing of it: the server rolls the transaction back (no receipt, no
// total, no next-expected), and the same message is accepted afterwards.
func TestHook_CrashBeforeCommitLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s, url, schema := open(t)
	if o, err := s.Receive(ctx, msg("e1", "f", 1, 3)); err != nil || o != receiver.Accepted {
		t.Fatal(o, err)
	}
	before, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+url+" "+schema)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 73 {
		t.Fatalf("child exit = %v (%v), want status 73; output: %s", cmd.ProcessState, err, out)
	}
	after, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("the crashed accept left something:\nbefore %+v\nafter  %+v", before, after)
	}
	if o, err := s.Receive(ctx, msg("e2", "f", 2, 4)); err != nil || o != receiver.Accepted {
		t.Fatalf("after the crash: %v, %v; want accepted", o, err)
	}
}
