package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// wallMs is the fake wall clock of these tests: 2026-12-02T17:00:00Z in Unix
// milliseconds.
const wallMs clock.Tick = 1_796_230_800_000

// runAt runs relayctl in dir with a fake wall clock at wall.
func runAt(t *testing.T, dir string, wall clock.Source, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	e := newEnv(strings.NewReader(""), &out, &errb)
	e.dir = dir
	e.clock.wall = wall
	code = e.main(args)
	return code, out.String(), errb.String()
}

// clockMark reads the queue's clock mark through relayctl.
func clockMark(t *testing.T, dir string) int64 {
	t.Helper()
	var st statusReport
	decodeStrict(t, mustRun(t, dir, "status", "--json", "--receiver", ""), &st)
	return st.Stats.ClockMark
}

// TestWallClockRefusesTickFarAhead is the complaint: on a queue run
// in real time (its clock mark is Unix milliseconds), a --now in the wrong
// unit would move the mark so far ahead that every relay's write is refused
// from then on. relayctl opens such a queue in real time (auto mode), so the
// store refuses the tick (ErrTimeAhead, exit 1) and nothing changes.
func TestWallClockRefusesTickFarAhead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wall := clock.NewManual(wallMs)
	if code, _, errs := runAt(t, dir, wall, "enqueue", "--id", "e1", "--flow", "a", "--body", "x", "--clock", "wall"); code != exitOK {
		t.Fatalf("enqueue in wall-clock mode: exit %d, stderr %s", code, errs)
	}
	if got := clockMark(t, dir); got != int64(wallMs) {
		t.Fatalf("clock mark after a wall-clock enqueue = %d, want the fake clock %d", got, wallMs)
	}
	for _, tc := range []struct {
		name string
		now  clock.Tick
	}{
		{"microseconds", wallMs * 1000},
		{"one skew and a tick ahead", wallMs + defaultSkew + 1},
	} {
		code, out, errs := runAt(t, dir, wall, "enqueue", "--id", "e2", "--flow", "a", "--body", "y", "--now", itoa(int64(tc.now)))
		if code != exitFail || out != "" {
			t.Fatalf("%s: enqueue at %d: exit %d, stdout %q; want 1 and nothing", tc.name, tc.now, code, out)
		}
		for _, want := range []string{"ahead of the wall clock", "In wall-clock mode a tick is Unix milliseconds"} {
			if !strings.Contains(errs, want) {
				t.Fatalf("%s: stderr %q, want it to contain %q", tc.name, errs, want)
			}
		}
	}
	if got := clockMark(t, dir); got != int64(wallMs) {
		t.Fatalf("clock mark after the refusals = %d, want %d unchanged", got, wallMs)
	}
	var evs []eventRow
	decodeStrict(t, mustRun(t, dir, "events", "--flow", "a", "--json"), &evs)
	if len(evs) != 1 {
		t.Fatalf("events after the refusals = %d, want 1", len(evs))
	}
	// Exactly the skew ahead is admitted.
	if code, _, errs := runAt(t, dir, wall, "enqueue", "--id", "e2", "--flow", "a", "--body", "y", "--now", itoa(int64(wallMs+defaultSkew))); code != exitOK {
		t.Fatalf("enqueue exactly the skew ahead: exit %d, stderr %s", code, errs)
	}
}

// TestWallClockActsAtTheClock: without --now, a write to a real-time queue
// acts at this machine's clock, not at the clock mark.
func TestWallClockActsAtTheClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wall := clock.NewManual(wallMs)
	if code, _, errs := runAt(t, dir, wall, "enqueue", "--id", "e1", "--flow", "a", "--body", "x", "--now", itoa(int64(wallMs))); code != exitOK {
		t.Fatalf("enqueue: exit %d, stderr %s", code, errs)
	}
	wall.Advance(60_000)
	code, out, errs := runAt(t, dir, wall, "enqueue", "--id", "e2", "--flow", "a", "--body", "y")
	if code != exitOK {
		t.Fatalf("enqueue: exit %d, stderr %s", code, errs)
	}
	if want := "at 2026-12-02 17:01:00 UTC, now (tick " + itoa(int64(wallMs+60_000)) + ")"; !strings.Contains(out, want) {
		t.Fatalf("stdout %q, want %q (the clock, a minute after the mark)", out, want)
	}
	if got := clockMark(t, dir); got != int64(wallMs+60_000) {
		t.Fatalf("clock mark = %d, want %d", got, wallMs+60_000)
	}
}

// TestWallClockBelowMarkWithinSkew: a relay on another machine wrote a tick
// half a second ahead of this machine's clock; relayctl's write at its own
// clock is performed at the mark (docs/contract.md §7.3), not refused.
func TestWallClockBelowMarkWithinSkew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	qpath := filepath.Join(dir, "queue.db")
	mustRun(t, dir, "enqueue", "--id", "e1", "--flow", "a", "--body", "x", "--now", itoa(int64(wallMs)))
	last := quarantine(t, qpath, "e1", wallMs+500, "unavailable")
	wall := clock.NewManual(last - 500)
	code, out, errs := runAt(t, dir, wall, "redrive", "e1", "--reason", "endpoint back")
	if code != exitOK {
		t.Fatalf("redrive 500 ms below the mark: exit %d, stderr %s", code, errs)
	}
	if want := "pending at 2026-12-02 17:00:00 UTC, now (tick " + itoa(int64(last)) + ")"; !strings.Contains(out, want) {
		t.Fatalf("stdout %q, want %q (performed at the mark)", out, want)
	}
	// Further below than the skew is a time regression, said in wall-clock
	// terms.
	if err := wall.Set(last - 500); err != nil {
		t.Fatal(err)
	}
	q, err := queuestore.Open(qpath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(context.Background(), queuestore.Event{ID: "e9", Flow: "z", Body: []byte("z")}, last+5000); err != nil {
		t.Fatal(err)
	}
	q.Close()
	code, _, errs = runAt(t, dir, wall, "enqueue", "--id", "e3", "--flow", "a", "--body", "z")
	if code != exitFail {
		t.Fatalf("enqueue 5.5 s below the mark: exit %d, want 1", code)
	}
	if want := "ahead of this machine's clock"; !strings.Contains(errs, want) {
		t.Fatalf("stderr %q, want it to contain %q", errs, want)
	}
}

// TestLogicalQueueKeepsRefusingRegression: auto mode leaves a logical queue
// (clock mark below 10^12) in logical time: a tick below the mark is refused,
// not moved to the mark, whatever --skew says.
func TestLogicalQueueKeepsRefusingRegression(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wall := clock.NewManual(wallMs)
	mustRun(t, dir, "enqueue", "--id", "e1", "--flow", "a", "--body", "x", "--now", "7")
	code, _, errs := runAt(t, dir, wall, "enqueue", "--id", "e2", "--flow", "a", "--body", "y", "--now", "6", "--skew", "100ms")
	if code != exitFail || !strings.Contains(errs, "tick 6 is below the queue's clock mark 7: logical time never goes back") {
		t.Fatalf("enqueue below the mark of a logical queue: exit %d, stderr %q; want 1 and the regression", code, errs)
	}
	// --clock wall on the same queue: within the skew, performed at the mark.
	code, _, errs = runAt(t, dir, wall, "enqueue", "--id", "e2", "--flow", "a", "--body", "y", "--now", "6", "--clock", "wall")
	if code != exitOK {
		t.Fatalf("enqueue with --clock wall: exit %d, stderr %s", code, errs)
	}
	var evs []eventRow
	decodeStrict(t, mustRun(t, dir, "events", "--flow", "a", "--json"), &evs)
	if len(evs) != 2 || evs[1].AvailableAt != 7 {
		t.Fatalf("events = %+v, want e2 available at the mark 7", evs)
	}
}

// TestTickOverflowRefused: a tick that a lease or backoff would push past
// the largest tick is refused in logical time too (docs/contract.md §7.3).
func TestTickOverflowRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustRun(t, dir, "enqueue", "--id", "e1", "--flow", "a", "--body", "x", "--now", "7")
	code, _, errs := runIn(t, dir, "enqueue", "--id", "e2", "--flow", "a", "--body", "y", "--now", "9223372036854775800", "--clock", "logical")
	if code != exitFail || !strings.Contains(errs, "tick out of range") {
		t.Fatalf("enqueue at an overflowing tick: exit %d, stderr %q; want 1 and tick out of range", code, errs)
	}
	if got := clockMark(t, dir); got != 7 {
		t.Fatalf("clock mark = %d, want 7 unchanged", got)
	}
}

// TestClockFlagsUsage: bad --clock and --skew values are usage errors.
func TestClockFlagsUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--clock", "sundial", "status"},
		{"enqueue", "--id", "e1", "--flow", "a", "--body", "x", "--clock", "sundial"},
		{"--skew", "-1", "status"},
		{"redrive", "e1", "--reason", "x", "--skew", "soon"},
	} {
		if code, _, _ := runIn(t, dir, args...); code != exitUsage {
			t.Fatalf("relayctl %s: exit %d, want %d", strings.Join(args, " "), code, exitUsage)
		}
	}
}

// TestWallClockBulkEnqueueFollowsClock: in wall-clock mode without --now,
// each chunk of a bulk enqueue acts at the clock when it is written, so a
// load that outlasts the skew while a relay writes at the clock is not
// refused half-way as a time regression.
func TestWallClockBulkEnqueueFollowsClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	qpath := filepath.Join(dir, "queue.db")
	mustRun(t, dir, "enqueue", "--id", "e0", "--flow", "r", "--body", "x", "--now", itoa(int64(wallMs)))
	wall := clock.NewManual(wallMs)
	var out, errb strings.Builder
	e := newEnv(strings.NewReader("{\"id\":\"e1\",\"flow\":\"a\",\"body\":1}\n{\"id\":\"e2\",\"flow\":\"a\",\"body\":2}\n{\"id\":\"e3\",\"flow\":\"a\",\"body\":3}\n"), &out, &errb)
	e.dir, e.clock.wall = dir, wall
	e.openQueueAt = openWrapped(func(l queueLib) queueLib { return relayMeanwhile{queueLib: l, t: t, path: qpath, wall: wall} })
	if code := e.main([]string{"enqueue", "--file", "-", "--chunk", "1"}); code != exitOK {
		t.Fatalf("bulk enqueue while a relay writes: exit %d, stderr %s", code, errb.String())
	}
	var evs []eventRow
	decodeStrict(t, mustRun(t, dir, "events", "--flow", "a", "--json"), &evs)
	var got []int64
	for _, ev := range evs {
		got = append(got, ev.AvailableAt-int64(wallMs))
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 5000 || got[2] != 10000 {
		t.Fatalf("chunks written at the clock + %v ms, want [0 5000 10000]", got)
	}
}

// relayMeanwhile is a queue where, after each EnqueueBatch, five seconds
// pass and another process writes at the clock.
type relayMeanwhile struct {
	queueLib
	t    *testing.T
	path string
	wall *clock.Manual
}

func (r relayMeanwhile) EnqueueBatch(ctx context.Context, evs []queue.Event, now clock.Tick) ([]queue.Enqueued, error) {
	res, err := r.queueLib.EnqueueBatch(ctx, evs, now)
	if err != nil {
		return res, err
	}
	r.wall.Advance(5000)
	q, err := queuestore.Open(r.path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Enqueue(ctx, queuestore.Event{ID: "relay-" + evs[0].ID, Flow: "r", Body: []byte("x")}, r.wall.Now()); err != nil {
		r.t.Fatal(err)
	}
	return res, nil
}
