package clock

import (
	"fmt"
	"time"
)

// WallFloor is the smallest tick read as a wall-clock time (Unix
// milliseconds, 2001-09-09 UTC): a queue whose clock mark is at least
// WallFloor is run in real time. A logical queue's ticks stay far below.
const WallFloor Tick = 1_000_000_000_000

// WallText shows a tick of a queue run in real time (Unix milliseconds)
// as people read it: the UTC date-time to the second and how far it is
// from now ("2026-12-04 12:00:05 UTC, 3 min ago", "…, in 20 s", "…, now").
func WallText(t Tick, now time.Time) string {
	at := t.Time().UTC()
	d := now.Sub(at)
	rel := "now"
	switch {
	case d >= time.Second:
		rel = DurationText(d) + " ago"
	case d <= -time.Second:
		rel = "in " + DurationText(-d)
	}
	return at.Format("2006-01-02 15:04:05") + " UTC, " + rel
}

// DurationText shows d in its largest whole unit, rounded down: "850 ms",
// "20 s", "3 min", "2 h" (up to two days), "4 d".
func DurationText(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", d/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", d/time.Hour)
	}
	return fmt.Sprintf("%d d", d/(24*time.Hour))
}
