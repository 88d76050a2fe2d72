package queuestore

import (
	"context"
	"math"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// every write of the store at now, for the tick rules that apply to all of
// them. Each returns the write's error.
func everyWrite(s *Store) map[string]func(now clock.Tick) error {
	ctx := context.Background()
	return map[string]func(now clock.Tick) error{
		"Enqueue": func(now clock.Tick) error {
			_, err := s.Enqueue(ctx, Event{ID: "new", Flow: "n", Body: []byte("x")}, now)
			return err
		},
		"EnqueueBatch": func(now clock.Tick) error {
			_, err := s.EnqueueBatch(ctx, []Event{{ID: "new", Flow: "n", Body: []byte("x")}}, now)
			return err
		},
		"Claim": func(now clock.Tick) error { _, _, err := s.Claim(ctx, now); return err },
		"ClaimBatch": func(now clock.Tick) error {
			_, err := s.ClaimBatch(ctx, now, 4)
			return err
		},
		"Settle": func(now clock.Tick) error {
			_, err := s.Settle(ctx, "a1", 1, success, now)
			return err
		},
		"SettleBatch": func(now clock.Tick) error {
			_, err := s.SettleBatch(ctx, []SettleItem{{EventID: "a1", Generation: 1, Result: success}}, now)
			return err
		},
		"Extend": func(now clock.Tick) error { _, err := s.Extend(ctx, "a1", 1, now); return err },
		"ExtendBatch": func(now clock.Tick) error {
			_, err := s.ExtendBatch(ctx, []ExtendItem{{EventID: "a1", Generation: 1}}, now)
			return err
		},
		"Redrive": func(now clock.Tick) error { return s.Redrive(ctx, "q1", 3, "r", now) },
		"RedriveAll": func(now clock.Tick) error {
			_, err := s.RedriveAll(ctx, RedriveFilter{}, "r", now)
			return err
		},
		"SetPolicy": func(now clock.Tick) error { return s.SetPolicy(ctx, DefaultPolicy(), "r", now) },
	}
}

// loadForTicks makes a store with an in-flight a1 (generation 1) and a
// quarantined q1 (generation 3), clock mark at 100.
func loadForTicks(t *testing.T, s *Store) {
	t.Helper()
	enqueue(t, s, "q1", "q", "x", 0)
	quarantineHead(t, s, 0)
	enqueue(t, s, "a1", "a", "x", 100)
	if c := mustClaim(t, s, 100); c.EventID != "a1" || c.Generation != 1 {
		t.Fatalf("claim = %s, want a1 generation 1", jsonOf(c))
	}
}

// §7.3: in every mode, a tick whose lease or backoff would overflow int64
// is ErrTickOverflow and changes nothing: `--now 9223372036854775807` no
// longer reaches a CHECK constraint. A negative tick is ErrTickOverflow and
// still ErrTimeRegression. queue.Policy.MaxTick itself is accepted.
func TestTime_7_3_TickOverflowRefusedEverywhere(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"logical", "real time"} {
		var opts []Option
		if mode == "real time" {
			opts = append(opts, WithRealTime(clock.NewManual(math.MaxInt64), 10))
		}
		s, _ := openTest(t, opts...)
		loadForTicks(t, s)
		before := snap(t, s)
		max := DefaultPolicy().MaxTick()
		if max != math.MaxInt64-8 {
			t.Fatalf("MaxTick() = %d, want MaxInt64 - BackoffCap", max)
		}
		for name, write := range everyWrite(s) {
			for _, now := range []clock.Tick{math.MaxInt64, max + 1} {
				wantErr(t, mode+" "+name+" at an overflowing tick", write(now), ErrTickOverflow)
			}
			wantErr(t, mode+" "+name+" at a negative tick", write(-1), ErrTickOverflow, ErrTimeRegression)
		}
		assertUnchanged(t, mode+" overflowing ticks", before, snap(t, s))
		if _, err := s.ClaimBatch(context.Background(), max, 1); err != nil {
			t.Fatalf("%s: ClaimBatch(MaxTick) error = %v", mode, err)
		}
	}
}

// §7.3: a larger Lease lowers MaxTick: the check uses the recorded policy.
func TestTime_7_3_TickOverflowUsesPolicy(t *testing.T) {
	t.Parallel()
	p := Policy{Lease: 1 << 40, MaxAttempts: 3, BackoffBase: 2, BackoffCap: 8}
	s, _ := openTest(t, WithPolicy(p))
	_, err := s.Enqueue(context.Background(), Event{ID: "a", Flow: "a", Body: []byte("x")}, math.MaxInt64-(1<<40)+1)
	wantErr(t, "Enqueue past MaxTick", err, ErrTickOverflow)
	enqueue(t, s, "a", "a", "x", p.MaxTick())
}

// §7.3: in real time, a tick at most skew below the mark is performed at
// the mark (the lease is counted from the mark); further below is
// ErrTimeRegression; above the wall clock plus skew is ErrTimeAhead and the
// mark does not move.
func TestTime_7_3_RealTimeSkew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wall := clock.NewManual(1_000_000)
	s, _ := openTest(t, WithRealTime(wall, 50))
	enqueue(t, s, "a1", "a", "x", 1_000_000)
	enqueue(t, s, "b1", "b", "x", 1_000_000)
	// A worker read the clock at 999_960, before another's write at 1_000_000.
	c, ok, err := s.Claim(ctx, 999_960)
	if err != nil || !ok {
		t.Fatalf("Claim(40 below the mark) = %v, %v", ok, err)
	}
	if c.LeaseUntil != 1_000_000+Lease {
		t.Fatalf("LeaseUntil = %d, want the mark + Lease = %d", c.LeaseUntil, 1_000_000+Lease)
	}
	if sn := snap(t, s); sn.ClockMark != 1_000_000 {
		t.Fatalf("clock mark = %d, want it unchanged at 1000000", sn.ClockMark)
	}
	// Exactly skew below is still at the mark; one more is a regression.
	if _, _, err := s.Claim(ctx, 1_000_000-50); err != nil {
		t.Fatalf("Claim(skew below) error = %v", err)
	}
	before := snap(t, s)
	_, _, err = s.Claim(ctx, 1_000_000-51)
	wantErr(t, "Claim(skew+1 below)", err, ErrTimeRegression)
	// The ms-by-mistake caller: far ahead of the wall clock.
	_, err = s.Enqueue(ctx, Event{ID: "x", Flow: "x", Body: []byte("x")}, 1_000_000*1000)
	wantErr(t, "Enqueue far ahead", err, ErrTimeAhead)
	_, err = s.Enqueue(ctx, Event{ID: "x", Flow: "x", Body: []byte("x")}, 1_000_051)
	wantErr(t, "Enqueue skew+1 ahead", err, ErrTimeAhead)
	assertUnchanged(t, "refused real-time writes", before, snap(t, s))
	// Exactly skew ahead is fine, and everyone else goes on.
	enqueue(t, s, "y", "y", "x", 1_000_050)
	wall.Advance(100)
	enqueue(t, s, "z", "z", "x", 1_000_090)
}

// Without WithRealTime, §2.6 is unchanged: one tick below the mark is
// ErrTimeRegression and a tick far ahead is accepted.
func TestTime_2_6_LogicalTimeUnchanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 10)
	_, _, err := s.Claim(ctx, 9)
	wantErr(t, "Claim below the mark", err, ErrTimeRegression)
	enqueue(t, s, "b1", "b", "x", 1<<60)
}

// WithRealTime needs a source and a skew >= 0.
func TestTime_7_3_RealTimeOptionChecked(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]Option{
		"nil source":    WithRealTime(nil, 10),
		"negative skew": WithRealTime(clock.Wall{}, -1),
	} {
		_, err := Open(t.TempDir()+"/q.db", opt)
		wantErr(t, name, err, ErrInvalid)
	}
	s, _ := openTest(t, WithRealTime(clock.Wall{}, 0))
	now := clock.Wall{}.Now()
	enqueue(t, s, "a", "a", "x", now)
}

// §7.1: with Jitter, a failure schedules the retry at now + Delay(ID,
// generation, attempt).
func TestPolicy_7_1_SettleUsesJitter(t *testing.T) {
	t.Parallel()
	p := Policy{Lease: 100, MaxAttempts: 5, BackoffBase: 1000, BackoffCap: 30000, Jitter: true}
	s, _ := openTest(t, WithPolicy(p))
	enqueue(t, s, "evt-42", "a", "x", 0)
	now := clock.Tick(0)
	for k := 1; k <= 4; k++ {
		c := mustClaim(t, s, now)
		settle(t, s, "evt-42", c.Generation, failure("boom"), now+1)
		want := now + 1 + p.Delay("evt-42", c.Generation, k)
		if e := event(t, s, "evt-42"); e.AvailableAt != want {
			t.Fatalf("attempt %d: available at %d, want %d", k, e.AvailableAt, want)
		}
		now = want
	}
}
