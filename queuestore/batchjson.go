package queuestore

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The batch operations pass lists to SQLite as one JSON argument (read with
// json_each) and read many rows back as one JSON value (json_group_array),
// so that a batch runs one statement where it would run one per item.

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// jsonRows reads the JSON that SQLite's json_group_array(json_array(...))
// returns: an array of arrays of integers, strings and nulls. The first
// error stops it; every later read returns zero values.
type jsonRows struct {
	b   []byte
	i   int
	err error
}

func (r *jsonRows) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: batch read: %s at offset %d of %q", ErrCorrupt, what, r.i, r.b)
	}
}

func (r *jsonRows) skipSpace() {
	for r.i < len(r.b) && (r.b[r.i] == ' ' || r.b[r.i] == '\n' || r.b[r.i] == '\t' || r.b[r.i] == '\r') {
		r.i++
	}
}

// open reads '[' (an array starts).
func (r *jsonRows) open() {
	r.skipSpace()
	if r.err != nil || r.i >= len(r.b) || r.b[r.i] != '[' {
		r.fail("want [")
		return
	}
	r.i++
}

// next reports whether the current array has another element, reading the
// ',' before it or the ']' that ends the array. first is true before the
// array's first element.
func (r *jsonRows) next(first bool) bool {
	r.skipSpace()
	if r.err != nil || r.i >= len(r.b) {
		r.fail("unexpected end")
		return false
	}
	if r.b[r.i] == ']' {
		r.i++
		return false
	}
	if !first {
		if r.b[r.i] != ',' {
			r.fail("want , or ]")
			return false
		}
		r.i++
	}
	return true
}

// element reads the ',' before a row's next value (not before its first).
func (r *jsonRows) element(first bool) {
	if !r.next(first) {
		r.fail("row too short")
	}
}

// null reads null and reports true, or reads nothing and reports false.
func (r *jsonRows) null() bool {
	r.skipSpace()
	if r.err == nil && len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return true
	}
	return false
}

// int reads an integer; valid is false for null.
func (r *jsonRows) int() (n int64, valid bool) {
	if r.null() || r.err != nil {
		return 0, false
	}
	j := r.i
	if j < len(r.b) && r.b[j] == '-' {
		j++
	}
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(string(r.b[r.i:j]), 10, 64)
	if err != nil {
		r.fail("want an integer")
		return 0, false
	}
	r.i = j
	return n, true
}

// str reads a string; valid is false for null.
func (r *jsonRows) str() (s string, valid bool) {
	if r.null() || r.err != nil {
		return "", false
	}
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		r.fail("want a string")
		return "", false
	}
	r.i++
	start := r.i
	for r.i < len(r.b) && r.b[r.i] != '"' && r.b[r.i] != '\\' {
		r.i++
	}
	if r.i < len(r.b) && r.b[r.i] == '"' { // no escapes: the common case
		s = string(r.b[start:r.i])
		r.i++
		return s, true
	}
	out := append([]byte(nil), r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return string(out), true
		case c != '\\':
			out = append(out, c)
			r.i++
			continue
		}
		if r.i+1 >= len(r.b) {
			break
		}
		e := r.b[r.i+1]
		r.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			c1, ok := r.hex4()
			if !ok {
				return "", false
			}
			ru := rune(c1)
			if utf16.IsSurrogate(ru) && r.i+1 < len(r.b) && r.b[r.i] == '\\' && r.b[r.i+1] == 'u' {
				r.i += 2
				c2, ok := r.hex4()
				if !ok {
					return "", false
				}
				ru = utf16.DecodeRune(ru, rune(c2))
			}
			out = utf8.AppendRune(out, ru)
		default:
			r.fail("bad escape")
			return "", false
		}
	}
	r.fail("unterminated string")
	return "", false
}

func (r *jsonRows) hex4() (uint16, bool) {
	if len(r.b)-r.i < 4 {
		r.fail("short \\u escape")
		return 0, false
	}
	n, err := strconv.ParseUint(string(r.b[r.i:r.i+4]), 16, 16)
	if err != nil {
		r.fail("bad \\u escape")
		return 0, false
	}
	r.i += 4
	return uint16(n), true
}

// blob reads a string of hex digits (SQLite's hex()) as bytes; valid is
// false for null.
func (r *jsonRows) blob() (b []byte, valid bool) {
	s, ok := r.str()
	if !ok {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		r.fail("want hex digits")
		return nil, false
	}
	return b, true
}

// end reads the ']' that ends a row.
func (r *jsonRows) end() {
	if r.next(false) {
		r.fail("row too long")
	}
}
