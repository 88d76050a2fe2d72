package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// TestScheduleRealTime: on a queue run in real time, --at takes an RFC
// 3339 time (or a Unix-millisecond tick) and --in a Go duration, counted
// from the write's tick; an events file's "at" and "in" the same; the
// logical forms are refused and write nothing (docs/contract.md §7.9,
// docs/decisions/relayctl-durations.md). testdata/script/life.txtar is
// the logical-time side.
func TestScheduleRealTime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wall := clock.NewManual(wallMs)
	enqueue := func(want int, args ...string) string {
		t.Helper()
		code, out, errs := runAt(t, dir, wall, append([]string{"enqueue", "--clock", "wall", "--flow", "f", "--body", "x"}, args...)...)
		if code != want {
			t.Fatalf("enqueue %v: exit %d, want %d; stdout %q stderr %q", args, code, want, out, errs)
		}
		return out + errs
	}
	at := time.UnixMilli(int64(wallMs)).UTC().Add(time.Hour)
	enqueue(exitOK, "--id", "e1", "--at", at.Format(time.RFC3339))
	enqueue(exitOK, "--id", "e2", "--in", "90s")
	enqueue(exitOK, "--id", "e3", "--at", itoa(int64(wallMs)+5000))
	for _, bad := range [][]string{
		{"--in", "5"}, // a tick count on a real-time queue
		{"--at", "5"}, // a tick of 1970
		{"--at", "tomorrow"},
		{"--in", "1.5ms"},
	} {
		out := enqueue(exitUsage, append([]string{"--id", "bad"}, bad...)...)
		if !strings.Contains(out, "nothing changed") {
			t.Errorf("enqueue %v: %q, want it to say nothing changed", bad, out)
		}
	}
	if !strings.Contains(enqueue(exitUsage, "--id", "bad", "--in", "5"), "want a Go duration such as 30s or 250ms; the queue runs in real time") {
		t.Error("--in 5 on a real-time queue does not say the form wanted")
	}
	file := filepath.Join(dir, "later.jsonl")
	writeFile(t, file, `{"id": "g1", "flow": "g", "body": 1, "in": "2m"}`+"\n"+
		`{"id": "g2", "flow": "g", "body": 2, "at": "`+at.Add(time.Minute).Format(time.RFC3339)+`"}`+"\n")
	if code, out, errs := runAt(t, dir, wall, "enqueue", "--file", "later.jsonl"); code != exitOK || !strings.Contains(out, "2 new (2 scheduled later)") {
		t.Fatalf("enqueue --file: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	writeFile(t, file, `{"id": "g3", "flow": "g", "body": 3, "in": 5}`+"\n")
	if code, _, errs := runAt(t, dir, wall, "enqueue", "--file", "later.jsonl", "--check"); code != exitFail ||
		!strings.Contains(errs, `later.jsonl:1: "in" "5": want a Go duration`) {
		t.Fatalf("enqueue --check of a tick count on a real-time queue: exit %d, stderr %q", code, errs)
	}
	want := map[string]int64{
		"e1": at.UnixMilli(), "e2": int64(wallMs) + 90_000, "e3": int64(wallMs) + 5000,
		"g1": int64(wallMs) + 120_000, "g2": at.Add(time.Minute).UnixMilli(),
	}
	for id, tick := range want {
		var ev eventDetailRow
		decodeStrict(t, mustRun(t, dir, "event", id, "--json"), &ev)
		if ev.AvailableAt != tick || ev.State != "pending" {
			t.Errorf("event %s: %s, available at %d; want pending, available at %d", id, ev.State, ev.AvailableAt, tick)
		}
	}
	var evs []eventRow
	decodeStrict(t, mustRun(t, dir, "events", "--flow", "f", "--json"), &evs)
	if len(evs) != 3 {
		t.Fatalf("flow f has %d events, want 3 (the refusals wrote nothing)", len(evs))
	}
}

// TestPruneReceiver: `prune receiver --retention D` deletes the receipts
// accepted more than D before this machine's clock, --dry-run counts them
// first, and a redelivery of a pruned receipt's event is answered Pruned
// (docs/contract.md §7.9).
func TestPruneReceiver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	accepted := t0
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"), receiverstore.WithNow(func() time.Time { return accepted }))
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range []receiver.Message{
		{ID: "m1", Flow: "a", Seq: 1, Body: []byte(`{"delta":1}`)},
		{ID: "m2", Flow: "a", Seq: 2, Body: []byte(`{"delta":1}`)},
		{ID: "m3", Flow: "a", Seq: 3, Body: []byte(`{"delta":1}`)},
	} {
		accepted = t0.Add(time.Duration(i) * time.Hour) // 12:00, 13:00, 14:00
		if _, err := r.Receive(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	wall := clock.NewManual(clock.Tick(t0.Add(3*time.Hour + 30*time.Minute).UnixMilli())) // 15:30
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"prune", "receiver"}, exitUsage, "--retention is required"},
		{[]string{"prune", "receiver", "--retention", "0s"}, exitUsage, "want a Go duration above 0"},
		{[]string{"prune", "receiver", "--retention", "2"}, exitUsage, "want a Go duration"},
		{[]string{"prune", "receiver", "--retention", "1h", "--batch", "0"}, exitUsage, "--batch 0: want 1..10000"},
		// Accepted before 13:30: m1 and m2.
		{[]string{"prune", "receiver", "--retention", "2h", "--dry-run"}, exitOK,
			"would prune 2 receipts accepted before 2026-12-01 13:30:00 UTC (retention 2h); dry run, nothing changed\n"},
		{[]string{"prune", "receiver", "--retention", "2h", "--batch", "1"}, exitOK,
			"pruned 2 receipts in 3 batches, accepted before 2026-12-01 13:30:00 UTC (retention 2h)\n"},
		{[]string{"prune", "receiver", "--retention", "2h", "--dry-run"}, exitOK, "would prune 0 receipts"},
	} {
		code, out, errs := runAt(t, dir, wall, tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
	var rep receiverPruneReport
	_, out, _ := runAt(t, dir, wall, "prune", "receiver", "--retention", "1h", "--json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Receipts != 1 || rep.DryRun {
		t.Fatalf("prune receiver --retention 1h --json = %q (%v), want 1 receipt (m3, 14:00) pruned", out, err)
	}
	r, err = receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Receive(ctx, receiver.Message{ID: "m2", Flow: "a", Seq: 2, Body: []byte(`{"delta":1}`)})
	if err != nil || got != receiver.Pruned {
		t.Fatalf("redelivery of pruned m2 = %v, %v; want %s", got, err, receiver.Pruned)
	}
	total, err := r.Total(ctx, "a")
	if err != nil || total != 3 {
		t.Fatalf("total of flow a = %d, %v; want 3 kept", total, err)
	}
}

// writeFile writes text to path.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRelayPruneEvery: `relay --prune-every D` prunes what the policy's
// retention no longer keeps (relay.Options.PruneEvery, whose first pass
// is at the start), and explicit policy flags keep the recorded retention.
func TestRelayPruneEvery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, queuestore.Event{ID: "old", Flow: "f", Body: []byte(`{"delta": 1}`)}, 1); err != nil {
		t.Fatal(err)
	}
	c, ok, err := q.Claim(ctx, 2)
	if err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	if _, err := q.Settle(ctx, c.EventID, c.Generation, queuestore.Result{OK: true}, 2); err != nil {
		t.Fatal(err)
	}
	p := queuestore.DefaultPolicy()
	p.Retention = 1
	if err := q.SetPolicy(ctx, p, "keep one tick", 2); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if code, out, errs := runAt(t, dir, clock.Wall{}, "relay", "--exit-when-idle", "--prune-every", "1h", "--lease", "30s"); code != exitOK {
		t.Fatalf("relay: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runAt(t, dir, clock.Wall{}, "event", "old"); code != exitFail || !strings.Contains(errs, "not found") {
		t.Fatalf("event old after relay --prune-every: exit %d, %s; want it pruned", code, errs)
	}
	var pol policyFullRow
	decodeStrict(t, mustRun(t, dir, "policy", "--json"), &pol)
	if pol.Retention != 1 || pol.Lease != 30_000 {
		t.Fatalf("policy after relay --lease 30s = %+v, want lease 30000 and retention 1 kept", pol)
	}
}
