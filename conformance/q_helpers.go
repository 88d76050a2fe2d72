package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/fairrelay/fairrelay/queue"
	"reflect"
	"strconv"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

func snap(t testing.TB, s Queue) queue.Snapshot {
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
func assertUnchanged(t testing.TB, what string, before, after queue.Snapshot) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed the store:\nbefore %s\nafter  %s", what, jsonOf(before), jsonOf(after))
	}
}

// assertOnlyMark fails unless after equals before with the clock mark set to
// mark.
func assertOnlyMark(t testing.TB, what string, before, after queue.Snapshot, mark clock.Tick) {
	t.Helper()
	if after.ClockMark != mark {
		t.Fatalf("%s: clock mark = %d, want %d", what, after.ClockMark, mark)
	}
	before.ClockMark = mark
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed more than the clock mark:\nbefore %s\nafter  %s", what, jsonOf(before), jsonOf(after))
	}
}

func enqueue(t testing.TB, s Queue, id, flow, body string, now clock.Tick) queue.Enqueued {
	t.Helper()
	r, err := s.Enqueue(context.Background(), queue.Event{ID: id, Flow: flow, Body: []byte(body)}, now)
	if err != nil {
		t.Fatalf("Enqueue(%q, %q) error = %v", id, flow, err)
	}
	return r
}

func claim(t testing.TB, s Queue, now clock.Tick) (queue.Claim, bool) {
	t.Helper()
	c, ok, err := s.Claim(context.Background(), now)
	if err != nil {
		t.Fatalf("Claim(%d) error = %v", now, err)
	}
	return c, ok
}

func mustClaim(t testing.TB, s Queue, now clock.Tick) queue.Claim {
	t.Helper()
	c, ok := claim(t, s, now)
	if !ok {
		t.Fatalf("Claim(%d) ok = false, want a claim", now)
	}
	return c
}

func settle(t testing.TB, s Queue, id string, gen int64, r queue.Result, now clock.Tick) queue.Outcome {
	t.Helper()
	o, err := s.Settle(context.Background(), id, gen, r, now)
	if err != nil {
		t.Fatalf("Settle(%q, %d) error = %v", id, gen, err)
	}
	return o
}

func event(t testing.TB, s Queue, id string) queue.EventState {
	t.Helper()
	e, err := s.Event(context.Background(), id)
	if err != nil {
		t.Fatalf("Event(%q) error = %v", id, err)
	}
	return e
}

func flowOf(t testing.TB, s Queue, flow string) queue.SnapshotFlow {
	t.Helper()
	for _, f := range snap(t, s).Flows {
		if f.Flow == flow {
			return f
		}
	}
	t.Fatalf("flow %q not in snapshot", flow)
	return queue.SnapshotFlow{}
}

func wantErr(t testing.TB, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s error = %v, want errors.Is %v", what, err, target)
		}
	}
}

// success is a successful queue.Result.
var success = queue.Result{OK: true}

// failure is a failed queue.Result with the given reason.
func failure(reason string) queue.Result { return queue.Result{Reason: reason} }

// quarantine drives the head of the only ready flow through three failed
// attempts, starting at now, and returns the tick after.
func quarantineHead(t testing.TB, s Queue, now clock.Tick) (queue.Claim, clock.Tick) {
	t.Helper()
	var c queue.Claim
	for i := 1; i <= queue.MaxAttempts; i++ {
		c = mustClaim(t, s, now)
		o := settle(t, s, c.EventID, c.Generation, failure("unavailable"), now)
		if i < queue.MaxAttempts {
			if o != queue.RetryScheduled {
				t.Fatalf("attempt %d outcome = %q, want %q", i, o, queue.RetryScheduled)
			}
			now += queue.Backoff(i)
		} else if o != queue.Quarantined {
			t.Fatalf("attempt %d outcome = %q, want %q", i, o, queue.Quarantined)
		}
	}
	return c, now
}

func itoa(i int) string { return strconv.Itoa(i) }

// capability is q as the capability interface C (queue.Pager,
// queue.SettleClaimer, …); the clause is skipped, naming what, when the
// backend does not have it.
func capability[C any](t *testing.T, q Queue, what string) C {
	t.Helper()
	c, ok := q.(C)
	if !ok {
		t.Skipf("the backend has no %s", what)
	}
	return c
}
