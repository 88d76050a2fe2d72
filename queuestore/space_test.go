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

// A batch whose events have large bodies frees more pages than its
// limit (each body spills into overflow pages); Prune gives every one of
// them back, so the file shrinks with the load as docs/contract.md §7.9
// says.
func TestSpace_PruneGivesBackEveryPageItFreed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const events, limit = 20, 5
	p := DefaultPolicy()
	p.Retention = 1
	s, _ := openTest(t, WithPolicy(p))
	body := []byte(strings.Repeat("y", 16<<10))
	es := make([]Event, events)
	for i := range es {
		es[i] = Event{ID: fmt.Sprintf("big-%d", i), Flow: fmt.Sprintf("f%d", i), Body: body}
	}
	if _, err := s.EnqueueBatch(ctx, es, 1); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimBatch(ctx, 1, events)
	if err != nil || len(cs) != events {
		t.Fatalf("ClaimBatch() = %d claims, %v; want %d", len(cs), err, events)
	}
	items := make([]SettleItem, len(cs))
	for i, c := range cs {
		items[i] = SettleItem{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}}
	}
	if _, err := s.SettleBatch(ctx, items, 1); err != nil {
		t.Fatal(err)
	}
	full := pragmaInt(t, s, "page_count")
	pruned := int64(0)
	for {
		res, err := s.Prune(ctx, 2, limit)
		if err != nil {
			t.Fatal(err)
		}
		pruned += res.Events
		if !res.More {
			break
		}
	}
	if pruned != events {
		t.Fatalf("pruned %d events, want %d", pruned, events)
	}
	if free := pragmaInt(t, s, "freelist_count"); free != 0 {
		t.Fatalf("%d pages left on the free list after pruning every event (file %d pages, %d before)", free, pragmaInt(t, s, "page_count"), full)
	}
	if after := pragmaInt(t, s, "page_count"); after >= full-int64(events)*4 {
		t.Fatalf("page count %d after pruning %d bodies of 16 KiB, %d before: the file did not shrink", after, events, full)
	}
}

func max64(xs []int64) int64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}
