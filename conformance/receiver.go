package conformance

import (
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiver"
)

// Receiver is a store under test: the receiver contract as the receiver
// module declares it once (receiver.Store). receiverstore.Store and
// pgreceiverstore.Store both are one.
type Receiver = receiver.Store

// ReceiverOptions are what a clause asks of a store it opens.
type ReceiverOptions struct {
	// MaxDelta is the store's cap on a delta, 1..1000.
	MaxDelta int
	// Now is the store's wall clock, the time a receipt records as the
	// moment it was accepted (the stores' WithNow); nil is time.Now.
	Now func() time.Time
}

// ReceiverBackend is one receiver backend under test.
type ReceiverBackend struct {
	// Open opens a store with the given options that lives until t ends: a
	// new, empty one when loc is "", else another handle on the store at
	// loc, as Open on the same file or schema gives. It returns the
	// store's loc. It may be called from several goroutines at once. The
	// retention clauses need the store to be a receiver.Pruner.
	Open func(t testing.TB, loc string, o ReceiverOptions) (Receiver, string)
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

// recvOpt is a receiver option of the clauses.
type recvOpt func(*ReceiverOptions)

func withMaxDelta(n int) recvOpt { return func(o *ReceiverOptions) { o.MaxDelta = n } }

func withNow(now func() time.Time) recvOpt { return func(o *ReceiverOptions) { o.Now = now } }

func optionsOf(opts []recvOpt) ReceiverOptions {
	o := ReceiverOptions{MaxDelta: receiver.DefaultMaxDelta}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func (rk *ReceiverBackend) open(t testing.TB, opts ...recvOpt) (Receiver, string) {
	t.Helper()
	return rk.Open(t, "", optionsOf(opts))
}

func (rk *ReceiverBackend) reopen(t testing.TB, loc string, opts ...recvOpt) Receiver {
	t.Helper()
	r, _ := rk.Open(t, loc, optionsOf(opts))
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
