package receiverstore

import (
	"context"
	"errors"
	"testing"
)

// IDs and flows must hold a non-space character and must not begin or end
// with whitespace (the queue store's rule): "tenant-a" and "tenant-a " are
// not two flows; a blank ID is refused. ErrInvalid, nothing changes.
func TestReceive_NamesWithoutEdgeSpaces(t *testing.T) {
	t.Parallel()
	cases := map[string]Message{
		"blank ID":                 {ID: "   ", Flow: "f", Seq: 1},
		"one-space ID":             {ID: " ", Flow: "f", Seq: 1},
		"ID with leading space":    {ID: " e", Flow: "f", Seq: 1},
		"ID with trailing space":   {ID: "e ", Flow: "f", Seq: 1},
		"blank flow":               {ID: "e", Flow: "  ", Seq: 1},
		"flow with trailing space": {ID: "e", Flow: "tenant-a ", Seq: 1},
		"flow with leading space":  {ID: "e", Flow: " tenant-a", Seq: 1},
	}
	s, _ := open(t)
	before := snap(t, s)
	for name, m := range cases {
		m.Body = body(5)
		out, err := s.Receive(context.Background(), m)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Receive() = %q, %v; want ErrInvalid", name, out, err)
		}
	}
	assertUnchanged(t, s, before, "names with edge spaces")
	// Inner spaces are fine.
	mustReceive(t, s, Message{ID: "e 1", Flow: "tenant a", Seq: 1, Body: body(1)}, Accepted)
}
