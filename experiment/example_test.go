package experiment_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/experiment"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// One relay step: claim the head, deliver it, settle it.
func ExampleRelay_Step() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "relay-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		panic(err)
	}
	defer q.Close()
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		panic(err)
	}
	defer r.Close()

	if _, err := q.Enqueue(ctx, experiment.Ev("a-1", "a", 5), 0); err != nil {
		panic(err)
	}
	relay := &experiment.Relay{Queue: q, Receiver: r}
	st, ok, err := relay.Step(ctx, 1)
	fmt.Println(ok, err)
	fmt.Println(st)
	_, ok, _ = relay.Step(ctx, 1)
	fmt.Println(ok)
	// Output:
	// true <nil>
	// claim a-1 (a#1) ticket 1 gen 1 attempt 1 lease 6 -> accepted -> acked
	// false
}

// Running a scenario: its checks, then both stores' snapshots.
func ExampleRun() {
	s := experiment.Scenario{
		Name:   "one-event",
		Clause: "§2.1",
		Shows:  "an enqueue",
		Run: func(ctx context.Context, lab *experiment.Lab) error {
			q, err := lab.Queue()
			if err != nil {
				return err
			}
			got, err := q.Enqueue(ctx, experiment.Ev("a-1", "a", 5), 0)
			lab.Equal("seq of the first event", got.Seq, int64(1))
			return err
		},
	}
	dir, err := os.MkdirTemp("", "run-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	res := experiment.Run(context.Background(), s, dir)
	fmt.Println(res.Name, res.Passed)
	for _, c := range res.Checks {
		fmt.Println(c.Name, c.Passed, c.Detail)
	}
	// Output:
	// one-event true
	// seq of the first event true 1
	// queue.db integrity_check true ok
	// receiver.db integrity_check true ok
}
