package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
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

// cmdRC runs a command and checks its exact exit status, which `exec` and
// `! exec` cannot tell apart beyond zero and non-zero:
//
//	rc STATUS COMMAND [ARGS...]
//
// stdout and stderr are then checked as after exec.
func cmdRC(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: rc STATUS COMMAND [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("rc: STATUS: %v", err)
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

// frDrive drives one event into quarantine through the library, the way a
// relay whose sends keep failing would (SPEC §2.3, §2.4):
//
//	fr-drive QUEUE EVENT_ID FROM_TICK [REASON]
//
// It claims at FROM_TICK and settles a failure at the same tick, three times,
// each claim at the tick the backoff allows (FROM, FROM+2, FROM+6). Every claim
// must hand out EVENT_ID: the script makes its flow the next in line.
func frDrive(args []string) int {
	if len(args) < 3 || len(args) > 4 {
		fmt.Fprintln(os.Stderr, "usage: fr-drive QUEUE EVENT_ID FROM_TICK [REASON]")
		return 2
	}
	path, id := args[0], args[1]
	from, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-drive: FROM_TICK:", err)
		return 2
	}
	reason := "unavailable"
	if len(args) == 4 {
		reason = args[3]
	}
	ctx := context.Background()
	q, err := queuestore.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-drive:", err)
		return 1
	}
	defer q.Close()
	now := clock.Tick(from)
	for {
		c, ok, err := q.Claim(ctx, now)
		if err != nil || !ok {
			fmt.Fprintf(os.Stderr, "fr-drive: claim at tick %d: ok=%v err=%v\n", now, ok, err)
			return 1
		}
		if c.EventID != id {
			fmt.Fprintf(os.Stderr, "fr-drive: tick %d claimed %s, not %s\n", now, c.EventID, id)
			return 1
		}
		out, err := q.Settle(ctx, c.EventID, c.Generation, queuestore.Result{Reason: reason}, now)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fr-drive: settle at tick %d: %v\n", now, err)
			return 1
		}
		fmt.Printf("tick %d: claimed %s (generation %d, attempt %d), failed %s: %s\n",
			now, id, c.Generation, c.Attempts, reason, out)
		switch out {
		case queuestore.Quarantined:
			return 0
		case queuestore.RetryScheduled:
			now += queuestore.Backoff(c.Attempts)
		default:
			fmt.Fprintf(os.Stderr, "fr-drive: unexpected outcome %s\n", out)
			return 1
		}
	}
}

// frClaim claims once and, when asked, settles:
//
//	fr-claim QUEUE TICK [ok|fail REASON]
//
// It prints the claimed event, or "nothing" when no head is dispatchable.
func frClaim(args []string) int {
	if len(args) != 2 && len(args) != 3 && len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: fr-claim QUEUE TICK [ok|fail REASON]")
		return 2
	}
	now, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fr-claim: TICK:", err)
		return 2
	}
	ctx := context.Background()
	q, err := queuestore.Open(args[0])
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
		if len(args) == 4 {
			r.Reason = args[3]
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
	r, err := receiverstore.Open(args[0])
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
