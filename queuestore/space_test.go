package queuestore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// pragmaInt reads an integer pragma of s's file.
func pragmaInt(t *testing.T, s *Store, name string) int64 {
	t.Helper()
	var n int64
	if err := s.db.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&n); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return n
}

// Space (docs/contract.md §7.9): under a steady load of enqueue, ack and
// Prune with a retention window, a new file's page count stops growing:
// the rounds after the first ten never need more pages than those did. A
// Prune gives the pages it frees back (incremental_vacuum on a file created
// with auto_vacuum=INCREMENTAL): none is left on the free list after it.
// Without Prune the same load grows the file every round (the control).
func TestSpace_PageCountStopsGrowingUnderPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const flows, rounds = 100, 40
	body := []byte(strings.Repeat("x", 300))
	run := func(prune bool) []int64 {
		p := DefaultPolicy()
		p.Retention = 1
		s, _ := openTest(t, WithPolicy(p))
		var pages []int64
		now := clock.Tick(1)
		for r := range rounds {
			es := make([]Event, flows)
			for i := range es {
				es[i] = Event{ID: fmt.Sprintf("r%d-f%d", r, i), Flow: fmt.Sprintf("f%d", i), Body: body}
			}
			if _, err := s.EnqueueBatch(ctx, es, now); err != nil {
				t.Fatal(err)
			}
			cs, err := s.ClaimBatch(ctx, now, flows)
			if err != nil || len(cs) != flows {
				t.Fatalf("ClaimBatch() = %d claims, %v; want %d", len(cs), err, flows)
			}
			items := make([]SettleItem, len(cs))
			for i, c := range cs {
				items[i] = SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}}
			}
			if _, err := s.SettleBatch(ctx, items, now); err != nil {
				t.Fatal(err)
			}
			now++
			if prune {
				for {
					res, err := s.Prune(ctx, now, DefaultPruneBatch)
					if err != nil {
						t.Fatal(err)
					}
					if !res.More {
						break
					}
				}
				if free := pragmaInt(t, s, "freelist_count"); free != 0 {
					t.Fatalf("round %d: %d pages on the free list after Prune, want 0", r, free)
				}
			}
			pages = append(pages, pragmaInt(t, s, "page_count"))
		}
		return pages
	}
	pages := run(true)
	early := max64(pages[:10])
	if late := max64(pages[10:]); late > early {
		t.Fatalf("page count grew after the first ten rounds: %d then %d (pages per round %v)", early, late, pages)
	}
	control := run(false)
	if control[rounds-1] <= control[9] {
		t.Fatalf("without Prune the page count did not grow (%v): the load proves nothing", control)
	}
	t.Logf("pages with Prune %v\nwithout %v", pages, control)
}

func max64(xs []int64) int64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}
