package demo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/console/internal/demo"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// Seed a new queue and receiver, and count what it left quarantined.
func ExampleSeed() {
	dir, _ := os.MkdirTemp("", "demo-example-")
	defer os.RemoveAll(dir)
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		panic(err)
	}
	defer q.Close()
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"), receiverstore.WithMaxDelta(demo.MaxDelta))
	if err != nil {
		panic(err)
	}
	defer r.Close()
	ctx := context.Background()
	if _, err := demo.Seed(ctx, q, r); err != nil {
		panic(err)
	}
	reasons, err := q.QuarantinedReasons(ctx)
	if err != nil {
		panic(err)
	}
	for _, rc := range reasons {
		fmt.Println(rc.Reason, rc.Count)
	}
	cs, err := r.Conflicts(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("conflicts", len(cs))
	// Output:
	// unavailable 2
	// unsupported_delta 2
	// conflicts 1
}
