package inbox_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"

	"github.com/fairrelay/fairrelay/inbox"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/relay"
)

// A receiver server over receiver.db, and the relay's HTTP delivery to it:
// the same event delivered twice is applied once, a gap is refused.
func ExampleNewServer() {
	dir, err := os.MkdirTemp("", "inbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	secret := []byte("shared secret")
	srv := httptest.NewServer(inbox.NewServer(store, secret, inbox.ServerOptions{}))
	defer srv.Close()

	deliver, err := relay.NewHTTP(srv.URL, secret, relay.HTTPOptions{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, e := range []relay.Event{
		{ID: "ev-1", Flow: "tenant-a", Seq: 1, Body: []byte(`{"delta": 5}`)},
		{ID: "ev-1", Flow: "tenant-a", Seq: 1, Body: []byte(`{"delta": 5}`)}, // redelivered
		{ID: "ev-3", Flow: "tenant-a", Seq: 3, Body: []byte(`{"delta": 2}`)}, // ahead of seq 2
	} {
		fmt.Println(e.ID, deliver.Handle(ctx, e))
	}
	total, err := store.Total(ctx, "tenant-a")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("total", total)
	// Output:
	// ev-1 <nil>
	// ev-1 <nil>
	// ev-3 gap: 409 Conflict: gap
	// total 5
}

// Group commit for a relay that delivers in process: sixteen concurrent
// deliveries through one Batcher share receiver transactions, and each gets
// its own outcome, as its own Receive would give it.
func ExampleNewBatcher() {
	dir, err := os.MkdirTemp("", "inbox-batcher")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	b := inbox.NewBatcher(store, inbox.BatcherOptions{MaxBatch: 64})
	defer b.Close()
	h := relay.NewLocal(b) // the relay's Handler: relay.New(queue, h, ...)

	ctx := context.Background()
	var wg sync.WaitGroup
	for f := range 16 {
		wg.Go(func() {
			e := relay.Event{ID: fmt.Sprint("evt-", f), Flow: fmt.Sprint("flow-", f), Seq: 1, Body: []byte(`{"delta": 2}`)}
			if err := h.Handle(ctx, e); err != nil {
				log.Fatal(err)
			}
		})
	}
	wg.Wait()
	// The same event again is a duplicate: success, applied once.
	out, err := b.Receive(ctx, receiver.Message{ID: "evt-3", Flow: "flow-3", Seq: 1, Body: []byte(`{"delta": 2}`)})
	fmt.Println(out, err)
	// A gap fails only its own caller.
	out, err = b.Receive(ctx, receiver.Message{ID: "evt-x", Flow: "flow-3", Seq: 5, Body: []byte(`{"delta": 2}`)})
	fmt.Println(out, err)
	total, err := store.Total(ctx, "flow-3")
	fmt.Println(total, err)
	// Output:
	// duplicate <nil>
	// gap <nil>
	// 2 <nil>
}
