package queue_test

import (
	"fmt"

	"github.com/fairrelay/fairrelay/queue"
)

// The default policy's backoff: 2 after the first failure, 4 after the
// second, capped at 8.
func ExamplePolicy_Backoff() {
	p := queue.DefaultPolicy()
	fmt.Println(p.Backoff(1), p.Backoff(2), p.Backoff(3), p.Backoff(4))
	// Output: 2 4 8 8
}
