package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// TestParseInterspersed: flags may come before, between and after positional
// arguments, and everything after "--" is positional.
func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		wantPos []string
		reason  string
	}{
		{[]string{"e1", "--reason", "r"}, []string{"e1"}, "r"},
		{[]string{"--reason", "r", "e1"}, []string{"e1"}, "r"},
		{[]string{"e1", "--reason=r", "e2"}, []string{"e1", "e2"}, "r"},
		{[]string{"--reason", "r", "--", "--e1"}, []string{"--e1"}, "r"},
		{[]string{}, nil, ""},
	}
	for _, tt := range tests {
		e := newEnv(strings.NewReader(""), io.Discard, io.Discard)
		f := newFlags(e, "t", "t", "t")
		reason := f.String("reason", "", "")
		pos, err := f.parse(tt.args)
		if err != nil {
			t.Fatalf("parse(%q): %v", tt.args, err)
		}
		if !slices.Equal(pos, tt.wantPos) || *reason != tt.reason {
			t.Fatalf("parse(%q) = %q, reason %q; want %q, reason %q", tt.args, pos, *reason, tt.wantPos, tt.reason)
		}
	}
}

// TestCell: a table cell never breaks the columns.
func TestCell(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", "-"},
		{"plain words", "plain words"},
		{"tab\there", `tab\there`},
		{"new\nline", `new\nline`},
		{"bell\a", `bell\a`},
		{"héllo", "héllo"},
	}
	for _, tt := range tests {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestProgressBar: the bar is drawn on a terminal only, ends its line once,
// and reaches 100% at the end of the input ("a progress bar on a
// terminal and none when piped").
func TestProgressBar(t *testing.T) {
	t.Parallel()
	var off bytes.Buffer
	p := newProgress(&off, false, 100)
	p.update(50, 5)
	p.done()
	if off.Len() != 0 {
		t.Fatalf("progress off wrote %q, want nothing", off.String())
	}

	var on bytes.Buffer
	p = newProgress(&on, true, 100)
	p.update(50, 5)
	p.update(100, 10)
	p.done()
	p.done()
	want := "\r[###############...............]  50%  5 events enqueued" +
		"\r[##############################] 100%  10 events enqueued\n"
	if on.String() != want {
		t.Fatalf("progress on wrote %q, want %q", on.String(), want)
	}

	var pipe bytes.Buffer
	p = newProgress(&pipe, true, -1) // size unknown: standard input
	p.update(7, 3)
	p.done()
	if got, want := pipe.String(), "\r3 events enqueued\n"; got != want {
		t.Fatalf("progress without size wrote %q, want %q", got, want)
	}
}

// TestEnqueueProgressOnTerminalOnly runs a bulk enqueue twice: once as if
// stderr were a terminal (a bar at 100%), once piped (nothing on stderr).
func TestEnqueueProgressOnTerminalOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "events.jsonl")
	var lines strings.Builder
	for i := range 25 {
		fmt.Fprintf(&lines, `{"id": "e%d", "flow": "f%d", "body": {"delta": 1}}`+"\n", i, i%3)
	}
	if err := os.WriteFile(file, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, terminal := range []bool{true, false} {
		var out, errb bytes.Buffer
		e := newEnv(strings.NewReader(""), &out, &errb)
		e.isTerminal = func(io.Writer) bool { return terminal }
		code := e.main([]string{"--queue", filepath.Join(dir, "queue.db"), "enqueue", "--file", file, "--chunk", "10"})
		if code != exitOK {
			t.Fatalf("enqueue (terminal %v) exit status = %d; stderr %q", terminal, code, errb.String())
		}
		if terminal {
			if got := errb.String(); !strings.HasSuffix(got, "100%  25 events enqueued\n") || strings.Count(got, "\r") != 3 {
				t.Fatalf("stderr on a terminal = %q, want 3 redraws (chunks of 10, 10, 5) ending at 100%%", got)
			}
		} else if errb.Len() != 0 {
			t.Fatalf("stderr when piped = %q, want nothing", errb.String())
		}
	}
}

// TestIsTerminal: a pipe and /dev/null are not terminals, so that piped or
// redirected output never gets a progress bar.
func TestIsTerminal(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) {
		t.Fatal("isTerminal(pipe) = true, want false")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Fatal("isTerminal(/dev/null) = true, want false")
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Fatal("isTerminal(buffer) = true, want false")
	}
}

// TestEnqueueInterrupted: a cancelled context (Ctrl-C) stops a bulk enqueue
// before its next line; what was committed stays and the message says so.
func TestEnqueueInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	e := newEnv(strings.NewReader(""), &out, &errb)
	e.ctx = ctx
	// The queue cancels the run once it has committed the first chunk.
	e.openQueueAt = openWrapped(func(l queueLib) queueLib { return cancelAfterBatch{queueLib: l, cancel: cancel} })
	var in strings.Builder
	for i := range 5 {
		fmt.Fprintf(&in, `{"id": "e%d", "flow": "f", "body": 1}`+"\n", i)
	}
	e.stdin = strings.NewReader(in.String())
	code := e.main([]string{"--queue", filepath.Join(dir, "queue.db"), "enqueue", "--file", "-", "--chunk", "2"})
	if code != exitFail {
		t.Fatalf("interrupted enqueue exit status = %d, want %d", code, exitFail)
	}
	if want := "relayctl enqueue: stdin: stopped before line 3 (context canceled); 2 events from 1 chunk before it are in the queue"; !strings.Contains(errb.String(), want) {
		t.Fatalf("stderr = %q, want %q", errb.String(), want)
	}
	var evs []eventRow
	decodeStrict(t, mustRun(t, dir, "events", "--flow", "f", "--json"), &evs)
	if len(evs) != 2 {
		t.Fatalf("events after the interrupt = %d, want the 2 of the first chunk", len(evs))
	}
}

// cancelAfterBatch cancels a context after each EnqueueBatch that succeeds.
type cancelAfterBatch struct {
	queueLib
	cancel context.CancelFunc
}

func (c cancelAfterBatch) EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error) {
	r, err := c.queueLib.EnqueueBatch(ctx, es, now)
	if err == nil {
		c.cancel()
	}
	return r, err
}
