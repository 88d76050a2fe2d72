package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
)

// Exit statuses.
const (
	exitOK    = 0 // the command did what it was asked
	exitFail  = 1 // the store refused the operation, or a database could not be read
	exitUsage = 2 // the command line itself is wrong
	// exitUndelivered: 'relay --exit-when-idle' ended with events it could
	// not deliver (undeliveredError, relaycmd.go).
	exitUndelivered = 3
)

// env is what every command works with: the streams, the database paths and
// the way to open them.
type env struct {
	ctx          context.Context
	stdin        io.Reader
	stdout       io.Writer
	stderr       io.Writer
	queuePath    string
	receiverPath string
	// dir, when set, is the folder relative paths are resolved against
	// (in-process test runs); empty means the process's working folder.
	dir string
	// openQueueAt and openReceiverAt open a database that exists (or, for
	// the queue, may be created); tests wrap them.
	openQueueAt    func(path string) (*queueDB, error)
	openReceiverAt func(path string) (*receiverDB, error)
	// readQueueAt and readReceiverAt open a database that exists for the
	// read commands: read-only, creating no file (store.go).
	readQueueAt    func(path string) (*queueDB, error)
	readReceiverAt func(path string) (*receiverDB, error)
	// isTerminal reports whether w is a terminal (the progress bar of a bulk
	// enqueue is drawn only there).
	isTerminal func(w io.Writer) bool
	// clock is how writes read time: --clock and --skew.
	clock clockConfig
	// skewSet says --skew was given before the command name: a command's
	// own --skew starts from it (cmdFlags.DurationVar).
	skewSet bool
	// abort ends ctx with a cause: a lost hold on a sharded queue stops
	// the command (shardlock.go). nil in an env a test made by hand.
	abort context.CancelCauseFunc
	// log is the command's logger once it has one (relay, web); a lost
	// hold is logged there, else as text on stderr.
	log *slog.Logger
}

// holdWatch is what a lost hold on a sharded queue does in this run: it
// ends e.ctx with the cause, and logs.
func (e *env) holdWatch() holdWatch {
	log := e.log
	if log == nil {
		log = slog.New(slog.NewTextHandler(e.stderr, nil))
	}
	return holdWatch{lost: e.abort, log: log}
}

// abortable makes e.ctx end when e.abort is called; the returned function
// ends it when the command is over and gives e its context back.
func (e *env) abortable() func() {
	parent := e.ctx
	ctx, cancel := context.WithCancelCause(parent)
	e.ctx, e.abort = ctx, cancel
	return func() {
		cancel(nil)
		e.ctx, e.abort = parent, nil // an env may run another command
	}
}

// holdLost puts a lost hold (the cause that ended e.ctx, if it is one)
// first in err, the command's result: the command stopped because of it,
// and may have returned nil (a relay or console stops at a cancelled
// context as at Ctrl-C), what the cancellation cut short, or a failure
// that only follows from the lost hold (it names it already).
func (e *env) holdLost(err error) error {
	cause := context.Cause(e.ctx)
	switch {
	case !errors.Is(cause, errHoldLost):
		return err
	case err == nil || errors.Is(err, errHoldLost):
		return cause
	default:
		return fmt.Errorf("%w (then: %w)", cause, err)
	}
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(e *env, args []string) error
}

// commands lists the subcommands in the order the help shows them.
var commands = []command{
	{"status", "clock mark, ticket, flows, events by state, quarantined, receiver totals", cmdStatus},
	{"flows", "one row per flow: served, head, ready tick, backlog (--blocked, --sort, --top) | flows pause/resume FLOW", cmdFlows},
	{"events", "a flow's events with state, generation, attempts, reason and error (--flow F)", cmdEvents},
	{"event", "one event in full: state, reason, error text and attempt history", cmdEvent},
	{"quarantined", "every quarantined event and the reason and error that quarantined it", cmdQuarantined},
	{"redrive", "put a quarantined event back in its flow, with an audited --reason (--all: every match)", cmdRedrive},
	{"audit", "the audit: every redrive and policy change, at which tick, and why", cmdAudit},
	{"policy", "the queue's policy (lease, attempts, backoff, jitter) | policy set ... --reason", cmdPolicy},
	{"destinations", "the receivers flows deliver to: list | add/set NAME --url --secret-file | pause/resume NAME", cmdDestinations},
	{"enqueue", "add one event (--id --flow --body, --at/--in to schedule it) or a JSONL file of them (--file)", cmdEnqueue},
	{"prune", "delete acked events and audit rows past the policy's retention (--dry-run) | prune receiver", cmdPrune},
	{"receiver", "receiver totals | receiver conflicts", cmdReceiver},
	{"snapshot", "both stores' full snapshots as JSON", cmdSnapshot},
	{"shards", "a sharded queue's shards: file or schema, label, events by state | shards create --count N", cmdShards},
	{"reshard", "move a sharded queue's flows into M shards, offline and audited (--to M --reason TEXT)", cmdReshard},
	{"web", "the operator console in a browser (--listen ADDR, --token or $FAIRRELAY_TOKEN)", cmdWeb},
	{"relay", "run the relay over queue.db: deliver --to URL (HTTP) or to --receiver in process", cmdRelay},
	{"receive", "serve receiver.db over HTTP for 'relayctl relay --to' (--listen ADDR --secret S)", cmdReceive},
}

// run is relayctl's whole life: it parses args, runs one command and returns
// the exit status. main calls it with the process's streams; tests call it
// with buffers.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext is run with a context whose cancellation (Ctrl-C) stops the
// command.
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := newEnv(stdin, stdout, stderr)
	e.ctx = ctx
	return e.main(args)
}

// newEnv is the environment of a real run; tests change its fields.
func newEnv(stdin io.Reader, stdout, stderr io.Writer) *env {
	return &env{
		ctx:            context.Background(),
		stdin:          stdin,
		stdout:         stdout,
		stderr:         stderr,
		isTerminal:     isTerminal,
		openQueueAt:    openQueueStore,
		openReceiverAt: openReceiverStore,
		clock:          clockConfig{mode: clockAuto, skew: defaultSkew, wall: clock.Wall{}},
		readQueueAt:    readQueueStore,
		readReceiverAt: readReceiverStore,
	}
}

func (e *env) main(args []string) int {
	top := flag.NewFlagSet("relayctl", flag.ContinueOnError)
	top.SetOutput(e.stderr)
	top.StringVar(&e.queuePath, "queue", "queue.db", "queue database `PATH`")
	top.StringVar(&e.receiverPath, "receiver", "receiver.db", "receiver database `PATH`")
	top.Var(&e.clock.mode, "clock", "how writes read time: `MODE` auto, logical or wall")
	top.Var(tickValue{&e.clock.skew}, "skew", "wall-clock mode's tolerance, a Go `DURATION` such as 1s or 500ms")
	top.Usage = func() { e.topUsage(e.stderr) }
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	top.Visit(func(f *flag.Flag) { e.skewSet = e.skewSet || f.Name == "skew" })
	rest := top.Args()
	if len(rest) == 0 {
		e.topUsage(e.stderr)
		return exitUsage
	}
	name := rest[0]
	if name == "help" {
		e.topUsage(e.stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name == name {
			label := name
			if name == "receiver" && len(rest) > 1 && (rest[1] == "totals" || rest[1] == "conflicts") ||
				name == "policy" && len(rest) > 1 && rest[1] == "set" ||
				name == "flows" && len(rest) > 1 && (rest[1] == "set-weight" || rest[1] == "pause" || rest[1] == "resume" || rest[1] == "set-destination") ||
				name == "destinations" && len(rest) > 1 && (rest[1] == "add" || rest[1] == "set" || rest[1] == "pause" || rest[1] == "resume" || rest[1] == "list") ||
				name == "prune" && len(rest) > 1 && rest[1] == "receiver" {
				label += " " + rest[1] // messages name the whole command
			}
			done := e.abortable()
			defer done()
			return e.finish(label, e.holdLost(c.run(e, rest[1:])))
		}
	}
	fmt.Fprintf(e.stderr, "relayctl: unknown command %q\n", name)
	fmt.Fprintf(e.stderr, "Run 'relayctl help' for the list of commands.\n")
	return exitUsage
}

// finish prints err, if any, and turns it into an exit status.
func (e *env) finish(name string, err error) int {
	var (
		ue *usageError
		un *undeliveredError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errFlagParse):
		// The flag package has already printed the problem and the usage.
		return exitUsage
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "relayctl %s: %s\n", name, ue.msg)
		fmt.Fprintf(e.stderr, "Run 'relayctl %s -h' for usage.\n", name)
		return exitUsage
	case errors.As(err, &un):
		fmt.Fprintf(e.stderr, "relayctl %s: %s\n", name, un)
		return exitUndelivered
	default:
		fmt.Fprintf(e.stderr, "relayctl %s: %s\n", name, err)
		if kindOf(err) == kindTimeAhead {
			fmt.Fprintf(e.stderr, "In wall-clock mode a tick is Unix milliseconds, at most --skew ahead of this machine's clock; leave out --now to act at the clock.\n")
		}
		return exitFail
	}
}

func (e *env) topUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("usage: relayctl [--queue PATH] [--receiver PATH] COMMAND [flags]\n\n")
	b.WriteString("relayctl shows and repairs a fairrelay queue (queue.db) and receiver (receiver.db).\n\n")
	b.WriteString("Commands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-12s %s\n", c.name, c.summary)
	}
	b.WriteString("\nGlobal flags (also accepted after the command):\n")
	b.WriteString("  --queue PATH      queue database (default queue.db)\n")
	b.WriteString("  --receiver PATH   receiver database (default receiver.db)\n")
	b.WriteString("                    either may be a postgres:// URL (?schema=NAME picks the schema)\n")
	b.WriteString("  --clock MODE      how writes read time: auto (default), logical or wall\n")
	b.WriteString("  --skew DURATION   wall-clock mode's tolerance (default 1s)\n")
	b.WriteString("\nDurations are Go durations: 30s, 250ms, 2m, 1h30m. A policy on a logical-time queue\n")
	b.WriteString("counts ticks instead: a plain number (policy set --lease 5).\n")
	b.WriteString("\nRun 'relayctl COMMAND -h' for a command's flags.\n")
	b.WriteString("Exit status: 0 ok, 1 refused by the store or unreadable database, 2 usage error,\n")
	b.WriteString("3 'relay --exit-when-idle' ended with events it could not deliver.\n")
	io.WriteString(w, b.String())
}

// usageError is a wrong command line: exit status 2.
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

func usagef(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

// errFlagParse marks a flag error the flag package has already reported.
var errFlagParse = errors.New("bad flags")

// isTerminal reports whether w is an *os.File attached to a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && fileIsTerminal(f)
}
