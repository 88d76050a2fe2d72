package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseEventLine: any line either parses into an event or is refused
// with an error; it never panics. A parsed event has the line's id and flow;
// a body written as a JSON string comes back as the string's text (possibly
// empty: the store refuses that one), any other body as the exact bytes of
// the file.
func FuzzParseEventLine(f *testing.F) {
	for _, seed := range []string{
		`{"id": "e1", "flow": "a", "body": {"delta": 5}}`,
		`{"id": "e2", "flow": "a", "body": "{\"delta\":6}"}`,
		`{"id": "e3", "flow": "a", "body": 42}`,
		`{"id": "e4", "flow": "a"}`,
		`{"id": "e5", "flow": "a", "body": null}`,
		`{"id": "e6", "flow": "a", "body": 1, "x": 2}`,
		`{"id": "e7", "flow": "a", "body": 1} {}`,
		`[1, 2]`,
		`not json`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, _, err := parseEventLine(line)
		if err != nil {
			return
		}
		var l eventLine
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("parseEventLine(%q) accepted a line json.Unmarshal refuses: %v", line, err)
		}
		if *l.ID != ev.ID || *l.Flow != ev.Flow {
			t.Fatalf("parseEventLine(%q) = %+v, want id %q flow %q", line, ev, *l.ID, *l.Flow)
		}
		if l.Body[0] == '"' {
			var s string
			if err := json.Unmarshal(l.Body, &s); err != nil || s != string(ev.Body) {
				t.Fatalf("parseEventLine(%q) body = %q, want the string's text %q", line, ev.Body, s)
			}
		} else if !bytes.Equal(ev.Body, l.Body) {
			t.Fatalf("parseEventLine(%q) body = %q, want the bytes as written %q", line, ev.Body, l.Body)
		}
	})
}
