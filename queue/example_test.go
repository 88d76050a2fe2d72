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

// A retry schedule (docs/contract.md §7.8): explicit waits instead of the
// doubling formula, one more attempt than waits, and a failure's
// retry-after honoured up to the longest wait.
func ExamplePolicy_WithSchedule() {
	p := queue.DefaultPolicy().WithSchedule(5_000, 30_000, 120_000)
	fmt.Println(p.MaxAttempts, p.Backoff(1), p.Backoff(3))
	fmt.Println(p.RetryDelay("ev-1", 1, 1, 60_000), p.RetryDelay("ev-1", 1, 1, 600_000))
	// Output:
	// 4 5000 120000
	// 60000 120000
}
