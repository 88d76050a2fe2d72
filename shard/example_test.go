package shard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/shard"
)

// A queue split into two SQLite files: labeled once, then opened and used
// as one queue.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "shards")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	var shards []queue.Store
	for i := 0; i < 2; i++ {
		s, err := queuestore.Open(filepath.Join(dir, fmt.Sprintf("queue-%d.db", i)))
		if err != nil {
			panic(err)
		}
		shards = append(shards, s)
	}
	if err := shard.Create(ctx, shards, "split the queue in two", 1); err != nil {
		panic(err)
	}
	q, err := shard.Open(ctx, shards, shard.Options{CloseShards: true})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	for _, f := range []string{"orders/1", "orders/2", "tenant-1"} {
		if _, err := q.Enqueue(ctx, queue.Event{ID: "e-" + f, Flow: f, Body: []byte(`{}`)}, 2); err != nil {
			panic(err)
		}
		fmt.Printf("flow %s is in shard %d\n", f, shard.Of(f, q.Count()))
	}
	c, _, err := q.Claim(ctx, 3)
	if err != nil {
		panic(err)
	}
	o, err := q.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, 3)
	if err != nil {
		panic(err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Flow, o, "flows:", st.Flows, "acked:", st.Events.Acked)
	// A process that opens the files as another number of shards is refused.
	_, err = shard.Open(ctx, shards[:1], shard.Options{})
	fmt.Println(err != nil)
	// Output:
	// flow orders/1 is in shard 0
	// flow orders/2 is in shard 1
	// flow tenant-1 is in shard 1
	// orders/1 acked flows: 3 acked: 1
	// true
}
