package console

import (
	"html/template"
	"strconv"
	"time"

	"github.com/fairrelay/fairrelay/clock"
)

// timeFuncs are the template functions that show ticks: at (one tick, or
// a *clock.Tick that may be nil), when (a tick in a sentence) and span (a number of ticks), as numbers
// on a logical queue and as wall-clock times and durations on a queue run
// in real time (Options.RealTime).
//
// wall shows a wall-clock time.Time (a relay's breaker times, which are
// the relay's clock whatever the queue's) as a UTC date-time with how long
// ago it was, on every queue.
func (c *console) timeFuncs() template.FuncMap {
	now := c.o.WallNow
	if now == nil {
		now = time.Now
	}
	wall := func(t time.Time) string { return clock.WallText(clock.Tick(t.UnixMilli()), now()) }
	if !c.o.RealTime {
		return template.FuncMap{"wall": wall}
	}
	return template.FuncMap{
		"wall": wall,
		"at": func(t any) string {
			tick, ok := tickOf(t)
			if !ok {
				return "–"
			}
			return clock.WallText(tick, now())
		},
		"when": func(t clock.Tick) string { return clock.WallText(t, now()) },
		"span": func(t clock.Tick) string { return clock.DurationText(time.Duration(t) * time.Millisecond) },
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
