package receiverstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// A message delivered twice is applied once; a message ahead of its flow is
// a gap and changes nothing; a reused ID with another body is a conflict.
func Example() {
	dir, err := os.MkdirTemp("", "receiverstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	for _, m := range []receiverstore.Message{
		{ID: "ev-1", Flow: "agent-7", Seq: 1, Body: []byte(`{"delta": 5}`)},
		{ID: "ev-1", Flow: "agent-7", Seq: 1, Body: []byte(`{"delta": 5}`)}, // redelivered
		{ID: "ev-3", Flow: "agent-7", Seq: 3, Body: []byte(`{"delta": 2}`)}, // ahead
		{ID: "ev-2", Flow: "agent-7", Seq: 2, Body: []byte(`{"delta": 4}`)},
		{ID: "ev-2", Flow: "agent-7", Seq: 2, Body: []byte(`{"delta": 9}`)}, // ID reused
	} {
		out, err := s.Receive(ctx, m)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.ID, out)
	}
	total, err := s.Total(ctx, "agent-7")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("total", total)

	_, err = s.Receive(ctx, receiverstore.Message{ID: "ev-9", Flow: "agent-7", Seq: 3, Body: []byte(`{"delta": 1.5}`)})
	fmt.Println(err)
	// Output:
	// ev-1 accepted
	// ev-1 duplicate
	// ev-3 gap
	// ev-2 accepted
	// ev-2 conflict
	// total 9
	// receive: receiverstore: invalid body: not_an_integer: delta is "1.5", not an integer token (byte 10)
}

// ExampleWithMaxDelta: a delta above the receiver's capability changes
// nothing until the store is reopened with a higher cap; then the
// byte-identical message is accepted.
func ExampleWithMaxDelta() {
	dir, err := os.MkdirTemp("", "receiverstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "receiver.db")
	ctx := context.Background()
	m := receiverstore.Message{ID: "ev-1", Flow: "f", Seq: 1, Body: []byte(`{"delta": 50}`)}

	s, err := receiverstore.Open(path, receiverstore.WithMaxDelta(10))
	if err != nil {
		log.Fatal(err)
	}
	out, err := s.Receive(ctx, m)
	fmt.Println(out, err)
	s.Close()

	s, err = receiverstore.Open(path, receiverstore.WithMaxDelta(100))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	out, err = s.Receive(ctx, m)
	fmt.Println(out, err)
	// Output:
	// unsupported_delta <nil>
	// accepted <nil>
}

// An operator reads a receiver without creating a file beside it, and a
// file that is not a receiver is refused before anything is written.
func ExampleWithReadOnly() {
	dir, err := os.MkdirTemp("", "receiverstore-readonly")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "receiver.db")
	s, err := receiverstore.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Receive(ctx, receiverstore.Message{ID: "ev-1", Flow: "agent-7", Seq: 1, Body: []byte(`{"delta": 5}`)}); err != nil {
		log.Fatal(err)
	}
	s.Close()
	for _, name := range []string{"receiver.db-writer", "receiver.db-writer-gate"} {
		os.Remove(filepath.Join(dir, name)) // only to show that nothing comes back
	}

	r, err := receiverstore.Open(path, receiverstore.WithReadOnly())
	if err != nil {
		log.Fatal(err)
	}
	total, _ := r.Total(ctx, "agent-7")
	_, err = r.Receive(ctx, receiverstore.Message{ID: "ev-2", Flow: "agent-7", Seq: 2, Body: []byte(`{"delta": 1}`)})
	r.Close()
	entries, _ := os.ReadDir(dir)
	fmt.Println("total", total, "| files", len(entries), "|", errors.Is(err, receiverstore.ErrReadOnly))

	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("shopping list\n"), 0o644)
	_, err = receiverstore.Open(notes)
	fmt.Println(errors.Is(err, receiverstore.ErrNotReceiver))
	// Output:
	// total 5 | files 1 | true
	// true
}

// ExampleWithEffect: the receiver as an inbox. The effect writes the
// message into the user's own table inside the receipt's transaction, so
// the order row and the receipt commit together; a redelivery is a
// duplicate and the effect does not run again.
func ExampleWithEffect() {
	dir, err := os.MkdirTemp("", "receiverstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := receiverstore.Open(filepath.Join(dir, "receiver.db"),
		receiverstore.WithSchema(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, body TEXT NOT NULL) STRICT`),
		receiverstore.WithEffect(func(ctx context.Context, tx receiverstore.Tx, m receiverstore.Message) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (id, body) VALUES (?, ?)`, m.ID, string(m.Body))
			return err
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	m := receiverstore.Message{ID: "order-1", Flow: "shop-9", Seq: 1, Body: []byte(`{"sku": "tea", "qty": 2}`)}
	for range 2 {
		out, err := s.Receive(ctx, m)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(out)
	}
	// Output:
	// accepted
	// duplicate
}

// Retention: Prune deletes the receipts accepted before a time, in
// batches, and keeps each flow's total, next expected seq and pruned mark;
// a redelivery of a pruned receipt's event is answered Pruned and applies
// nothing.
func ExampleStore_Prune() {
	dir, err := os.MkdirTemp("", "receiverstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s, err := receiverstore.Open(filepath.Join(dir, "receiver.db"),
		receiverstore.WithNow(func() time.Time { return now })) // a test's clock; time.Now by default
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	ev1 := receiverstore.Message{ID: "ev-1", Flow: "agent-7", Seq: 1, Body: []byte(`{"delta": 5}`)}
	ev2 := receiverstore.Message{ID: "ev-2", Flow: "agent-7", Seq: 2, Body: []byte(`{"delta": 4}`)}
	for _, m := range []receiverstore.Message{ev1, ev2} {
		if _, err := s.Receive(ctx, m); err != nil {
			log.Fatal(err)
		}
	}
	now = now.Add(8 * 24 * time.Hour)
	week := now.Add(-7 * 24 * time.Hour) // keep a week of receipts
	n, err := s.Prunable(ctx, week)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("prunable:", n.Receipts)
	for {
		r, err := s.Prune(ctx, week, receiver.DefaultPruneBatch)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("pruned:", r.Receipts)
		if !r.More {
			break
		}
	}
	out, err := s.Receive(ctx, ev1) // a late redelivery
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ev-1 again:", out)
	flows, err := s.Flows(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", flows[0])
	// Output:
	// prunable: 2
	// pruned: 2
	// ev-1 again: pruned
	// {Flow:agent-7 NextExpected:3 Total:9 PrunedThrough:2}
}
