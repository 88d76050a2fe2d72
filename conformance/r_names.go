package conformance

import (
	"context"
	"errors"
	"github.com/fairrelay/fairrelay/receiver"
	"testing"
)

// IDs and flows must hold a non-space character and must not begin or end
// with whitespace (the queue store's rule): "tenant-a" and "tenant-a " are
// not two flows; a blank ID is refused. receiver.ErrInvalid, nothing changes.
func receiverReceive_NamesWithoutEdgeSpaces(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	cases := map[string]receiver.Message{
		"blank ID":                 {ID: "   ", Flow: "f", Seq: 1},
		"one-space ID":             {ID: " ", Flow: "f", Seq: 1},
		"ID with leading space":    {ID: " e", Flow: "f", Seq: 1},
		"ID with trailing space":   {ID: "e ", Flow: "f", Seq: 1},
		"blank flow":               {ID: "e", Flow: "  ", Seq: 1},
		"flow with trailing space": {ID: "e", Flow: "tenant-a ", Seq: 1},
		"flow with leading space":  {ID: "e", Flow: " tenant-a", Seq: 1},
	}
	s, _ := rk.open(t)
	before := rsnap(t, s)
	for name, m := range cases {
		m.Body = rbody(5)
		out, err := s.Receive(context.Background(), m)
		if !errors.Is(err, receiver.ErrInvalid) {
			t.Errorf("%s: Receive() = %q, %v; want receiver.ErrInvalid", name, out, err)
		}
	}
	rassertUnchanged(t, s, before, "names with edge spaces")
	// Inner spaces are fine.
	rmustReceive(t, s, receiver.Message{ID: "e 1", Flow: "tenant a", Seq: 1, Body: rbody(1)}, receiver.Accepted)
}
