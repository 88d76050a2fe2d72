package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/fairrelay/fairrelay/clock"
)

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// table prints aligned columns for people.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row adds one line; cells are made safe for a terminal (no tabs, newlines
// or control characters can break the columns).
func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// cell shows s on one line: an empty value as "-", control characters
// escaped.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	clean := true
	for _, r := range s {
		if !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

// short cuts s to at most n runes for a table, marking the cut with "…".
func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// at shows a tick in a table or a sentence: as a UTC date-time with how
// long ago it was (clock.WallText, against the environment's wall clock)
// when it is a wall-clock time (at least clock.WallFloor, as a queue run
// in real time writes), else as the tick number of a logical queue.
// --json output keeps the numbers.
func (e *env) at(t int64) string {
	if clock.Tick(t) < clock.WallFloor {
		return itoa(t)
	}
	return clock.WallText(clock.Tick(t), e.clock.wall.Now().Time())
}

// when shows the tick a write acted at in a sentence ("at " + when): "tick
// N" on a logical queue; on a queue run in real time the date-time and how
// long ago (e.at), then the exact tick, which --now takes: "2026-12-04
// 12:00:05 UTC, now (tick 1796385605123)".
func (e *env) when(t clock.Tick) string {
	if t < clock.WallFloor {
		return "tick " + itoa(int64(t))
	}
	return e.at(int64(t)) + " (tick " + itoa(int64(t)) + ")"
}

// seqCell shows a sequence number or tick, with "-" for none (0).
func seqCell(n int64) string {
	if n == 0 {
		return "-"
	}
	return itoa(n)
}
