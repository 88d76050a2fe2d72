package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// runIn runs relayctl against the databases in dir and returns the exit
// status, stdout and stderr.
func runIn(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"--queue", filepath.Join(dir, "queue.db"), "--receiver", filepath.Join(dir, "receiver.db")}, args...)
	code := run(full, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// mustRun runs relayctl and fails the test unless it exits 0.
func mustRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	code, out, errs := runIn(t, dir, args...)
	if code != exitOK {
		t.Fatalf("relayctl %s: exit status = %d, want 0; stderr:\n%s", strings.Join(args, " "), code, errs)
	}
	return out
}

// decodeStrict parses --json output into v, refusing unknown fields, so that
// a field renamed on either side fails the test.
func decodeStrict(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T from:\n%s\nerror: %v", v, out, err)
	}
}

// quarantine drives event id into quarantine through the library (see
// driveToQuarantine) and returns the tick of the last settle.
func quarantine(t *testing.T, path, id string, from clock.Tick, reason string) clock.Tick {
	t.Helper()
	return quarantineWithError(t, path, id, from, reason, "")
}

// quarantineWithError is quarantine with an error text on each failure.
func quarantineWithError(t *testing.T, path, id string, from clock.Tick, reason, errText string) clock.Tick {
	t.Helper()
	q, err := queuestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	last, err := driveToQuarantine(context.Background(), q, id, from, reason, errText, io.Discard)
	if err != nil {
		t.Fatalf("drive %s into quarantine: %v", id, err)
	}
	return last
}

// TestJSONParsesBack runs every listing command with --json and reads the
// output back into relayctl's row types ("--json output parsed
// back"). docs/contract.md §2.4 (quarantine after three failures) and §2.5 (redrive:
// generation + 1, attempts 0, lifetime kept, audit row) give the values.
func TestJSONParsesBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	qpath := filepath.Join(dir, "queue.db")
	mustRun(t, dir, "enqueue", "--id", "b1", "--flow", "beta", "--body", `{"delta":500}`, "--now", "1")
	mustRun(t, dir, "enqueue", "--id", "b2", "--flow", "beta", "--body", `{"delta":1}`)
	last := quarantine(t, qpath, "b1", 1, "unsupported_delta")
	if last != 7 {
		t.Fatalf("quarantined at tick %d, want 7 (1, 1+2, 3+4)", last)
	}

	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, m := range []receiverstore.Message{
		{ID: "a1", Flow: "alpha", Seq: 1, Body: []byte(`{"delta":3}`)},
		{ID: "a1", Flow: "alpha", Seq: 1, Body: []byte(`{"delta":4}`)}, // conflict: id_reused
	} {
		if _, err := r.Receive(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("quarantined", func(t *testing.T) {
		var got []quarantinedRow
		decodeStrict(t, mustRun(t, dir, "quarantined", "--json"), &got)
		want := []quarantinedRow{{ID: "b1", Flow: "beta", Seq: 1, Generation: 3, LifetimeAttempts: 3, Reason: "unsupported_delta"}}
		if len(got) != 1 || got[0] != want[0] {
			t.Fatalf("quarantined --json = %+v, want %+v", got, want)
		}
	})

	t.Run("flows", func(t *testing.T) {
		var got []flowRow
		decodeStrict(t, mustRun(t, dir, "flows", "--json"), &got)
		if len(got) != 1 {
			t.Fatalf("flows --json has %d rows, want 1", len(got))
		}
		f := got[0]
		if f.Flow != "beta" || f.Served != 3 || f.HeadSeq != 1 || f.HeadState != "quarantined" ||
			f.ReadyTick != nil || f.Backlog != 2 || f.Blocked != "quarantined" {
			t.Fatalf("flows --json = %+v, want beta served 3, head 1 quarantined, ready null, backlog 2, blocked", f)
		}
	})

	t.Run("status", func(t *testing.T) {
		var got statusReport
		decodeStrict(t, mustRun(t, dir, "status", "--json"), &got)
		want := statsRow{ClockMark: 7, GlobalTicket: 3, Flows: 1, Quarantined: 1,
			EventsByState: eventCounts{Pending: 1, Quarantined: 1}}
		if got.Stats != want {
			t.Fatalf("status --json stats = %+v, want %+v", got.Stats, want)
		}
		if got.Receiver == nil || got.Receiver.Conflicts != 1 || len(got.Receiver.Totals) != 1 ||
			got.Receiver.Totals[0] != (totalRow{Flow: "alpha", Total: 3, NextSeq: 2}) {
			t.Fatalf("status --json receiver = %+v, want alpha total 3 next 2, 1 conflict", got.Receiver)
		}
	})

	// Redrive at the clock mark, then read the event and the audit back.
	if out := mustRun(t, dir, "redrive", "b1", "--reason", "cap raised"); !strings.Contains(out, "generation 3 -> 4") {
		t.Fatalf("redrive output = %q, want generation 3 -> 4", out)
	}

	t.Run("events", func(t *testing.T) {
		var got []eventRow
		decodeStrict(t, mustRun(t, dir, "events", "--flow", "beta", "--json"), &got)
		if len(got) != 2 {
			t.Fatalf("events --json has %d rows, want 2", len(got))
		}
		want := eventRow{ID: "b1", Flow: "beta", Seq: 1, State: "pending", Generation: 4, Attempts: 0,
			LifetimeAttempts: 3, AvailableAt: 7, Reason: "", Body: body(`{"delta":500}`)}
		if g := got[0]; g.ID != want.ID || g.State != want.State || g.Generation != want.Generation ||
			g.Attempts != want.Attempts || g.LifetimeAttempts != want.LifetimeAttempts ||
			g.AvailableAt != want.AvailableAt || g.Reason != want.Reason || !bytes.Equal(g.Body, want.Body) {
			t.Fatalf("events --json[0] = %+v, want %+v", g, want)
		}
	})

	t.Run("audit", func(t *testing.T) {
		var got []auditRow
		decodeStrict(t, mustRun(t, dir, "audit", "--json"), &got)
		want := auditRow{Kind: "redrive", EventID: "b1", Generation: 4, Reason: "cap raised", Tick: 7}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("audit --json = %+v, want [%+v]", got, want)
		}
	})

	t.Run("receiver", func(t *testing.T) {
		var totals []totalRow
		decodeStrict(t, mustRun(t, dir, "receiver", "totals", "--json"), &totals)
		if len(totals) != 1 || totals[0] != (totalRow{Flow: "alpha", Total: 3, NextSeq: 2}) {
			t.Fatalf("receiver totals --json = %+v", totals)
		}
		var cs []conflictRow
		decodeStrict(t, mustRun(t, dir, "receiver", "conflicts", "--json"), &cs)
		if len(cs) != 1 || cs[0].ID != "a1" || cs[0].Rule != receiverstore.RuleIDReused ||
			string(cs[0].Body) != `{"delta":4}` || cs[0].WithID != "a1" {
			t.Fatalf("receiver conflicts --json = %+v", cs)
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		var got struct {
			Queue    queuestore.Snapshot    `json:"queue"`
			Receiver receiverstore.Snapshot `json:"receiver"`
		}
		decodeStrict(t, mustRun(t, dir, "snapshot"), &got)
		if n := len(got.Queue.Events); n != 2 {
			t.Fatalf("snapshot queue events = %d, want 2", n)
		}
		if n := len(got.Receiver.Receipts); n != 1 {
			t.Fatalf("snapshot receiver receipts = %d, want 1", n)
		}
	})
}

// TestBodyJSON: a body prints as a string when it is UTF-8 and as base64
// otherwise, and reads back byte for byte.
func TestBodyJSON(t *testing.T) {
	t.Parallel()
	for _, b := range []body{body(`{"delta":1}`), body("héllo"), {0xff, 0x00, 0x80}} {
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var back body
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", data, err)
		}
		if !bytes.Equal(back, b) {
			t.Fatalf("body %q -> %s -> %q", []byte(b), data, []byte(back))
		}
	}
	data, _ := json.Marshal(body{0xff})
	if got, want := string(data), `{"base64":"/w=="}`; got != want {
		t.Fatalf("Marshal(0xff) = %s, want %s", got, want)
	}
}
