package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/crashpoint"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// ChildEnv is the environment variable that turns a process started by a
// scenario into a worker: its value is the JSON [Job]. Both the experiment
// command and the experiment's test binary call [RunChildIfRequested] first
// thing, so a scenario re-executes whichever binary it runs in.
const ChildEnv = "FAIRRELAY_EXPERIMENT_CHILD"

// Exit codes of a child process besides [crashpoint.ExitCode].
const (
	ChildOK     = 0 // the job ran to its end
	ChildFailed = 1 // a store returned an error; it is on stderr
	ChildBadJob = 2 // the job or the crash point could not be read
)

// The programs a child can run.
const (
	ProgEnqueue = "enqueue" // enqueue Events at Now
	ProgRelay   = "relay"   // Steps relay steps at Now (0: until nothing is dispatchable)
	ProgRedrive = "redrive" // redrive EventID at Generation with Reason at Now
	// ProgClaimant relays at Now until no event is pending or in flight: when
	// nothing is dispatchable because other claimants hold the heads, it
	// waits a moment and claims again, so that it stays in the race to the
	// end.
	ProgClaimant = "claimant"
)

// Job is what a child process does, in its scenario's folder.
type Job struct {
	Program    string        `json:"program"`
	Dir        string        `json:"dir"`
	Now        clock.Tick    `json:"now"`
	Events     []queue.Event `json:"events,omitempty"`
	Steps      int           `json:"steps,omitempty"`
	MaxDelta   int           `json:"max_delta,omitempty"`
	EventID    string        `json:"event_id,omitempty"`
	Generation int64         `json:"generation,omitempty"`
	Reason     string        `json:"reason,omitempty"`
	// Backend is where the stores are ("" or "sqlite": files in Dir;
	// "postgres": schemas on the server at Postgres, named from Run and
	// Key, the parent's per-run and per-scenario prefixes).
	Backend  string `json:"backend,omitempty"`
	Postgres string `json:"postgres,omitempty"`
	Run      string `json:"run,omitempty"`
	Key      string `json:"key,omitempty"`
	// Barrier, when true, makes a relay child wait at the start line (see
	// [Lab.startLine]) after opening its stores, so that claimants started
	// together also claim together.
	Barrier bool `json:"barrier,omitempty"`
}

// RunChildIfRequested runs the [Job] in [ChildEnv] and exits the process when
// the variable is set; otherwise it returns at once. The crash point, if any,
// is read from [crashpoint.EnvVar]: an unknown name ends the child with
// [ChildBadJob] before it touches a file.
func RunChildIfRequested() {
	spec, ok := os.LookupEnv(ChildEnv)
	if !ok {
		return
	}
	os.Exit(runChild(spec))
}

func runChild(spec string) int {
	var job Job
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintf(os.Stderr, "child: bad job: %v\n", err)
		return ChildBadJob
	}
	trap, err := crashpoint.FromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "child: %v\n", err)
		return ChildBadJob
	}
	if err := job.run(context.Background(), trap); err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", job.Program, err)
		if errors.Is(err, errBadJob) {
			return ChildBadJob
		}
		return ChildFailed
	}
	return ChildOK
}

var errBadJob = errors.New("bad job")

// queueHook maps the queue's hook points onto the crash points.
func queueHook(trap crashpoint.Trap) QueueOption {
	return withQueueHook(func(p queue.HookPoint) {
		switch p {
		case queue.HookEnqueueSeqTaken:
			trap.Hit(crashpoint.EnqueueSeqTaken)
		case queue.HookClaimCommitted:
			trap.Hit(crashpoint.ClaimCommitted)
		case queue.HookSettleBeforeCommit:
			trap.Hit(crashpoint.SettleBeforeCommit)
		case queue.HookRedriveBeforeAudit:
			trap.Hit(crashpoint.RedriveBeforeAudit)
		}
	})
}

// receiverHook maps the receiver's hook point onto its crash point.
func receiverHook(trap crashpoint.Trap) ReceiverOption {
	return withReceiverHook(func(p receiver.HookPoint) {
		if p == receiver.HookAcceptBeforeCommit {
			trap.Hit(crashpoint.ReceiveBeforeCommit)
		}
	})
}

// run carries the job out with both stores' hooks wired to trap when it
// is armed. An unarmed child (the eight claimants, a relay that is not the
// one crashed) opens its stores without a hook, as a relay in production
// does: a PostgreSQL store with a hook keeps every call on its general
// path, never the one-call path (settle_claim, receive_accepted) a relay
// takes.
func (j Job) run(ctx context.Context, trap crashpoint.Trap) (err error) {
	switch j.Program {
	case ProgEnqueue, ProgRedrive, ProgRelay, ProgClaimant:
	default:
		return fmt.Errorf("%w: unknown program %q", errBadJob, j.Program)
	}
	b, err := backendByName(j.Backend, j.Postgres, j.Run)
	if err != nil {
		return err
	}
	lab := &Lab{Dir: j.Dir, backend: b, key: j.Key}
	defer func() { err = errors.Join(err, lab.closeAll()) }()
	_, armed := trap.Armed()
	var qopts []QueueOption
	if armed {
		qopts = append(qopts, queueHook(trap))
	}
	q, err := lab.Queue(qopts...)
	if err != nil {
		return err
	}
	switch j.Program {
	case ProgEnqueue:
		for _, e := range j.Events {
			if _, err := q.Enqueue(ctx, e, j.Now); err != nil {
				return err
			}
		}
		return nil
	case ProgRedrive:
		return q.Redrive(ctx, j.EventID, j.Generation, j.Reason, j.Now)
	case ProgRelay, ProgClaimant:
		var opts []ReceiverOption
		if armed {
			opts = append(opts, receiverHook(trap))
		}
		if j.MaxDelta > 0 {
			opts = append(opts, WithMaxDelta(j.MaxDelta))
		}
		r, err := lab.Receiver(opts...)
		if err != nil {
			return err
		}
		relay := &Relay{Queue: q, Receiver: r, Trap: trap}
		if j.Barrier {
			if err := waitAtStartLine(ctx, j.Dir); err != nil {
				return err
			}
		}
		if j.Program == ProgClaimant {
			start := ""
			if j.Barrier {
				start = j.Dir
			}
			return claimUntilDone(ctx, relay, j.Now, start)
		}
		if j.Steps == 0 {
			_, err := relay.Drain(ctx, j.Now)
			return err
		}
		for range j.Steps {
			if _, _, err := relay.Step(ctx, j.Now); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: unknown program %q", errBadJob, j.Program)
}

// Exit is how a child process ended.
type Exit struct {
	Code   int
	Stderr string
}

// Child runs job in a child process of this very binary (see
// [RunChildIfRequested]), armed at point unless point is "", and waits for
// it. The scenario's stores should be closed first when the child must see
// a quiet file. The child is killed when ctx ends (the watchdog).
func (l *Lab) Child(ctx context.Context, job Job, point crashpoint.Point) (Exit, error) {
	cmd, stderr, err := l.command(ctx, job, point)
	if err != nil {
		return Exit{}, err
	}
	return wait(cmd, cmd.Run(), stderr)
}

// command prepares a child process without starting it.
func (l *Lab) command(ctx context.Context, job Job, point crashpoint.Point) (*exec.Cmd, *bytes.Buffer, error) {
	job.Dir = l.Dir
	l.Backend().job(l, &job)
	spec, err := json.Marshal(job)
	if err != nil {
		return nil, nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("child: %w", err)
	}
	env := make([]string, 0, len(os.Environ())+2)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, ChildEnv+"=") && !strings.HasPrefix(kv, crashpoint.EnvVar+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, ChildEnv+"="+string(spec))
	if point != "" {
		kv, err := crashpoint.Env(point)
		if err != nil {
			return nil, nil, err
		}
		env = append(env, kv)
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = env
	cmd.Dir = l.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 2 * time.Second
	return cmd, &stderr, nil
}

// wait turns the result of running cmd into an Exit.
func wait(cmd *exec.Cmd, err error, stderr *bytes.Buffer) (Exit, error) {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return Exit{Code: 0, Stderr: stderr.String()}, nil
	case errors.As(err, &exit) && exit.Exited():
		return Exit{Code: exit.ExitCode(), Stderr: stderr.String()}, nil
	default:
		return Exit{Code: -1, Stderr: stderr.String()}, fmt.Errorf("child %v: %w (stderr %q)", cmd.Args, err, stderr.String())
	}
}

// ExpectExit records a check that a child ended with the wanted code.
func (l *Lab) ExpectExit(name string, got Exit, want int) bool {
	if got.Code == want {
		return l.Check(name, true, "exit status %d", got.Code)
	}
	return l.Check(name, false, "exit status %d, want %d (stderr %q)", got.Code, want, got.Stderr)
}

// claimUntilDone relays at now until every event is acked or quarantined.
// It gives up after progressWait without any progress. A claimant that met
// the others at the start line in dir ("" when it did not) pairs up at its
// first claim (see pairUp) before it delivers it.
func claimUntilDone(ctx context.Context, r *Relay, now clock.Tick, dir string) error {
	idleSince := time.Now()
	paired := dir == ""
	for {
		c, ok, err := r.Queue.Claim(ctx, now)
		if err != nil {
			return err
		}
		if ok {
			if !paired {
				paired = true
				if err := pairUp(ctx, dir); err != nil {
					return err
				}
			}
			if _, err := r.Deliver(ctx, c, now); err != nil {
				return err
			}
			idleSince = time.Now()
			continue
		}
		st, err := r.Queue.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Events.Pending+st.Events.Inflight == 0 {
			return nil
		}
		if time.Since(idleSince) > progressWait {
			return fmt.Errorf("claimant: no progress for %s with %d pending and %d in flight", progressWait, st.Events.Pending, st.Events.Inflight)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(claimPoll):
		}
	}
}

// claimPoll is how long a claimant waits before claiming again when other
// claimants hold every dispatchable head.
const claimPoll = 2 * time.Millisecond

// The start line: every claimant child announces itself with a file in
// <dir>/start/ once its stores are open, and waits for <dir>/start/go,
// which the parent creates when all of them are there. It synchronises the
// start only; nothing in a result depends on it.
//
// A child waits startLineWait at most: long, because the others may be
// slow to open their stores (in a CI run, beside the race-built conformance
// suite and the soak on the same PostgreSQL server, one claimant of
// eight-claimants waited more than 20 s), and bounded only so that a child
// whose parent died does not wait for ever; a parent that gives up cancels
// its children before that.
const (
	startDir      = "start"
	startGo       = "go"
	startPoll     = time.Millisecond
	startLineWait = 3 * time.Minute
)

// progressWait is how long a running claimant waits for a claim of its own
// while events are still pending or in flight before it gives up
// (claimUntilDone): a queue that stopped handing out heads.
const progressWait = 20 * time.Second

func waitAtStartLine(ctx context.Context, dir string) error {
	start := filepath.Join(dir, startDir)
	if err := os.WriteFile(filepath.Join(start, fmt.Sprintf("ready-%d", os.Getpid())), nil, 0o644); err != nil {
		return fmt.Errorf("start line: %w", err)
	}
	deadline := time.Now().Add(startLineWait)
	for {
		if _, err := os.Stat(filepath.Join(start, startGo)); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start line: no go after %s", startLineWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(startPoll):
		}
	}
}

// claimedMark starts the name of the file <dir>/start/claimed-<pid> with
// which a claimant that met the others at the start line says that it
// claimed an event.
const claimedMark = "claimed-"

// pairWait is how long a claimant holds its first claim waiting for a
// second claimant to claim one (see pairUp).
const pairWait = 10 * time.Second

// pairUp is a claimant's step at its first claim: it marks that this
// process claimed (<dir>/start/claimed-<pid>) and holds that claim, not
// yet delivered, until a second claimant marked one too or pairWait
// passed. The start line releases the claimants together, but that only
// makes it likely that several of them claim: on two busy cores the
// scheduler may run one of them long enough to drain the 48 events alone,
// and the scenario's check that more than one claimant claimed
// (Lab.claimedProcesses) would then fail on a correct queue. Held, the
// first claim leaves that to no scheduler: the other claimants can claim
// meanwhile (7 more flows have a head at t=1), and on a correct queue one
// of them does; when none does, the claimant goes on after pairWait and
// the check reports it. It synchronises only: a claim held at t=1 cannot
// expire (its lease ends at 6), and nothing in a result depends on it.
func pairUp(ctx context.Context, dir string) error {
	start := filepath.Join(dir, startDir)
	if err := os.WriteFile(filepath.Join(start, fmt.Sprintf("%s%d", claimedMark, os.Getpid())), nil, 0o644); err != nil {
		return fmt.Errorf("pair up: %w", err)
	}
	deadline := time.Now().Add(pairWait)
	for time.Now().Before(deadline) {
		marks, err := filepath.Glob(filepath.Join(start, claimedMark+"*"))
		if err != nil {
			return fmt.Errorf("pair up: %w", err)
		}
		if len(marks) >= 2 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(startPoll):
		}
	}
	return nil
}

// claimedProcesses counts the claimant processes that marked a claim at
// the start line (see pairUp); read it once they all exited.
func (l *Lab) claimedProcesses() (int, error) {
	marks, err := filepath.Glob(filepath.Join(l.Dir, startDir, claimedMark+"*"))
	if err != nil {
		return 0, fmt.Errorf("count claimants: %w", err)
	}
	return len(marks), nil
}

// startLine prepares the start line for n children and returns a function
// that waits until all n are ready and then lets them go.
func (l *Lab) startLine(n int) (func(ctx context.Context) error, error) {
	start := filepath.Join(l.Dir, startDir)
	if err := os.MkdirAll(start, 0o755); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		for {
			ready, err := filepath.Glob(filepath.Join(start, "ready-*"))
			if err != nil {
				return err
			}
			if len(ready) >= n {
				return os.WriteFile(filepath.Join(start, startGo), nil, 0o644)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(startPoll):
			}
		}
	}, nil
}
