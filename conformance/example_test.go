package conformance_test

import (
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/conformance"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// A backend runs the receiver clauses by saying how to open its stores. A
// receiverstore.Store is a conformance.Receiver as it is: its types are the
// receiver module's.
func ExampleRunReceiver() {
	testReceiver := func(t *testing.T) {
		conformance.RunReceiver(t, conformance.ReceiverBackend{
			Open: func(t testing.TB, loc string, o conformance.ReceiverOptions) (conformance.Receiver, string) {
				if loc == "" {
					loc = filepath.Join(t.TempDir(), "receiver.db")
				}
				s, err := receiverstore.Open(loc, receiverstore.WithMaxDelta(o.MaxDelta), receiverstore.WithNow(o.Now))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s, loc
			},
		})
	}
	_ = testReceiver // in a _test.go file: func TestReceiver(t *testing.T) { testReceiver(t) }
}
