package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// TestRedriveAllStoppedHalfWay: when the store stops RedriveAll after some
// chunks (here: the context is cancelled after the first), relayctl lists
// what was redriven, says it stopped and why, and exits 1; running the
// command again redrives the rest (docs/decisions/relayctl-operator-commands.md).
func TestRedriveAllStoppedHalfWay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	qpath := filepath.Join(dir, "queue.db")
	last := clock.Tick(0)
	for _, id := range []string{"a1", "b1", "c1"} {
		mustRun(t, dir, "enqueue", "--id", id, "--flow", id[:1], "--body", "x", "--now", itoa(int64(last)))
		last = quarantine(t, qpath, id, last, "unavailable")
	}
	var out, errb bytes.Buffer
	e := newEnv(strings.NewReader(""), &out, &errb)
	e.openQueueAt = openWrapped(func(l queueLib) queueLib { return stopAfterOne{l} })
	code := e.main([]string{"--queue", qpath, "redrive", "--all", "--reason", "endpoint back"})
	if code != exitFail {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitFail, errb.String())
	}
	if want := "redrove a1 (flow a, seq 1): generation 3 -> 4\n"; out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
	if want := "relayctl redrive: stopped after 1 event (each with its audit row): redrive --all: context canceled"; !strings.Contains(errb.String(), want) {
		t.Fatalf("stderr %q, want it to contain %q", errb.String(), want)
	}
	// Again, without the fault: the other two.
	if got := mustRun(t, dir, "redrive", "--all", "--reason", "endpoint back"); !strings.Contains(got, "redrove 2 events") {
		t.Fatalf("second run: %q, want the other 2 events redriven", got)
	}
	var audit []auditRow
	decodeStrict(t, mustRun(t, dir, "audit", "--json"), &audit)
	if len(audit) != 3 {
		t.Fatalf("audit = %+v, want 3 redrives, each event once", audit)
	}
}

// TestRedriveAllStoppedHalfWayJSON: with --json, what was redriven before
// the stop is still printed (a JSON list), and the stop is exit 1 with the
// reason on stderr.
func TestRedriveAllStoppedHalfWayJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	qpath := filepath.Join(dir, "queue.db")
	last := clock.Tick(0)
	for _, id := range []string{"a1", "b1"} {
		mustRun(t, dir, "enqueue", "--id", id, "--flow", id[:1], "--body", "x", "--now", itoa(int64(last)))
		last = quarantine(t, qpath, id, last, "unavailable")
	}
	var out, errb bytes.Buffer
	e := newEnv(strings.NewReader(""), &out, &errb)
	e.openQueueAt = openWrapped(func(l queueLib) queueLib { return stopAfterOne{l} })
	code := e.main([]string{"--queue", qpath, "redrive", "--all", "--json", "--reason", "endpoint back"})
	if code != exitFail || !strings.Contains(errb.String(), "stopped after 1 event") {
		t.Fatalf("exit %d, stderr %q; want exit %d and the stop", code, errb.String(), exitFail)
	}
	var done []redrivenRow
	decodeStrict(t, out.String(), &done)
	if len(done) != 1 || done[0].ID != "a1" {
		t.Fatalf("stdout %s, want a1 listed", out.String())
	}
}

// stopAfterOne redrives one event through the real store, then fails the way
// a cancelled bulk redrive does.
type stopAfterOne struct{ queueLib }

func (s stopAfterOne) RedriveAll(ctx context.Context, f queue.RedriveFilter, reason string, now clock.Tick) ([]queue.Redriven, error) {
	first, err := s.queueLib.RedriveAll(ctx, queue.RedriveFilter{Flow: "a"}, reason, now)
	if err != nil {
		return nil, err
	}
	return first, context.Canceled
}
