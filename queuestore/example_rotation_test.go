package queuestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/fairrelay/fairrelay/queuestore"
)

// Example_rotation creates a queue with the opt-in rotation order
// (docs/contract.md §7.6): tenant-b, of weight 2, gets two claims for each
// of tenant-a's; an operator then gives tenant-a weight 2 as well, with an
// audited reason, and the two alternate.
func Example_rotation() {
	dir, err := os.MkdirTemp("", "queuestore-rotation")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	p := queuestore.DefaultPolicy()
	p.Fairness = queuestore.FairRotation
	s, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithPolicy(p))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for i := 1; i <= 6; i++ {
		for _, e := range []queuestore.Event{
			{ID: fmt.Sprintf("a-%d", i), Flow: "tenant-a", Body: []byte("{}")},
			{ID: fmt.Sprintf("b-%d", i), Flow: "tenant-b", Body: []byte("{}"), Weight: 2},
		} {
			if _, err := s.Enqueue(ctx, e, 0); err != nil {
				log.Fatal(err)
			}
		}
	}
	claims := func(n int) string {
		var got []string
		for range n {
			c, ok, err := s.Claim(ctx, 1)
			if err != nil || !ok {
				log.Fatal(ok, err)
			}
			if _, err := s.Settle(ctx, c.EventID, c.Generation, queuestore.Result{OK: true}, 1); err != nil {
				log.Fatal(err)
			}
			got = append(got, c.EventID)
		}
		return strings.Join(got, " ")
	}
	fmt.Println(claims(6))
	if err := s.SetWeight(ctx, "tenant-a", 2, "upgraded plan", 1); err != nil {
		log.Fatal(err)
	}
	fmt.Println(claims(4))
	// Output:
	// a-1 b-1 b-2 a-2 b-3 b-4
	// a-3 b-5 a-4 b-6
}
