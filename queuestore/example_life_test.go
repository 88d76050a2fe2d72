package queuestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
)

// Example_lifeOfAnEvent schedules an event, pauses and resumes its flow,
// and prunes it once it is acked and older than the retention window
// (docs/contract.md §7.9).
func Example_lifeOfAnEvent() {
	dir, err := os.MkdirTemp("", "queuestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	p := queuestore.DefaultPolicy()
	p.Retention = 100 // acked events are kept 100 ticks
	s, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithPolicy(p))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// Not before tick 10: no claim finds it earlier.
	e := queuestore.Event{ID: "reminder-1", Flow: "tenant-a", Body: []byte(`{"delta": 1}`), NotBefore: 10}
	if _, err := s.Enqueue(ctx, e, 0); err != nil {
		log.Fatal(err)
	}
	_, ok, _ := s.Claim(ctx, 9)
	fmt.Println("claimable at 9:", ok)

	// Paused, the flow's head is not claimable even when its tick came.
	if err := s.PauseFlow(ctx, "tenant-a", "receiver maintenance", 10); err != nil {
		log.Fatal(err)
	}
	_, ok, _ = s.Claim(ctx, 11)
	fmt.Println("claimable at 11 while paused:", ok)
	if err := s.ResumeFlow(ctx, "tenant-a", "maintenance over", 12); err != nil {
		log.Fatal(err)
	}
	c, ok, err := s.Claim(ctx, 12)
	if err != nil || !ok {
		log.Fatal(ok, err)
	}
	if _, err := s.Settle(ctx, c.EventID, c.Generation, queuestore.Result{OK: true}, 12); err != nil {
		log.Fatal(err)
	}

	// Acked at 12: prunable from 112 on; the audit rows of the pause (10)
	// and the resume (12) from 110 and 112.
	for _, now := range []clock.Tick{111, 112} {
		r, err := s.Prunable(ctx, now)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("prunable at %d: %d events, %d audit rows\n", now, r.Events, r.Audit)
	}
	r, err := s.Prune(ctx, 112, queuestore.DefaultPruneBatch)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("pruned: %d events, %d audit rows, more: %v\n", r.Events, r.Audit, r.More)

	// The flow's numbering goes on: the same ID again is a new event.
	n, err := s.Enqueue(ctx, queuestore.Event{ID: "reminder-1", Flow: "tenant-a", Body: []byte(`{"delta": 1}`)}, 113)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("enqueued again: #%d, duplicate: %v\n", n.Seq, n.Duplicate)
	// Output:
	// claimable at 9: false
	// claimable at 11 while paused: false
	// prunable at 111: 0 events, 1 audit rows
	// prunable at 112: 1 events, 2 audit rows
	// pruned: 1 events, 2 audit rows, more: false
	// enqueued again: #2, duplicate: false
}
