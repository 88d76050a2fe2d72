package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/fairrelay/fairrelay/clock"
)

// schedule turns an event's --at TIME or --in D (or an events file's "at"
// and "in" fields) into its not-before tick (docs/contract.md §7.9). Their
// forms follow the queue's clock, as a policy's spans do
// (docs/decisions/relayctl-durations.md): on a queue run in real time TIME
// is an RFC 3339 time (2026-12-04T20:00:00Z) or a tick of Unix
// milliseconds, and D a Go duration (90s, 2h); on a logical-time queue
// both are plain tick numbers. The other form is refused, naming the form
// wanted.
type schedule struct {
	wall bool       // the queue runs in real time: ticks are Unix ms
	now  clock.Tick // the tick of the enqueue, which --in counts from
}

// Errors of schedule; a flag's refusal is a usage error built on them.
var (
	errAtAndIn = errors.New(`give "at" or "in", not both`)
)

// atForm and inForm are what a refusal says is wanted.
func (s schedule) atForm() string {
	if s.wall {
		return "want an RFC 3339 time such as 2026-12-04T20:00:00Z (or a tick of Unix milliseconds); the queue runs in real time"
	}
	return "want a tick number such as 120; the queue runs in logical time, whose ticks are not dates (--clock wall to put it in real time)"
}

func (s schedule) inForm() string {
	if s.wall {
		return durationForm + "; the queue runs in real time"
	}
	return "want a tick count such as 5; the queue runs in logical time, which counts ticks, not seconds"
}

// maybeTime reports whether text is a TIME in one of the clock modes (a
// tick, or an RFC 3339 time): checked before the queue is opened, so that
// a mistyped --at creates nothing; at checks it against the queue's mode.
func maybeTime(text string) bool {
	if _, err := strconv.ParseInt(text, 10, 64); err == nil {
		return true
	}
	_, err := time.Parse(time.RFC3339Nano, text)
	return err == nil
}

// maybeSpan is maybeTime for --in's D.
func maybeSpan(text string) bool {
	_, err := parseSpan(text)
	return err == nil
}

// at reads TIME.
func (s schedule) at(text string) (clock.Tick, error) {
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		switch {
		case n < 0:
			return 0, errors.New("want a tick of 0 or more")
		case s.wall && clock.Tick(n) < wallFloor:
			return 0, errors.New(s.atForm())
		}
		return clock.Tick(n), nil
	}
	if !s.wall {
		return 0, errors.New(s.atForm())
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return 0, errors.New(s.atForm())
	}
	if t.UnixMilli() < int64(wallFloor) {
		return 0, fmt.Errorf("%s is before %s: %s", text, wallTime(wallFloor), s.atForm())
	}
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		return 0, errors.New("want whole milliseconds (a tick of a queue run in real time is a millisecond)")
	}
	return clock.Tick(t.UnixMilli()), nil
}

// in reads D, counted from the enqueue's tick.
func (s schedule) in(text string) (clock.Tick, error) {
	a, err := parseSpan(text)
	if err != nil {
		return 0, errors.New(s.inForm())
	}
	var n int64
	switch {
	case !a.dur && a.ticks == 0:
	case s.wall && !a.dur, !s.wall && a.dur:
		return 0, errors.New(s.inForm())
	case !s.wall:
		n = a.ticks
	case a.d%time.Millisecond != 0:
		return 0, errors.New("want whole milliseconds (a tick of a queue run in real time is a millisecond)")
	default:
		n = int64(a.d / time.Millisecond)
	}
	if n < 0 {
		return 0, errors.New("want 0 or more: an event cannot be scheduled in the past")
	}
	if n > math.MaxInt64-int64(s.now) {
		return 0, errors.New("too far: the tick would pass the largest tick")
	}
	return s.now + clock.Tick(n), nil
}

// notBefore is the not-before tick of an event whose at and in are given
// as text ("" when not given).
func (s schedule) notBefore(at, in string, atSet, inSet bool) (int64, error) {
	switch {
	case atSet && inSet:
		return 0, errAtAndIn
	case atSet:
		t, err := s.at(at)
		if err != nil {
			return 0, fmt.Errorf(`"at" %q: %w`, at, err)
		}
		return int64(t), nil
	case inSet:
		t, err := s.in(in)
		if err != nil {
			return 0, fmt.Errorf(`"in" %q: %w`, in, err)
		}
		return int64(t), nil
	}
	return 0, nil
}
