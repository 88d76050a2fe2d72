package main

import (
	"context"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/clock"
)

// How a write reads time (--clock). See docs/decisions/relayctl-clock-mode.md.
const (
	// clockAuto is wall when the queue's clock mark is a Unix time in
	// milliseconds (wallFloor or later), logical otherwise.
	clockAuto clockMode = "auto"
	// clockLogical acts at --now or at the queue's clock mark, and opens the
	// queue in logical time (docs/contract.md §2.6).
	clockLogical clockMode = "logical"
	// clockWall acts at --now or at this machine's clock in Unix
	// milliseconds, and opens the queue in real time (docs/contract.md §7.3):
	// a tick further ahead of the clock than --skew is refused.
	clockWall clockMode = "wall"
)

// defaultSkew is --skew's default: a second. Writers of one file read the
// clock before they wait for the write turn, and a turn is rarely waited
// for longer than a few hundred milliseconds (docs/performance.md, the
// drains' longest write).
const defaultSkew clock.Tick = 1000

// wallFloor is the smallest clock mark auto mode takes for Unix
// milliseconds (clock.WallFloor): 10^12 ms is 2001-09-09T01:46:40Z. A
// logical queue would need a trillion ticks to reach it; a queue in Unix
// seconds reaches it in the year 33658.
const wallFloor = clock.WallFloor

// clockMode is --clock.
type clockMode string

func (m *clockMode) String() string {
	if m == nil || *m == "" {
		return string(clockAuto)
	}
	return string(*m)
}

func (m *clockMode) Set(s string) error {
	switch clockMode(s) {
	case clockAuto, clockLogical, clockWall:
		*m = clockMode(s)
		return nil
	}
	return fmt.Errorf("want auto, logical or wall, got %q", s)
}

// clockConfig is the environment's --clock and --skew, and the wall clock
// (a fake one in tests).
type clockConfig struct {
	mode clockMode
	skew clock.Tick
	wall clock.Source
}

// tickValue is --skew: a Go duration of 0 or more in whole milliseconds,
// held as ticks of wall-clock mode (Unix milliseconds).
type tickValue struct{ t *clock.Tick }

func (v tickValue) String() string {
	if v.t == nil {
		return ""
	}
	return shortDuration(time.Duration(*v.t) * time.Millisecond)
}

func (v tickValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 || d%time.Millisecond != 0 {
		return fmt.Errorf("want a Go duration of 0 or more in whole milliseconds, such as 1s or 500ms")
	}
	*v.t = clock.Tick(d / time.Millisecond)
	return nil
}

// wallAt reports whether the configuration reads time from the wall clock
// for a queue whose clock mark is mark: wall mode, or auto mode and a mark
// of Unix milliseconds (wallFloor or later).
func (c clockConfig) wallAt(mark clock.Tick) bool {
	return c.mode == clockWall || (c.mode == clockAuto || c.mode == "") && mark >= wallFloor
}

// currentTick is the tick a write acts at, and it switches q to real time
// when the clock mode says so (see docs/decisions/relayctl-clock-mode.md):
//   - logical: --now when given, otherwise the queue's clock mark;
//   - wall: --now when given, otherwise this machine's clock in Unix
//     milliseconds, read again by each write (each chunk of a bulk enqueue);
//     q is reopened in real time with the skew, so the store refuses a tick
//     too far ahead of the clock and performs one a little below the mark at
//     the mark;
//   - auto: wall when the clock mark is at least wallFloor, else logical.
func currentTick(ctx context.Context, q *queueDB, now tickFlag) (clock.Tick, error) {
	t, _, err := currentTime(ctx, q, now)
	return t, err
}

// currentTime is currentTick, and whether the write reads the wall clock
// (then a tick is a Unix millisecond and a policy's spans are durations:
// docs/decisions/relayctl-durations.md).
func currentTime(ctx context.Context, q *queueDB, now tickFlag) (clock.Tick, bool, error) {
	cfg := clockConfig{mode: clockLogical}
	if now.clock != nil {
		cfg = *now.clock
	}
	if cfg.mode == clockLogical && now.set {
		return now.tick, false, nil
	}
	st, err := q.Stats(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("read the clock mark: %w", err)
	}
	mark := clock.Tick(st.ClockMark)
	if !cfg.wallAt(mark) {
		if now.set {
			return now.tick, false, nil
		}
		return mark, false, nil
	}
	if err := q.UseRealTime(cfg.wall, cfg.skew, !now.set); err != nil {
		return 0, false, fmt.Errorf("reopen the queue in real time: %w", err)
	}
	if now.set {
		return now.tick, true, nil
	}
	return cfg.wall.Now(), true, nil
}

// wallTime formats a tick of Unix milliseconds for a message.
func wallTime(t clock.Tick) string {
	return time.UnixMilli(int64(t)).UTC().Format("2006-01-02T15:04:05.000Z")
}
