package queuestore

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// validName is the documented rule for IDs and flows, written out
// independently of validate.go.
func validName(s string) bool {
	if len(s) < 1 || len(s) > MaxNameLen || !utf8.ValidString(s) {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
}

// FuzzEnqueue feeds arbitrary IDs, flows and bodies to Enqueue (docs/contract.md §2.1):
// input outside the documented limits is ErrInvalid and changes nothing;
// anything else is stored byte-exact, reads back through Event and Snapshot,
// and is a duplicate when sent again.
func FuzzEnqueue(f *testing.F) {
	f.Add("e1", "flow", []byte(`{"delta": 1}`))
	f.Add("", "flow", []byte("x"))
	f.Add("e1", "", []byte("x"))
	f.Add("e1", "flow", []byte{})
	f.Add("e\x00", "flow", []byte("x"))
	f.Add("\xff", "flow", []byte("x"))
	f.Add("é", "ß", []byte{0xff, 0xfe, 0})
	f.Add(strings.Repeat("x", MaxNameLen), "f", []byte("x"))
	f.Add(strings.Repeat("x", MaxNameLen+1), "f", []byte("x"))
	f.Add("tab\tid", "f", []byte("x"))
	f.Add("zero\u200bwidth", "f", []byte("x"))
	f.Fuzz(func(t *testing.T, id, flow string, body []byte) {
		ctx := context.Background()
		s := openMem(t)
		enqueue(t, s, "seed", "seed-flow", "seed-body", 1)
		before := snap(t, s)
		got, err := s.Enqueue(ctx, Event{ID: id, Flow: flow, Body: body}, 2)
		valid := validName(id) && validName(flow) && len(body) >= 1 && len(body) <= MaxBodyLen
		if !valid {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Enqueue(%q, %q, %d bytes) error = %v, want ErrInvalid", id, flow, len(body), err)
			}
			assertUnchanged(t, "invalid Enqueue", before, snap(t, s))
			return
		}
		if id == "seed" {
			// The seed event's ID: a duplicate or a conflict.
			dup := flow == "seed-flow" && string(body) == "seed-body"
			if dup && (err != nil || got != (Enqueued{Seq: 1, Duplicate: true})) {
				t.Fatalf("Enqueue(duplicate) = %+v, %v", got, err)
			}
			if !dup && !errors.Is(err, ErrConflict) {
				t.Fatalf("Enqueue(conflict) error = %v, want ErrConflict", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Enqueue(%q, %q, %d bytes) error = %v, want nil", id, flow, len(body), err)
		}
		wantSeq := int64(1)
		if flow == "seed-flow" {
			wantSeq = 2
		}
		if got != (Enqueued{Seq: wantSeq}) {
			t.Fatalf("Enqueue() = %+v, want seq %d", got, wantSeq)
		}
		e := event(t, s, id)
		if e.Flow != flow || string(e.Body) != string(body) || e.State != statePending {
			t.Fatalf("Event() = %+v, want flow %q, same body, pending", e, flow)
		}
		sn := snap(t, s)
		var found bool
		for _, se := range sn.Events {
			if se.ID == id {
				found = reflect.DeepEqual([]byte(se.Body), body)
			}
		}
		if !found {
			t.Fatalf("snapshot lacks event %q with its exact body", id)
		}
		again, err := s.Enqueue(ctx, Event{ID: id, Flow: flow, Body: body}, 3)
		if err != nil || again != (Enqueued{Seq: wantSeq, Duplicate: true}) {
			t.Fatalf("second Enqueue() = %+v, %v; want a duplicate of seq %d", again, err, wantSeq)
		}
	})
}
