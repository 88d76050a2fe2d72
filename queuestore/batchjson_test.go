package queuestore

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzBatchJSONString checks the batch operations' hand-written JSON against
// encoding/json both ways: what appendJSONString writes, encoding/json reads
// back unchanged; what encoding/json (and so any conforming writer such as
// SQLite's json functions) writes, jsonRows.str reads back unchanged, and a
// row of it with an integer and a null parses whole.
func FuzzBatchJSONString(f *testing.F) {
	for _, s := range []string{"", "flow", `a"b\c`, "tab\there", "ünï", "😀", "\x00\x1f", "</>&"} {
		f.Add(s, int64(7))
	}
	f.Fuzz(func(t *testing.T, s string, n int64) {
		if !utf8.ValidString(s) {
			return // names are validated UTF-8 before they reach a batch
		}
		var back string
		if err := json.Unmarshal(appendJSONString(nil, s), &back); err != nil || back != s {
			t.Fatalf("appendJSONString(%q) read by encoding/json = %q, %v", s, back, err)
		}
		enc, err := json.Marshal([][]any{{s, n, nil}})
		if err != nil {
			t.Fatal(err)
		}
		r := &jsonRows{b: enc}
		r.open()
		if !r.next(true) {
			t.Fatalf("no row in %s", enc)
		}
		r.open()
		r.element(true)
		got, ok := r.str()
		r.element(false)
		gotN, okN := r.int()
		r.element(false)
		_, okNull := r.int()
		r.end()
		more := r.next(false)
		if r.err != nil || !ok || got != s || !okN || gotN != n || okNull || more {
			t.Fatalf("jsonRows on %s: %q %v, %d %v, null valid %v, more %v, err %v", enc, got, ok, gotN, okN, okNull, more, r.err)
		}
	})
}

// A malformed batch read is ErrCorrupt, never a silent zero.
func TestBatchJSONRows_MalformedIsCorrupt(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `[`, `[[1`, `[["a]]`, `[[1 2]]`, `[["\x"]]`, `[["\u12"]]`, `[[x]]`} {
		r := &jsonRows{b: []byte(in)}
		r.open()
		if r.next(true) {
			r.open()
			r.element(true)
			if _, ok := r.str(); !ok {
				r.int()
			}
			r.end()
		}
		if !errors.Is(r.err, ErrCorrupt) {
			t.Errorf("jsonRows on %q: err = %v, want ErrCorrupt", in, r.err)
		}
	}
}
