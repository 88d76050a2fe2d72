package conformance_test

import (
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/conformance"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// A backend runs the receiver clauses by saying how to open its stores. (A
// receiverstore.Store satisfies conformance.Receiver once its types are the
// receiver package's; until then the suite's own tests adapt it.)
func ExampleRunReceiver() {
	var _ = func(t *testing.T, open func(path string, maxDelta int) (conformance.Receiver, error)) {
		conformance.RunReceiver(t, conformance.ReceiverBackend{
			Open: func(t testing.TB, loc string, maxDelta int) (conformance.Receiver, string) {
				if loc == "" {
					loc = filepath.Join(t.TempDir(), "receiver.db")
				}
				r, err := open(loc, maxDelta)
				if err != nil {
					t.Fatal(err)
				}
				return r, loc
			},
		})
	}
	_ = receiverstore.DefaultMaxDelta
	_ = receiver.DefaultMaxDelta
}
