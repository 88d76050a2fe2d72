package clock

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Tick is one instant of logical time. Larger is later; equal ticks are the
// same instant.
type Tick int64

// ErrRegression reports a tick below one already recorded or reached.
var ErrRegression = errors.New("clock: time went backwards")

// Mark is the highest tick a store has recorded. Its zero value is the mark of
// a store that has recorded nothing yet.
type Mark Tick

// Admit checks now against the mark. It returns the new mark, the larger of m
// and now, or an error wrapping [ErrRegression] when now is below m. Equal ticks
// are admitted.
func (m Mark) Admit(now Tick) (Mark, error) {
	if now < Tick(m) {
		return m, fmt.Errorf("%w: tick %d is below the recorded mark %d", ErrRegression, now, m)
	}
	return Mark(now), nil
}

// Manual is a schedule that a test moves by hand. It never goes backwards.
// A Manual is not safe for concurrent use.
type Manual struct {
	now Tick
}

// NewManual returns a schedule that starts at start.
func NewManual(start Tick) *Manual {
	return &Manual{now: start}
}

// Now returns the schedule's current tick.
func (m *Manual) Now() Tick { return m.now }

// Advance moves the schedule forward by d ticks and returns the new tick.
// It panics when d is negative or would carry the tick past
// math.MaxInt64 (wrapping below it): moving backwards is a programmer
// error, and [Manual.Set] is the way to try a given tick.
func (m *Manual) Advance(d Tick) Tick {
	if d < 0 || m.now > math.MaxInt64-d {
		panic(fmt.Sprintf("clock: Advance(%d) from %d: negative step or past the largest tick", d, m.now))
	}
	m.now += d
	return m.now
}

// Set moves the schedule to t. A t below the current tick is refused with an
// error wrapping [ErrRegression] and the schedule stays where it was.
func (m *Manual) Set(t Tick) error {
	if t < m.now {
		return fmt.Errorf("%w: Set(%d) is before the current tick %d", ErrRegression, t, m.now)
	}
	m.now = t
	return nil
}

// Source tells the current tick. [*Manual] and [Wall] are sources.
type Source interface {
	Now() Tick
}

// Wall is a [Source] that reads the wall clock in Unix milliseconds:
// Wall{}.Now() is Millis(time.Now()). Use it (or ticks made by [Millis]) when
// ticks are real time; every process that writes one store must then use
// milliseconds of the Unix epoch.
type Wall struct{}

// Now returns the current wall-clock time in Unix milliseconds.
func (Wall) Now() Tick { return Millis(time.Now()) }

// Millis returns t as a tick in Unix milliseconds.
func Millis(t time.Time) Tick { return Tick(t.UnixMilli()) }

// Time returns the instant of a tick in Unix milliseconds (the inverse of
// [Millis], to the millisecond). It means nothing for logical ticks.
func (t Tick) Time() time.Time { return time.UnixMilli(int64(t)) }
