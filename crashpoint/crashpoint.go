package crashpoint

import (
	"errors"
	"fmt"
	"os"
)

// Point names a place where an armed process exits with [ExitCode].
type Point string

// The six crash points of docs/contract.md §4, in the order an event meets them.
const (
	// EnqueueSeqTaken is inside the enqueue transaction, after the flow's
	// sequence number is taken and before the commit.
	EnqueueSeqTaken Point = "enqueue-seq-taken"
	// ClaimCommitted is after a claim's transaction commits and before the
	// event is sent to the receiver.
	ClaimCommitted Point = "claim-committed"
	// ReceiveBeforeCommit is inside the receiver's accept transaction, after
	// its writes are made (or queued to go with COMMIT) and before the
	// commit.
	ReceiveBeforeCommit Point = "receive-before-commit"
	// ReceiveCommitted is after the receiver has committed an accepted
	// message and before the relay settles the event in the queue.
	ReceiveCommitted Point = "receive-committed"
	// SettleBeforeCommit is inside the settle transaction, after its writes
	// are made (or queued to go with COMMIT) and before the commit.
	SettleBeforeCommit Point = "settle-before-commit"
	// RedriveBeforeAudit is inside the redrive transaction, after the event
	// update and before the audit row is inserted.
	RedriveBeforeAudit Point = "redrive-before-audit"
)

// EnvVar is the environment variable that arms a child process: its value is
// the name of one [Point]. Unset or empty means unarmed.
const EnvVar = "FAIRRELAY_CRASHPOINT"

// ExitCode is the status an armed process exits with when it reaches its point.
const ExitCode = 73

// ErrUnknownPoint reports a point name that is not one of [Points].
var ErrUnknownPoint = errors.New("crashpoint: unknown point")

var points = []Point{
	EnqueueSeqTaken,
	ClaimCommitted,
	ReceiveBeforeCommit,
	ReceiveCommitted,
	SettleBeforeCommit,
	RedriveBeforeAudit,
}

// Points returns the six crash points, in the order an event meets them. The
// slice is a copy.
func Points() []Point {
	return append([]Point(nil), points...)
}

// Parse returns the point called name, or an error wrapping [ErrUnknownPoint].
func Parse(name string) (Point, error) {
	for _, p := range points {
		if string(p) == name {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownPoint, name)
}

// Env returns the environment entry ("FAIRRELAY_CRASHPOINT=name") that arms a
// child process at p, or an error wrapping [ErrUnknownPoint].
func Env(p Point) (string, error) {
	if _, err := Parse(string(p)); err != nil {
		return "", err
	}
	return EnvVar + "=" + string(p), nil
}

// Trap is the point a process is armed at. The zero Trap is unarmed.
type Trap struct {
	armed Point
}

// Arm returns a trap armed at p, or an error wrapping [ErrUnknownPoint]. Only a
// child process should hold an armed trap: reaching p ends the process.
func Arm(p Point) (Trap, error) {
	if _, err := Parse(string(p)); err != nil {
		return Trap{}, err
	}
	return Trap{armed: p}, nil
}

// FromEnv returns the trap named by [EnvVar]: unarmed when the variable is
// unset or empty, an error wrapping [ErrUnknownPoint] for any other name that
// is not a point.
func FromEnv() (Trap, error) {
	name := os.Getenv(EnvVar)
	if name == "" {
		return Trap{}, nil
	}
	t, err := Arm(Point(name))
	if err != nil {
		return Trap{}, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return t, nil
}

// Armed returns the point t is armed at, and false for an unarmed trap.
func (t Trap) Armed() (Point, bool) {
	return t.armed, t.armed != ""
}

// Hit is called when the process reaches p. When t is armed at p, the process
// exits at once with [ExitCode]; otherwise Hit does nothing.
func (t Trap) Hit(p Point) {
	if t.armed != "" && t.armed == p {
		os.Exit(ExitCode)
	}
}
