package clock

import (
	"testing"
	"time"
)

func TestWallText_SaysHowLongAgo(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{now, "2026-12-04 12:00:00 UTC, now"},
		{now.Add(-999 * time.Millisecond), "2026-12-04 11:59:59 UTC, now"},
		{now.Add(-20 * time.Second), "2026-12-04 11:59:40 UTC, 20 s ago"},
		{now.Add(-3*time.Minute - 59*time.Second), "2026-12-04 11:56:01 UTC, 3 min ago"},
		{now.Add(-5 * time.Hour), "2026-12-04 07:00:00 UTC, 5 h ago"},
		{now.Add(-72 * time.Hour), "2026-12-01 12:00:00 UTC, 3 d ago"},
		{now.Add(90 * time.Second), "2026-12-04 12:01:30 UTC, in 1 min"},
	} {
		if got := WallText(Millis(tc.at), now); got != tc.want {
			t.Errorf("WallText(%v) = %q, want %q", tc.at, got, tc.want)
		}
	}
	if got := DurationText(850 * time.Millisecond); got != "850 ms" {
		t.Errorf("DurationText(850ms) = %q", got)
	}
}
