package main

import (
	"context"
	"fmt"
	"strconv"
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

// tickValue is a flag holding a tick of 0 or more (--skew).
type tickValue struct{ t *clock.Tick }

func (v tickValue) String() string {
	if v.t == nil {
		return ""
	}
	return strconv.FormatInt(int64(*v.t), 10)
}

func (v tickValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want milliseconds, 0 or more, got %q", s)
	}
	*v.t = clock.Tick(n)
	return nil
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
	cfg := clockConfig{mode: clockLogical}
	if now.clock != nil {
		cfg = *now.clock
	}
	if cfg.mode == clockLogical && now.set {
		return now.tick, nil
	}
	st, err := q.Stats(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the clock mark: %w", err)
	}
	mark := clock.Tick(st.ClockMark)
	wall := cfg.mode == clockWall || cfg.mode == clockAuto && mark >= wallFloor
	if !wall {
		if now.set {
			return now.tick, nil
		}
		return mark, nil
	}
	if err := q.UseRealTime(cfg.wall, cfg.skew, !now.set); err != nil {
		return 0, fmt.Errorf("reopen the queue in real time: %w", err)
	}
	if now.set {
		return now.tick, nil
	}
	return cfg.wall.Now(), nil
}

// wallTime formats a tick of Unix milliseconds for a message.
func wallTime(t clock.Tick) string {
	return time.UnixMilli(int64(t)).UTC().Format("2006-01-02T15:04:05.000Z")
}
