package soak_test

import (
	"fmt"

	"github.com/fairrelay/fairrelay/soak"
)

// A producer's batches are deterministic: a producer restarted after a
// SIGKILL re-sends the batch it may already have committed, and the
// queue answers with duplicates. Every PoisonEvery-th batch carries one
// injected failure, alone in its flow.
func ExampleProducer_Events() {
	p := soak.Producer{ID: 1, Seed: 42, Flows: 200, Batch: 3, PoisonEvery: 2}
	for k := 1; k <= 2; k++ {
		for _, e := range p.Events(k) {
			fmt.Println(e.ID, e.Flow, string(e.Body))
		}
	}
	// Output:
	// p1-b0000001-0000 f0148 {"delta":827}
	// p1-b0000001-0001 f0159 {"delta":403}
	// p1-b0000001-0002 f0170 {"delta":979}
	// p1-b0000002-0000 poison-p1-b2 {"delta":5000}
	// p1-b0000002-0001 f0006 {"delta":421}
	// p1-b0000002-0002 f0195 {"delta":845}
}
