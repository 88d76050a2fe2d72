package clock_test

import (
	"errors"
	"fmt"

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
