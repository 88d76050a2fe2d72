package crashpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv switches the test binary into the child program below.
const childEnv = "FAIRRELAY_CRASHPOINT_TEST_CHILD"

// TestMain runs the child program when the test binary is re-executed by
// runChild; otherwise it runs the tests. The parent never arms a trap.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// child arms itself from the environment and reaches every point in order,
// printing each one just before it is hit. It exits 0 when it survives them
// all and 2 when arming fails.
func child() int {
	trap, err := FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, ErrUnknownPoint) {
			fmt.Println("unknown point refused")
		}
		return 2
	}
	for _, p := range Points() {
		fmt.Println(p)
		trap.Hit(p)
	}
	fmt.Println("survived")
	return 0
}

// runChild re-executes the test binary as the child program with the given
// value of EnvVar, and returns its exit code and standard output.
func runChild(t *testing.T, armed string) (int, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(withoutEnv(os.Environ(), EnvVar), childEnv+"=1", EnvVar+"="+armed)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String()
	default:
		t.Fatalf("child %q: %v (stderr %q)", armed, err, stderr.String())
		return -1, ""
	}
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// TestArmedChildExitsAtItsPoint proves docs/contract.md §4: a child armed at a point is a
// real process that exits with status 73 exactly there — after every earlier
// point and before any later one.
func TestArmedChildExitsAtItsPoint(t *testing.T) {
	t.Parallel()
	for i, p := range Points() {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			code, out := runChild(t, string(p))
			if code != ExitCode {
				t.Fatalf("child armed at %s exit code = %d, want %d (stdout %q)", p, code, ExitCode, out)
			}
			var want strings.Builder
			for _, q := range Points()[:i+1] {
				want.WriteString(string(q) + "\n")
			}
			if out != want.String() {
				t.Fatalf("child armed at %s printed %q, want %q (stops at its own point)", p, out, want.String())
			}
		})
	}
}

// TestUnarmedChildSurvivesEveryPoint proves that an unarmed process passes
// every point (docs/contract.md §4: armed in a child only).
func TestUnarmedChildSurvivesEveryPoint(t *testing.T) {
	t.Parallel()
	code, out := runChild(t, "")
	if code != 0 {
		t.Fatalf("unarmed child exit code = %d, want 0 (stdout %q)", code, out)
	}
	if !strings.HasSuffix(out, "survived\n") {
		t.Fatalf("unarmed child stdout = %q, want it to end with survived", out)
	}
}

// TestChildRefusesUnknownPoint proves that a misspelt point is an error at
// arming, not a silent no-op: the child never reaches any point.
func TestChildRefusesUnknownPoint(t *testing.T) {
	t.Parallel()
	code, out := runChild(t, "claim-comitted")
	if code != 2 {
		t.Fatalf("child armed at an unknown point exit code = %d, want 2 (stdout %q)", code, out)
	}
	if out != "unknown point refused\n" {
		t.Fatalf("child armed at an unknown point printed %q, want only the refusal", out)
	}
}

func TestUnknownNamesAreRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"nope", "CLAIM-COMMITTED", " claim-committed", "queue.claim.committed"} {
		if _, err := Parse(name); !errors.Is(err, ErrUnknownPoint) {
			t.Errorf("Parse(%q) error = %v, want ErrUnknownPoint", name, err)
		}
		if _, err := Arm(Point(name)); !errors.Is(err, ErrUnknownPoint) {
			t.Errorf("Arm(%q) error = %v, want ErrUnknownPoint", name, err)
		}
		if _, err := Env(Point(name)); !errors.Is(err, ErrUnknownPoint) {
			t.Errorf("Env(%q) error = %v, want ErrUnknownPoint", name, err)
		}
	}
}

// TestFromEnv cannot run in parallel: it sets the process environment. It
// only arms a Trap value and never hits the armed point.
func TestFromEnv(t *testing.T) {
	t.Setenv(EnvVar, "")
	if tr, err := FromEnv(); err != nil || tr != (Trap{}) {
		t.Fatalf("FromEnv() with %s empty = %v, %v; want unarmed, nil", EnvVar, tr, err)
	}
	t.Setenv(EnvVar, string(SettleBeforeCommit))
	tr, err := FromEnv()
	if err != nil {
		t.Fatalf("FromEnv() with %s=%s: %v", EnvVar, SettleBeforeCommit, err)
	}
	if p, ok := tr.Armed(); !ok || p != SettleBeforeCommit {
		t.Fatalf("Armed() = %q, %v; want %q, true", p, ok, SettleBeforeCommit)
	}
	t.Setenv(EnvVar, "settle")
	if _, err := FromEnv(); !errors.Is(err, ErrUnknownPoint) {
		t.Fatalf("FromEnv() with %s=settle error = %v, want ErrUnknownPoint", EnvVar, err)
	}
}

func TestParseAndEnvRoundTrip(t *testing.T) {
	t.Parallel()
	seen := map[Point]bool{}
	for _, p := range Points() {
		if seen[p] {
			t.Fatalf("Points() lists %q twice", p)
		}
		seen[p] = true
		got, err := Parse(string(p))
		if err != nil || got != p {
			t.Fatalf("Parse(%q) = %q, %v; want %q, nil", p, got, err, p)
		}
		kv, err := Env(p)
		if want := EnvVar + "=" + string(p); err != nil || kv != want {
			t.Fatalf("Env(%q) = %q, %v; want %q, nil", p, kv, err, want)
		}
	}
	if len(seen) != 6 {
		t.Fatalf("Points() has %d points, want the six of docs/contract.md §4", len(seen))
	}
}

// TestUnarmedHitIsANoOp runs in the test process itself: if Hit exited here,
// the test binary would die with status 73 and the run would fail.
func TestUnarmedHitIsANoOp(t *testing.T) {
	t.Parallel()
	var zero Trap
	if _, ok := zero.Armed(); ok {
		t.Fatal("zero Trap reports armed")
	}
	for _, p := range Points() {
		zero.Hit(p)
	}
	other, err := Arm(RedriveBeforeAudit)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Points() {
		if p != RedriveBeforeAudit {
			other.Hit(p) // armed elsewhere: every other point passes
		}
	}
}

func BenchmarkUnarmedHit(b *testing.B) {
	var trap Trap
	for b.Loop() {
		trap.Hit(ClaimCommitted)
	}
}
