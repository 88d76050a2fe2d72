package conformance

import (
	"testing"

	"github.com/fairrelay/fairrelay/receiver"
)

// Receiver is a store under test: the receiver contract as the receiver
// module declares it once (receiver.Store). receiverstore.Store and
// pgreceiverstore.Store both are one.
type Receiver = receiver.Store

// ReceiverBackend is one receiver backend under test.
type ReceiverBackend struct {
	// Open opens a store with the given MaxDelta (1..1000) that lives until
	// t ends: a new, empty one when loc is "", else another handle on the
	// store at loc, as Open on the same file or schema gives. It returns
	// the store's loc. It may be called from several goroutines at once.
	Open func(t testing.TB, loc string, maxDelta int) (Receiver, string)
	// Exec runs one SQL statement on the store at loc, with the store's
	// tables reachable by their bare names (receipts, flows, conflicts):
	// the clauses that must make a state the API never makes use it. Nil
	// skips those clauses.
	Exec func(t testing.TB, loc, sql string)
}

func (rk *ReceiverBackend) exec(t testing.TB, loc, sql string) {
	t.Helper()
	if rk.Exec == nil {
		t.Skip("the backend gives no raw SQL access")
	}
	rk.Exec(t, loc, sql)
}

// recvOpt is a receiver option of the ported clauses: the MaxDelta.
type recvOpt int

func withMaxDelta(n int) recvOpt { return recvOpt(n) }

func maxDeltaOf(opts []recvOpt) int {
	md := receiver.DefaultMaxDelta
	for _, o := range opts {
		md = int(o)
	}
	return md
}

func (rk *ReceiverBackend) open(t testing.TB, opts ...recvOpt) (Receiver, string) {
	t.Helper()
	return rk.Open(t, "", maxDeltaOf(opts))
}

func (rk *ReceiverBackend) reopen(t testing.TB, loc string, opts ...recvOpt) Receiver {
	t.Helper()
	r, _ := rk.Open(t, loc, maxDeltaOf(opts))
	return r
}

// RunReceiver runs every receiver clause as a subtest named after it, each
// on stores from b.
func RunReceiver(t *testing.T, b ReceiverBackend) {
	for _, c := range receiverClauses {
		t.Run(c.name, func(t *testing.T) { c.run(t, &b) })
	}
}

type receiverClause struct {
	name string
	run  func(t *testing.T, rk *ReceiverBackend)
}
