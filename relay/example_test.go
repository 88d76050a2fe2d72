package relay_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
)

// Example runs a relay on a queue file with logical time: three events of
// one flow are handled in order, the second fails once and is retried after
// its backoff.
func Example() {
	dir, _ := os.MkdirTemp("", "relay-example")
	defer os.RemoveAll(dir)
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	ctx, cancel := context.WithCancel(context.Background())
	for i := 1; i <= 3; i++ {
		q.Enqueue(ctx, queuestore.Event{ID: fmt.Sprintf("order-%d", i), Flow: "customer-7", Body: []byte(`{"n":1}`)}, 0)
	}

	clk := relay.NewManualClock(0)
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(4)
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		defer wg.Done()
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("%s seq %d attempt %d\n", e.ID, e.Seq, e.Attempt)
		if e.Seq == 2 && e.Attempt == 1 {
			return relay.Fail("unavailable", nil)
		}
		return nil
	})
	r, _ := relay.New(q, h, relay.Options{Clock: clk})
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	for { // wait for the retry to be scheduled, then let its backoff pass
		if st, _ := q.Event(ctx, "order-2"); st.State == "pending" && st.Attempts == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	clk.Advance(queuestore.BackoffBase)
	wg.Wait()
	cancel()
	fmt.Println("run:", <-done)
	// Output:
	// order-1 seq 1 attempt 1
	// order-2 seq 2 attempt 1
	// order-2 seq 2 attempt 2
	// order-3 seq 3 attempt 1
	// run: <nil>
}
