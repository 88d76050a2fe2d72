package inbox_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/inbox"
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
