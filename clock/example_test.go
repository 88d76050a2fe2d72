package clock_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/clock"
)

func ExampleMark() {
	var mark clock.Mark
	mark, _ = mark.Admit(4)
	_, err := mark.Admit(3)
	fmt.Println(mark, errors.Is(err, clock.ErrRegression))
	// Output: 4 true
}

func ExampleManual() {
	sched := clock.NewManual(0)
	sched.Advance(5)
	err := sched.Set(2)
	fmt.Println(sched.Now(), err != nil)
	// Output: 5 true
}

func ExampleMillis() {
	t := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	tick := clock.Millis(t)
	var src clock.Source = clock.NewManual(tick)
	fmt.Println(tick, src.Now().Time().UTC().Format(time.RFC3339Nano))
	// Output: 1767323045006 2026-01-02T03:04:05.006Z
}

func ExampleWallText() {
	enqueued := clock.Tick(time.Date(2026, 12, 4, 12, 0, 5, 0, time.UTC).UnixMilli())
	now := time.Date(2026, 12, 4, 12, 3, 15, 0, time.UTC)
	fmt.Println(clock.WallText(enqueued, now))
	fmt.Println(clock.DurationText(90 * time.Second))
	// Output:
	// 2026-12-04 12:00:05 UTC, 3 min ago
	// 1 min
}
