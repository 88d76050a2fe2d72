package relay

import (
	"fmt"
	"math"
	"sync"

	"github.com/fairrelay/fairrelay/clock"
)

// MovingSource is a clock.Source that tells when it moves. The relay waits
// for ticks of such a source by watching Moved instead of sleeping, so that a
// test that moves the clock by hand drives leases, backoffs and due times
// without wall-clock waits. With any other source, ticks are Unix
// milliseconds (clock.Wall) and the relay sleeps in real time.
type MovingSource interface {
	clock.Source
	// Moved returns a channel that is closed the next time the tick changes.
	Moved() <-chan struct{}
}

// ManualClock is a MovingSource for tests: a logical clock moved by hand,
// safe for concurrent use (clock.Manual is not). It never goes backwards.
type ManualClock struct {
	mu    sync.Mutex
	now   clock.Tick
	moved chan struct{}
}

// NewManualClock returns a clock that starts at start.
func NewManualClock(start clock.Tick) *ManualClock {
	return &ManualClock{now: start, moved: make(chan struct{})}
}

// Now returns the current tick.
func (m *ManualClock) Now() clock.Tick {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Moved returns a channel closed at the next Advance or Set that changes the tick.
func (m *ManualClock) Moved() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.moved
}

// Advance moves the clock forward by d ticks and returns the new tick. It
// panics when d is negative or would carry the tick past math.MaxInt64 (a
// programmer error, as in clock.Manual).
func (m *ManualClock) Advance(d clock.Tick) clock.Tick {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d < 0 || m.now > math.MaxInt64-d {
		panic(fmt.Sprintf("relay: ManualClock.Advance(%d) from %d: negative step or past the largest tick", d, m.now))
	}
	m.move(m.now + d)
	return m.now
}

// Set moves the clock to t. A t below the current tick is refused with an
// error wrapping clock.ErrRegression and the clock stays where it was.
func (m *ManualClock) Set(t clock.Tick) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t < m.now {
		return fmt.Errorf("%w: Set(%d) is before the current tick %d", clock.ErrRegression, t, m.now)
	}
	m.move(t)
	return nil
}

func (m *ManualClock) move(t clock.Tick) {
	if t == m.now {
		return
	}
	m.now = t
	close(m.moved)
	m.moved = make(chan struct{})
}
