package main

import (
	"context"
	"fmt"
	"log"
	"path/filepath"
	"strings"

	"github.com/fairrelay/fairrelay/bench"
)

// walPageSets are the WAL pages of the ceiling, goqite's cycle and the
// single-event and batched relay cycles, operation by operation, round by
// round (bench.CycleWALPages): what each commit writes, which on
// disk is part of its cost.
type walPageSets struct {
	ceiling, goqite, single, batch64 [][]bench.WALPages
}

// walPageRounds is how many cycles of each are counted: page counts vary
// only where an insert splits a page.
const walPageRounds = 5

// measureWALPages counts the pages in files under dir. The warm-ups give
// each flow of the batched cycle more (flow, seq) entries than one leaf
// page holds, as the timed case's backlog has after its first second.
func measureWALPages(ctx context.Context, dir string) (walPageSets, error) {
	var w walPageSets
	var err error
	if w.ceiling, err = bench.CycleWALPages(ctx, bench.Ceiling(), filepath.Join(dir, "ceiling"), 100, walPageRounds); err != nil {
		return w, err
	}
	if w.goqite, err = bench.CycleWALPages(ctx, bench.Goqite(), filepath.Join(dir, "goqite"), 100, walPageRounds); err != nil {
		return w, err
	}
	if w.single, err = bench.CycleWALPages(ctx, bench.RelayCycle(), filepath.Join(dir, "single"), 1000, walPageRounds); err != nil {
		return w, err
	}
	if w.batch64, err = bench.CycleWALPages(ctx, bench.BatchedRelayCycle(64), filepath.Join(dir, "batch-64"), 500, walPageRounds); err != nil {
		return w, err
	}
	for _, c := range []struct {
		name   string
		cycles [][]bench.WALPages
	}{{"ceiling", w.ceiling}, {"goqite", w.goqite}, {"single-event cycle", w.single}, {"batched cycle at 64", w.batch64}} {
		log.Printf("WAL pages, %s: %s", c.name, opPages(c.cycles))
	}
	return w, nil
}

// pagesPer is the pages one cycle wrote in each round (leaves false), or
// the (flow, seq) leaves among them (leaves true).
func pagesPer(cycles [][]bench.WALPages, leaves bool) []float64 {
	var xs []float64
	for _, c := range cycles {
		p, l := bench.TotalPages(c)
		if leaves {
			p = l
		}
		xs = append(xs, float64(p))
	}
	return xs
}

// opPages lists the median pages of each operation of cycles, with the
// (flow, seq) leaves among them where there are any: "Enqueue 7 of
// which 1 (flow, seq) leaves; Claim 5; …".
func opPages(cycles [][]bench.WALPages) string {
	if len(cycles) == 0 {
		return "not measured"
	}
	var parts []string
	for i, op := range cycles[0] {
		var pages, leaves []float64
		for _, c := range cycles {
			pages, leaves = append(pages, float64(c[i].Pages)), append(leaves, float64(c[i].FlowSeqLeaves))
		}
		s := fmt.Sprintf("%s %.0f", op.Op, bench.Summarize(pages).Median)
		if l := bench.Summarize(leaves).Median; l > 0 {
			s += fmt.Sprintf(" of which %.0f (flow, seq) leaves", l)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// walPageRows are the rows of what one cycle of each writes to the WAL.
func walPageRows(w walPageSets) []bench.Row {
	row := func(what string, xs []float64) bench.Row {
		return bench.Row{What: what, Value: bench.Summarize(xs), Unit: "WAL pages"}
	}
	return []bench.Row{
		row("pages one ceiling commit writes", pagesPer(w.ceiling, false)),
		row("pages one event of goqite's cycle writes (send + receive + delete)", pagesPer(w.goqite, false)),
		row("pages one event of the single-event relay cycle writes (Enqueue + Claim + Receive + Settle)", pagesPer(w.single, false)),
		row("pages one batch of the batched relay cycle at 64 writes (EnqueueBatch + ClaimBatch + ReceiveBatch + SettleBatch)", pagesPer(w.batch64, false)),
		row("… of them leaves of the (flow, seq) indexes of events and receipts", pagesPer(w.batch64, true)),
	}
}
