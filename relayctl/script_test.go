package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/jackc/pgx/v5"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain registers the commands the scripts run: relayctl itself, and two
// helpers that play the relay through the libraries (a script cannot claim or
// settle through relayctl, which has no such command on purpose).
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"relayctl": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		"fr-drive": func() { os.Exit(frDrive(os.Args[1:])) },
		"fr-claim": func() { os.Exit(frClaim(os.Args[1:])) },
		"fr-recv":  func() { os.Exit(frRecv(os.Args[1:])) },
	})
}

// TestScripts runs testdata/script/*.txtar: operator sessions with the exact
// output expected of each command.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/script",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"rc": cmdRC},
	})
}

// TestScriptsPostgres runs testdata/pgscript/*.txtar: operator sessions on
// PostgreSQL, with $QUEUE and $RECEIVER postgres:// URLs whose schemas
// (not yet created) are the script's own, dropped when it ends.
func TestScriptsPostgres(t *testing.T) {
	t.Parallel()
	base := pgtest.Require(t)
	pool := pgtest.Pool(t)
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/pgscript",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"rc": cmdRC},
		Setup: func(env *testscript.Env) error {
			var b [8]byte
			if _, err := rand.Read(b[:]); err != nil {
				return err
			}
			tag := hex.EncodeToString(b[:])
			qschema, rschema := "test_q"+tag, "test_r"+tag
			env.Setenv("QSCHEMA", qschema)
			env.Setenv("QUEUE", pgURL(t, base, qschema))
			env.Setenv("RECEIVER", pgURL(t, base, rschema))
			env.Defer(func() {
				for _, s := range []string{qschema, rschema} {
					if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
						t.Errorf("drop schema %s: %v", s, err)
					}
				}
			})
			return nil
		},
	})
}

// cmdRC runs a command and checks its exact exit status, which `exec` and
// `! exec` cannot tell apart beyond zero and non-zero:
//
//	rc STATUS COMMAND [ARGS...]
//
// stdout and stderr are then checked as after exec. `rc STATUS relayctl ...`
// calls run() in the test process, with the script's folder as the working
// folder and an empty standard input: a child process of the race-built test
// binary costs about half a second on this machine, and the scripts make
// some two hundred calls. `rc STATUS exec relayctl ...` (and plain `exec
// relayctl`) runs the real command (main, os.Exit) in a child process; the
// scripts use it too.
func cmdRC(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: rc STATUS COMMAND [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("rc: STATUS: %v", err)
	}
	if args[1] == "relayctl" {
		e := newEnv(strings.NewReader(""), ts.Stdout(), ts.Stderr())
		e.dir = ts.MkAbs(".")
		if got := e.main(args[2:]); got != want {
			ts.Fatalf("relayctl exit status = %d, want %d", got, want)
		}
		return
	}
	if args[1] == "exec" {
		args = args[1:]
		if len(args) < 2 {
			ts.Fatalf("usage: rc STATUS exec COMMAND [ARGS...]")
		}
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("rc: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exit status = %d, want %d", args[1], got, want)
	}
}

// frDrive drives one event into quarantine through the library (see
// driveToQuarantine):
//
//	fr-drive QUEUE EVENT_ID FROM_TICK [REASON [ERROR]]
//
// Each failure gives the error text ERROR (default none).
func frDrive(args []string) int {
	if len(args) < 3 || len(args) > 5 {
		fmt.Fprintln(os.Stderr, "usage: fr-drive QUEUE EVENT_ID FROM_TICK [REASON [ERROR]]")
		return 2
	}
	from, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-drive: FROM_TICK:", err)
		return 2
	}
	reason, errText := "unavailable", ""
	if len(args) >= 4 {
		reason = args[3]
	}
	if len(args) == 5 {
		errText = args[4]
	}
	q, err := openSettler(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-drive:", err)
		return 1
	}
	defer q.Close()
	if _, err := driveToQuarantine(context.Background(), q, args[1], clock.Tick(from), reason, errText, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fr-drive:", err)
		return 1
	}
	return 0
}

// driveToQuarantine plays a relay whose sends of event id keep failing
// (docs/contract.md §2.3, §2.4). From tick from it claims; a claim of id is settled as a
// failure with reason and error text errText at the same tick, any other claim as a success. When
// nothing is dispatchable it moves to the tick at which id is available again
// (from, from+2, from+6: the backoff of docs/contract.md §2.4). It stops when id is
// quarantined and returns that tick; each step is logged to w.
// settler is the part of a queue store driveToQuarantine uses: queuestore
// and pgqueuestore both have it.
type settler interface {
	Claim(ctx context.Context, now clock.Tick) (queue.Claim, bool, error)
	Event(ctx context.Context, id string) (queue.EventState, error)
	Settle(ctx context.Context, id string, generation int64, r queue.Result, now clock.Tick) (queue.Outcome, error)
}

func driveToQuarantine(ctx context.Context, q settler, id string, from clock.Tick, reason, errText string, w io.Writer) (clock.Tick, error) {
	now := from
	for range 1000 {
		c, ok, err := q.Claim(ctx, now)
		if err != nil {
			return now, fmt.Errorf("claim at tick %d: %w", now, err)
		}
		if !ok {
			ev, err := q.Event(ctx, id)
			if err != nil || ev.State != "pending" || ev.AvailableAt <= now {
				return now, fmt.Errorf("tick %d: nothing to claim, %s is %+v (err %v)", now, id, ev, err)
			}
			now = ev.AvailableAt
			continue
		}
		r := queuestore.Result{OK: c.EventID != id}
		if !r.OK {
			r.Reason, r.Error = reason, errText
		}
		out, err := q.Settle(ctx, c.EventID, c.Generation, r, now)
		if err != nil {
			return now, fmt.Errorf("settle at tick %d: %w", now, err)
		}
		if r.OK {
			fmt.Fprintf(w, "tick %d: %s delivered: %s\n", now, c.EventID, out)
			continue
		}
		fmt.Fprintf(w, "tick %d: %s failed (%s), attempt %d of generation %d: %s\n",
			now, id, reason, c.Attempts, c.Generation, out)
		if out == queuestore.Quarantined {
			return now, nil
		}
		if out != queuestore.RetryScheduled {
			return now, fmt.Errorf("unexpected outcome %s", out)
		}
	}
	return now, errors.New("gave up after 1000 claims")
}

// openSettler opens the queue a helper plays the relay on: a SQLite file,
// or a postgres:// URL with ?schema= as relayctl takes it.
func openSettler(path string) (interface {
	settler
	Close() error
}, error) {
	if isPostgres(path) {
		return openPGQueue(context.Background(), path, false, 0)
	}
	return queuestore.Open(path)
}

// frClaim claims once and, when asked, settles:
//
//	fr-claim QUEUE TICK [ok|fail REASON [ERROR]]
//
// A failure gives the error text ERROR (default none). It prints the claimed event, or "nothing" when no head is dispatchable.
func frClaim(args []string) int {
	if len(args) < 2 || len(args) > 5 {
		fmt.Fprintln(os.Stderr, "usage: fr-claim QUEUE TICK [ok|fail REASON [ERROR]]")
		return 2
	}
	now, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-claim: TICK:", err)
		return 2
	}
	ctx := context.Background()
	q, err := openSettler(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-claim:", err)
		return 1
	}
	defer q.Close()
	c, ok, err := q.Claim(ctx, clock.Tick(now))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-claim:", err)
		return 1
	}
	if !ok {
		fmt.Println("nothing")
		return 0
	}
	fmt.Printf("claimed %s (flow %s, seq %d, generation %d)", c.EventID, c.Flow, c.Seq, c.Generation)
	if len(args) >= 3 {
		r := queuestore.Result{OK: args[2] == "ok"}
		if len(args) >= 4 {
			r.Reason = args[3]
		}
		if len(args) == 5 {
			r.Error = args[4]
		}
		out, err := q.Settle(ctx, c.EventID, c.Generation, r, clock.Tick(now))
		if err != nil {
			fmt.Fprintln(os.Stderr, "\nfr-claim: settle:", err)
			return 1
		}
		fmt.Printf(": %s", out)
	}
	fmt.Println()
	return 0
}

// frRecv delivers one message to the receiver:
//
//	fr-recv RECEIVER ID FLOW SEQ BODY
func frRecv(args []string) int {
	if len(args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: fr-recv RECEIVER ID FLOW SEQ BODY")
		return 2
	}
	seq, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-recv: SEQ:", err)
		return 2
	}
	var r interface {
		Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error)
		Close() error
	}
	if isPostgres(args[0]) {
		r, err = openPGReceiver(context.Background(), args[0], true)
	} else {
		r, err = receiverstore.Open(args[0])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-recv:", err)
		return 1
	}
	defer r.Close()
	out, err := r.Receive(context.Background(), receiverstore.Message{ID: args[1], Flow: args[2], Seq: seq, Body: []byte(args[4])})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-recv:", err)
		return 1
	}
	fmt.Println(out)
	return 0
}
