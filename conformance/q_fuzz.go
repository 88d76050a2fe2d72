package conformance

import (
	"context"
	"strings"
	"testing"
)

// FuzzQueue is the model clause with the fuzzer choosing every operation:
// each input's bytes pick up to 60 steps (enqueues, claims, settles,
// extensions, redrives, weights, time going backwards …) on a new store
// of b and its twin, and every step must agree with the reference model,
// as in Model_2_RandomSequencesMatchReference. A backend's fuzz test is
// one line: func FuzzQueueX(f *testing.F) { conformance.FuzzQueue(f, b) }.
func FuzzQueue(f *testing.F, b QueueBackend) {
	for _, seed := range [][]byte{
		{},
		{0, 0, 0, 0, 3, 8, 3, 8, 3, 8, 16, 0, 0},
		[]byte("enqueue claim settle redrive and time going backwards"),
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25},
		{9, 9, 9, 9, 200, 200, 200, 200, 7, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			data = data[:400]
		}
		ctx := context.Background()
		st := &seqTB{TB: t} // the stores on /dev/shm, as a model sequence's
		defer st.done()
		c := &byteChooser{data: data}
		r := &runner{s: b.open(st), twin: b.open(st), m: newModel(), c: c}
		for i := 0; !c.empty() && i < 60; i++ {
			if err := r.step(ctx); err != nil {
				t.Fatalf("step %d: %v\nsteps:\n  %s", i, err, strings.Join(r.log, "\n  "))
			}
		}
	})
}
