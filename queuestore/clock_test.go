package queuestore

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// docs/contract.md §2.6: every write (enqueue, claim, settle, redrive, and the batch
// forms) refuses a tick below the mark with ErrTimeRegression and changes
// nothing; the check comes before every other check but input validation.
func TestClock_2_6_EveryWriteRefusesRegression(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "q1", "q", "x", 0)
	q, now := quarantineHead(t, s, 0)
	enqueue(t, s, "a1", "a", "x", now)
	a := mustClaim(t, s, now)
	now += 2
	enqueue(t, s, "b1", "b", "x", now) // mark = now
	back := now - 1
	writes := map[string]func() error{
		"Enqueue new": func() error {
			_, err := s.Enqueue(ctx, Event{ID: "n1", Flow: "n", Body: []byte("x")}, back)
			return err
		},
		"Enqueue duplicate": func() error {
			_, err := s.Enqueue(ctx, Event{ID: "b1", Flow: "b", Body: []byte("x")}, back)
			return err
		},
		"Enqueue conflict": func() error {
			_, err := s.Enqueue(ctx, Event{ID: "b1", Flow: "b", Body: []byte("y")}, back)
			return err
		},
		"EnqueueBatch": func() error {
			_, err := s.EnqueueBatch(ctx, []Event{{ID: "n1", Flow: "n", Body: []byte("x")}}, back)
			return err
		},
		"Claim": func() error { _, _, err := s.Claim(ctx, back); return err },
		"ClaimBatch": func() error {
			_, err := s.ClaimBatch(ctx, back, 3)
			return err
		},
		"Settle": func() error { _, err := s.Settle(ctx, "a1", a.Generation, success, back); return err },
		"Settle unknown event": func() error {
			_, err := s.Settle(ctx, "zz", 1, success, back)
			return err
		},
		"SettleBatch": func() error {
			_, err := s.SettleBatch(ctx, []SettleItem{{EventID: "a1", Generation: a.Generation, Result: success}}, back)
			return err
		},
		"Redrive":                  func() error { return s.Redrive(ctx, "q1", q.Generation, "r", back) },
		"Redrive stale generation": func() error { return s.Redrive(ctx, "q1", q.Generation+5, "r", back) },
		"Redrive not quarantined":  func() error { return s.Redrive(ctx, "a1", a.Generation, "r", back) },
		"Negative tick":            func() error { _, _, err := s.Claim(ctx, -1); return err },
	}
	for name, write := range writes {
		before := snap(t, s)
		err := write()
		wantErr(t, name+" at a past tick", err, ErrTimeRegression, clock.ErrRegression)
		assertUnchanged(t, name+" at a past tick", before, snap(t, s))
	}
	// Input validation still comes first.
	_, err := s.Enqueue(ctx, Event{ID: "", Flow: "n", Body: []byte("x")}, back)
	wantErr(t, "invalid Enqueue at a past tick", err, ErrInvalid)
	err = s.Redrive(ctx, "q1", q.Generation, "", back)
	wantErr(t, "Redrive without reason at a past tick", err, ErrEmptyReason)
}

// docs/contract.md §2.6: equal ticks are fine, and every write that returns without
// error records its tick: duplicates, empty claims, stale and expired
// settles included.
func TestClock_2_6_SuccessfulWritesRecordTheirTick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	mark := func() clock.Tick { return snap(t, s).ClockMark }
	enqueue(t, s, "a1", "a", "x", 4)
	enqueue(t, s, "a2", "a", "x", 4) // equal tick
	if got := mark(); got != 4 {
		t.Fatalf("mark after enqueue = %d, want 4", got)
	}
	enqueue(t, s, "a1", "a", "x", 5) // duplicate
	if got := mark(); got != 5 {
		t.Fatalf("mark after a duplicate = %d, want 5", got)
	}
	c := mustClaim(t, s, 6)
	if _, ok := claim(t, s, 7); ok {
		t.Fatalf("Claim(7) ok = true, want false")
	}
	if got := mark(); got != 7 {
		t.Fatalf("mark after an empty claim = %d, want 7", got)
	}
	if o := settle(t, s, "a1", c.Generation+1, success, 8); o != Stale {
		t.Fatalf("Settle = %q, want stale", o)
	}
	if got := mark(); got != 8 {
		t.Fatalf("mark after a stale settle = %d, want 8", got)
	}
	if o := settle(t, s, "a1", c.Generation, success, c.LeaseUntil+1); o != Expired {
		t.Fatalf("Settle = %q, want expired", o)
	}
	if got := mark(); got != c.LeaseUntil+1 {
		t.Fatalf("mark after an expired settle = %d, want %d", got, c.LeaseUntil+1)
	}
	if _, err := s.SettleBatch(ctx, nil, 30); err != nil {
		t.Fatalf("SettleBatch(empty) error = %v", err)
	}
	if got := mark(); got != 30 {
		t.Fatalf("mark after an empty SettleBatch = %d, want 30", got)
	}
}

// docs/contract.md §2.6: a write that fails does not record its tick.
func TestClock_2_6_FailedWritesDoNotRecordTheirTick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 1)
	if _, err := s.Enqueue(ctx, Event{ID: "a1", Flow: "b", Body: []byte("x")}, 9); err == nil {
		t.Fatalf("Enqueue(conflict) error = nil, want ErrConflict")
	}
	if _, err := s.Settle(ctx, "nope", 1, success, 9); err == nil {
		t.Fatalf("Settle(unknown) error = nil, want ErrNotFound")
	}
	if err := s.Redrive(ctx, "a1", 0, "r", 9); err == nil {
		t.Fatalf("Redrive(pending) error = nil, want ErrNotQuarantined")
	}
	if got := snap(t, s).ClockMark; got != 1 {
		t.Fatalf("mark = %d, want 1", got)
	}
}
