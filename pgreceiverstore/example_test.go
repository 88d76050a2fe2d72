package pgreceiverstore_test

import (
	"context"
	"fmt"
	"os"

	"github.com/fairrelay/fairrelay/pgreceiverstore"
	"github.com/fairrelay/fairrelay/receiver"
)

// A message is accepted once; its byte-identical repeat is a duplicate.
func Example() {
	url := os.Getenv("FAIRRELAY_POSTGRES")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	s, err := pgreceiverstore.Open(ctx, url, pgreceiverstore.WithSchema("example_receiver"))
	if err != nil {
		fmt.Println("no server:", err)
		return
	}
	defer s.Close()
	m := receiver.Message{ID: "evt-1", Flow: "conversation-7", Seq: 1, Body: []byte(`{"delta": 5}`)}
	o, _ := s.Receive(ctx, m)
	o2, _ := s.Receive(ctx, m)
	total, _ := s.Total(ctx, "conversation-7")
	// On a new schema this prints "accepted duplicate 5". (Not run by go
	// test: it needs a server and leaves its schema behind; the tests use
	// schemas of their own.)
	fmt.Println(o, o2, total)
}
