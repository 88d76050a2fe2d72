package queuestore

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// openTest opens a new store in a fresh temporary directory, closed at the
// end of the test.
func openTest(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%q) error = %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
	})
	return s, path
}

// openMem is openTest on a memory file system when there is one (see
// memTempDir): for the fuzz targets, which open a store per input.
func openMem(t testing.TB) *Store {
	t.Helper()
	path := filepath.Join(memTempDir(t), "queue.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q) error = %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
	})
	return s
}

func snap(t testing.TB, s *Store) Snapshot {
	t.Helper()
	sn, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() error = %v", err)
	}
	return sn
}

// jsonOf renders v as indented JSON for got/want messages.
func jsonOf(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// assertUnchanged fails unless after equals before (the whole snapshot,
// clock mark included).
func assertUnchanged(t testing.TB, what string, before, after Snapshot) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed the store:\nbefore %s\nafter  %s", what, jsonOf(before), jsonOf(after))
	}
}

// assertOnlyMark fails unless after equals before with the clock mark set to
// mark.
func assertOnlyMark(t testing.TB, what string, before, after Snapshot, mark clock.Tick) {
	t.Helper()
	if after.ClockMark != mark {
		t.Fatalf("%s: clock mark = %d, want %d", what, after.ClockMark, mark)
	}
	before.ClockMark = mark
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed more than the clock mark:\nbefore %s\nafter  %s", what, jsonOf(before), jsonOf(after))
	}
}

func enqueue(t testing.TB, s *Store, id, flow, body string, now clock.Tick) Enqueued {
	t.Helper()
	r, err := s.Enqueue(context.Background(), Event{ID: id, Flow: flow, Body: []byte(body)}, now)
	if err != nil {
		t.Fatalf("Enqueue(%q, %q) error = %v", id, flow, err)
	}
	return r
}

func claim(t testing.TB, s *Store, now clock.Tick) (Claim, bool) {
	t.Helper()
	c, ok, err := s.Claim(context.Background(), now)
	if err != nil {
		t.Fatalf("Claim(%d) error = %v", now, err)
	}
	return c, ok
}

func mustClaim(t testing.TB, s *Store, now clock.Tick) Claim {
	t.Helper()
	c, ok := claim(t, s, now)
	if !ok {
		t.Fatalf("Claim(%d) ok = false, want a claim", now)
	}
	return c
}

func settle(t testing.TB, s *Store, id string, gen int64, r Result, now clock.Tick) Outcome {
	t.Helper()
	o, err := s.Settle(context.Background(), id, gen, r, now)
	if err != nil {
		t.Fatalf("Settle(%q, %d) error = %v", id, gen, err)
	}
	return o
}

func event(t testing.TB, s *Store, id string) EventState {
	t.Helper()
	e, err := s.Event(context.Background(), id)
	if err != nil {
		t.Fatalf("Event(%q) error = %v", id, err)
	}
	return e
}

func wantErr(t testing.TB, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s error = %v, want errors.Is %v", what, err, target)
		}
	}
}

// success is a successful Result.
var success = Result{OK: true}

// failure is a failed Result with the given reason.
func failure(reason string) Result { return Result{Reason: reason} }

// quarantine drives the head of the only ready flow through three failed
// attempts, starting at now, and returns the tick after.
func quarantineHead(t testing.TB, s *Store, now clock.Tick) (Claim, clock.Tick) {
	t.Helper()
	var c Claim
	for i := 1; i <= MaxAttempts; i++ {
		c = mustClaim(t, s, now)
		o := settle(t, s, c.EventID, c.Generation, failure("unavailable"), now)
		if i < MaxAttempts {
			if o != RetryScheduled {
				t.Fatalf("attempt %d outcome = %q, want %q", i, o, RetryScheduled)
			}
			now += Backoff(i)
		} else if o != Quarantined {
			t.Fatalf("attempt %d outcome = %q, want %q", i, o, Quarantined)
		}
	}
	return c, now
}

// memTempDir returns a fresh directory on a memory file system (/dev/shm)
// when the machine has one, else t.TempDir(). The randomized tests check the
// contract's logic over tens of thousands of short transactions; on tmpfs an
// fsync costs nothing, so they fit the test budget. The store runs exactly
// as anywhere else (same DSN, WAL, synchronous=FULL): only the medium
// differs. Durability is proven by the crash and multi-process tests, which
// use t.TempDir().
func memTempDir(t testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "queuestore-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}
