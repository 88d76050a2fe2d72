package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
)

// racingQueue is the real queue with another operator who redrives the same
// event between relayctl's read of it and relayctl's own redrive.
type racingQueue struct {
	queueLib
	path string
	t    *testing.T
}

func (r racingQueue) Redrive(ctx context.Context, id string, generation int64, reason string, now clock.Tick) error {
	other, err := queuestore.Open(r.path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer other.Close()
	ev, err := other.Event(ctx, id)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := other.Redrive(ctx, id, ev.Generation, "the other operator", now); err != nil {
		r.t.Fatalf("the other operator's Redrive: %v", err)
	}
	return r.queueLib.Redrive(ctx, id, generation, reason, now)
}

// TestRedriveConcurrentChangeRefused: without --generation, relayctl redrives
// at the generation it has just read, so when the event changes in between
// (another operator redrove it) the store refuses with ErrStaleGeneration
// (docs/contract.md §2.5) and the event is redriven once, not twice.
func TestRedriveConcurrentChangeRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	qpath := filepath.Join(dir, "queue.db")
	mustRun(t, dir, "enqueue", "--id", "e1", "--flow", "f", "--body", "x")
	quarantine(t, qpath, "e1", 0, "unavailable")

	var out, errb bytes.Buffer
	e := newEnv(strings.NewReader(""), &out, &errb)
	e.openQueueAt = openWrapped(func(l queueLib) queueLib { return racingQueue{queueLib: l, path: qpath, t: t} })
	code := e.main([]string{"--queue", qpath, "redrive", "e1", "--reason", "mine"})
	if code != exitFail {
		t.Fatalf("redrive exit status = %d, want %d; stdout %q stderr %q", code, exitFail, out.String(), errb.String())
	}
	if want := "relayctl redrive: event e1 is at generation 4, not 3: it changed since it was read; nothing was redriven"; !strings.Contains(errb.String(), want) {
		t.Fatalf("stderr = %q, want it to contain %q", errb.String(), want)
	}
	var audit []auditRow
	decodeStrict(t, mustRun(t, dir, "audit", "--json"), &audit)
	if len(audit) != 1 || audit[0].Reason != "the other operator" || audit[0].Generation != 4 {
		t.Fatalf("audit = %+v, want exactly the other operator's redrive to generation 4", audit)
	}
}

// TestKindOf: every queue sentinel maps to its kind; an empty reason, which
// the queue reports as both ErrEmptyReason and ErrInvalid, is an empty
// reason.
func TestKindOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want errKind
	}{
		{queuestore.ErrNotFound, kindNotFound},
		{queuestore.ErrNotQuarantined, kindNotQuarantined},
		{queuestore.ErrStaleGeneration, kindStaleGeneration},
		{queuestore.ErrEmptyReason, kindEmptyReason},
		{errors.Join(queuestore.ErrInvalid, queuestore.ErrEmptyReason), kindEmptyReason},
		{queuestore.ErrTimeRegression, kindTimeRegression},
		{queuestore.ErrConflict, kindConflict},
		{queuestore.ErrInvalid, kindInvalid},
		{errors.New("disk I/O error"), kindOther},
	}
	for _, tt := range tests {
		if got := kindOf(tt.err); got != tt.want {
			t.Errorf("kindOf(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	// The store's real empty-reason error, not a hand-made one.
	dir := t.TempDir()
	mustRun(t, dir, "enqueue", "--id", "e1", "--flow", "f", "--body", "x")
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if got := kindOf(q.Redrive(context.Background(), "e1", 0, "", 0)); got != kindEmptyReason {
		t.Fatalf("kindOf(Redrive with empty reason) = %d, want kindEmptyReason", got)
	}
}
