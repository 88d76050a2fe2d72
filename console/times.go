package console

import (
	"fmt"
	"html/template"
	"strconv"
	"time"

	"github.com/fairrelay/fairrelay/clock"
)

// timeFuncs are the template functions that show ticks: at (one tick, or
// a *clock.Tick that may be nil), when (a tick in a sentence) and span (a number of ticks), as numbers
// on a logical queue and as wall-clock times and durations on a queue run
// in real time (Options.RealTime).
func (c *console) timeFuncs() template.FuncMap {
	if !c.o.RealTime {
		return template.FuncMap{}
	}
	now := c.o.WallNow
	if now == nil {
		now = time.Now
	}
	return template.FuncMap{
		"at": func(t any) string {
			tick, ok := tickOf(t)
			if !ok {
				return "–"
			}
			return wallAt(tick, now())
		},
		"when": func(t clock.Tick) string { return wallAt(t, now()) },
		"span": func(t clock.Tick) string { return duration(time.Duration(t) * time.Millisecond) },
	}
}

// tickOf reads a template argument as a tick: a clock.Tick, or a
// *clock.Tick (nil: ok is false).
func tickOf(t any) (clock.Tick, bool) {
	switch v := t.(type) {
	case clock.Tick:
		return v, true
	case *clock.Tick:
		if v == nil {
			return 0, false
		}
		return *v, true
	}
	return 0, false
}

// logicalAt shows a tick of a logical queue: its number ("–" for none).
func logicalAt(t any) string {
	tick, ok := tickOf(t)
	if !ok {
		return "–"
	}
	return strconv.FormatInt(int64(tick), 10)
}

// wallAt shows a tick of a queue run in real time (Unix milliseconds) as
// people read it: the UTC date-time to the second and how far it is from
// now ("3 min ago", "in 20 s", "now").
func wallAt(t clock.Tick, now time.Time) string {
	at := time.UnixMilli(int64(t)).UTC()
	d := now.Sub(at)
	rel := "now"
	switch {
	case d >= time.Second:
		rel = duration(d) + " ago"
	case d <= -time.Second:
		rel = "in " + duration(-d)
	}
	return at.Format("2006-01-02 15:04:05") + " UTC, " + rel
}

// duration shows d in its largest whole unit, rounded down: "850 ms",
// "20 s", "3 min", "2 h", "4 d".
func duration(d time.Duration) string {
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
