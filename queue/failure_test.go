package queue

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fairrelay/fairrelay/clock"
)

func TestScheduleBackoffAndValidate(t *testing.T) {
	p := DefaultPolicy().WithSchedule(5, 30, 120)
	if p.MaxAttempts != 4 {
		t.Fatalf("MaxAttempts = %d, want 4 (three waits plus one)", p.MaxAttempts)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[int]clock.Tick{1: 5, 2: 30, 3: 120, 4: 120, 9: 120} {
		if got := p.Backoff(k); got != want {
			t.Errorf("Backoff(%d) = %d, want %d", k, got, want)
		}
	}
	if p.LongestWait() != 120 || p.RetryAfterLimit() != 120 {
		t.Errorf("LongestWait %d, RetryAfterLimit %d, want 120 and 120", p.LongestWait(), p.RetryAfterLimit())
	}
	if got := p.MaxTick(); got != math.MaxInt64-120 {
		t.Errorf("MaxTick = %d, want MaxInt64-120", got)
	}
	if q := p.WithSchedule(); q.Schedule != nil || q.MaxAttempts != 4 {
		t.Errorf("WithSchedule() = %+v, want no schedule and MaxAttempts kept", q)
	}
	bad := []Policy{
		func() Policy { q := p; q.MaxAttempts = 3; return q }(),
		DefaultPolicy().WithSchedule(5, 0),
		DefaultPolicy().WithSchedule(make([]clock.Tick, MaxPolicyAttempts)...),
		func() Policy { q := DefaultPolicy(); q.RetryAfterCap = -1; return q }(),
	}
	for _, b := range bad {
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", b, err)
		}
	}
}

func TestScheduleJitterInRange(t *testing.T) {
	p := DefaultPolicy().WithSchedule(10, 1000)
	p.Jitter = true
	for g := range int64(300) {
		for k := 1; k <= 2; k++ {
			if d := p.Delay("ev", g, k); d < 0 || d > p.Schedule[k-1] {
				t.Fatalf("Delay(ev, %d, %d) = %d outside [0, %d]", g, k, d, p.Schedule[k-1])
			}
		}
	}
}

func TestRetryDelay(t *testing.T) {
	p := DefaultPolicy() // waits 2, 4; limit 8
	cases := []struct {
		attempt    int
		retryAfter clock.Tick
		want       clock.Tick
	}{
		{1, 0, 2},   // no retry-after: the policy's delay
		{1, 1, 2},   // below the delay: the delay
		{1, 6, 6},   // above it: the retry-after
		{2, 100, 8}, // capped by the longest wait
	}
	for _, c := range cases {
		if got := p.RetryDelay("e", 1, c.attempt, c.retryAfter); got != c.want {
			t.Errorf("RetryDelay(attempt %d, retry-after %d) = %d, want %d", c.attempt, c.retryAfter, got, c.want)
		}
	}
	p.RetryAfterCap = 50
	if got := p.RetryDelay("e", 1, 1, 100); got != 50 {
		t.Errorf("with RetryAfterCap 50: %d, want 50", got)
	}
	if got := p.MaxTick(); got != math.MaxInt64-50 {
		t.Errorf("MaxTick = %d, want MaxInt64-50 (the retry-after cap is the longest span)", got)
	}
}

func TestPolicyEqualAndJSON(t *testing.T) {
	a, b := DefaultPolicy(), DefaultPolicy()
	b.Fairness = ""
	if !a.Equal(b) {
		t.Error("an empty Fairness must equal FairMinServed")
	}
	if a.Equal(a.WithSchedule(2, 4)) || !a.WithSchedule(2, 4).Equal(a.WithSchedule(2, 4)) {
		t.Error("Equal must compare the schedule element by element")
	}
	raw, err := json.Marshal(DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	// The bytes audit rows always had: new fields are omitted when unset.
	if want := `{"lease":5,"max_attempts":3,"backoff_base":2,"backoff_cap":8,"jitter":false,"fairness":"min_served"}`; string(raw) != want {
		t.Errorf("default policy JSON = %s, want %s", raw, want)
	}
}

func TestErrorText(t *testing.T) {
	cases := map[string]string{
		"":                                 "",
		"dial tcp: connection refused":     "dial tcp: connection refused",
		"line one\nline two\ttabbed\r\n":   "line one line two tabbed",
		"bad \xff byte":                    "bad byte",
		"  spaced   out  ":                 "spaced out",
		"zero\u200bwidth and \x00 control": "zero width and control",
	}
	for in, want := range cases {
		got := ErrorText(in)
		if got != want {
			t.Errorf("ErrorText(%q) = %q, want %q", in, got, want)
		}
		if err := CheckErrorText(got); err != nil {
			t.Errorf("CheckErrorText(ErrorText(%q)): %v", in, err)
		}
	}
	long := ErrorText(strings.Repeat("é", MaxErrorLen))
	if len(long) > MaxErrorLen || !utf8.ValidString(long) || !strings.HasSuffix(long, "…") {
		t.Errorf("a long text is cut to %d bytes, valid %v, ending %q", len(long), utf8.ValidString(long), long[len(long)-6:])
	}
	if err := CheckErrorText(long); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{strings.Repeat("x", MaxErrorLen+1), "a\nb", "\xff"} {
		if err := CheckErrorText(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckErrorText(%q...) = %v, want ErrInvalid", bad[:min(len(bad), 8)], err)
		}
	}
	it := SettleItem{EventID: "e", Generation: 1, Result: Result{Reason: "unavailable", Error: "a\nb"}}
	if err := it.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a failure with a bad error text: %v, want ErrInvalid", err)
	}
	it.Result.Error, it.Result.RetryAfter = "fine", -1
	if err := it.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a negative retry-after: %v, want ErrInvalid", err)
	}
}
