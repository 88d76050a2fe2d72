package relay_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// fakeQueue is an in-memory model of the queue contract (docs/contract.md
// §2, §7.2): heads per flow, min-served order, leases, take-overs,
// generations, attempts, backoff and quarantine. It counts calls and lets a
// test override answers.
type fakeQueue struct {
	mu      sync.Mutex
	pol     queuestore.Policy
	flows   map[string][]*fakeEvent
	served  map[string]int64
	byID    map[string]*fakeEvent
	calls   map[string]int
	claimNs []int    // n of every ClaimBatch
	claimed []string // event IDs in claim order
	settles [][]queuestore.SettleItem
	scNs    []int // n of every SettleClaimBatch
	// slots, when set, is the relay's Concurrency: a claim that would hold
	// more events in flight (unexpired) than slots is recorded in
	// violations. Only meaningful while the relay settles every finished
	// handler before or with its next claim (a SettleClaimer).
	slots      int
	violations []string
	// extend, when set, answers an ExtendBatch item instead of the model.
	extend func(it queuestore.ExtendItem) (queuestore.Outcome, bool)
	// fail, when set, makes the named call fail.
	fail map[string]error
	// onClaim, when set, is called (under the lock) after every claim
	// with its n and the number of events it handed out.
	onClaim func(n, got int)
	// changed is closed and replaced on every call, for waitFor.
	changed chan struct{}
	// dest is each flow's destination (absent: the default); filter, while
	// set, is the ClaimFor filter of the claim under way (fakeDestQueue).
	dest   map[string]string
	filter *queue.ClaimFilter
}

type fakeEvent struct {
	id, flow string
	seq      int64
	body     []byte
	state    string
	gen      int64
	attempts int
	lease    clock.Tick
	avail    clock.Tick
	reason   string
}

func newFake(pol queuestore.Policy) *fakeQueue {
	return &fakeQueue{pol: pol, flows: map[string][]*fakeEvent{}, served: map[string]int64{},
		byID: map[string]*fakeEvent{}, calls: map[string]int{}, fail: map[string]error{}, changed: make(chan struct{})}
}

// enqueue adds events to flow with IDs "flow/seq", available at once.
func (f *fakeQueue) enqueue(flow string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		seq := int64(len(f.flows[flow]) + 1)
		e := &fakeEvent{id: fmt.Sprintf("%s/%d", flow, seq), flow: flow, seq: seq, body: []byte(fmt.Sprintf(`{"n":%d}`, seq)), state: "pending"}
		f.flows[flow] = append(f.flows[flow], e)
		f.byID[e.id] = e
	}
	f.bump()
}

func (f *fakeQueue) bump() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeQueue) head(flow string) *fakeEvent {
	for _, e := range f.flows[flow] {
		if e.state != "acked" {
			return e
		}
	}
	return nil
}

func (f *fakeQueue) call(name string) error {
	f.calls[name]++
	defer f.bump()
	return f.fail[name]
}

func (f *fakeQueue) ClaimBatch(_ context.Context, now clock.Tick, n int) ([]queuestore.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("claim"); err != nil {
		return nil, err
	}
	return f.claim(now, n), nil
}

// overSlots records a claim of n that, with the events in flight, would
// hold more than slots (when slots is set).
func (f *fakeQueue) overSlots(now clock.Tick, n int) {
	if f.slots == 0 {
		return
	}
	held := 0
	for _, e := range f.byID {
		if e.state == "inflight" && e.lease > now {
			held++
		}
	}
	if held+n > f.slots {
		f.violations = append(f.violations, fmt.Sprintf("claim of %d with %d in flight and %d slots", n, held, f.slots))
	}
}

// claim is ClaimBatch under the lock.
func (f *fakeQueue) claim(now clock.Tick, n int) []queuestore.Claim {
	f.overSlots(now, n)
	f.claimNs = append(f.claimNs, n)
	var out []queuestore.Claim
	taken := map[string]bool{}
	took := map[string]int{} // claims per destination in this call
	for len(out) < n {
		var best *fakeEvent
		for flow := range f.flows {
			h := f.head(flow)
			if h == nil || taken[flow] || !f.allowed(f.dest[flow], took) {
				continue
			}
			ok := (h.state == "pending" && h.avail <= now) || (h.state == "inflight" && h.lease <= now)
			if !ok {
				continue
			}
			if h.state == "inflight" && h.attempts >= f.pol.MaxAttempts {
				h.state, h.reason = "quarantined", queuestore.ReasonLeaseExpired
				continue
			}
			if best == nil || f.served[flow] < f.served[best.flow] || (f.served[flow] == f.served[best.flow] && flow < best.flow) {
				best = h
			}
		}
		if best == nil {
			break
		}
		taken[best.flow] = true
		took[f.dest[best.flow]]++
		best.state, best.gen, best.attempts, best.lease = "inflight", best.gen+1, best.attempts+1, now+f.pol.Lease
		f.served[best.flow]++
		f.claimed = append(f.claimed, best.id)
		out = append(out, queuestore.Claim{EventID: best.id, Flow: best.flow, Seq: best.seq, Body: best.body,
			Generation: best.gen, Attempts: best.attempts, LeaseUntil: best.lease, Destination: f.dest[best.flow]})
	}
	if f.onClaim != nil {
		f.onClaim(n, len(out))
	}
	return out
}

// check is the order of Settle's and Extend's checks: stale, stale, expired.
func (f *fakeQueue) check(id string, gen int64, now clock.Tick) (*fakeEvent, queuestore.Outcome, error) {
	e := f.byID[id]
	switch {
	case e == nil:
		return nil, "", queuestore.ErrNotFound
	case e.gen != gen || e.state != "inflight":
		return e, queuestore.Stale, nil
	case now >= e.lease:
		return e, queuestore.Expired, nil
	}
	return e, "", nil
}

func (f *fakeQueue) SettleBatch(_ context.Context, items []queuestore.SettleItem, now clock.Tick) ([]queuestore.SettleResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("settle"); err != nil {
		return nil, err
	}
	return f.settle(items, now), nil
}

// settle is SettleBatch under the lock.
func (f *fakeQueue) settle(items []queuestore.SettleItem, now clock.Tick) []queuestore.SettleResult {
	f.settles = append(f.settles, slices.Clone(items))
	out := make([]queuestore.SettleResult, len(items))
	for i, it := range items {
		e, o, err := f.check(it.EventID, it.Generation, now)
		switch {
		case err != nil:
			out[i].Err = err
			continue
		case o != "":
		case it.Result.OK:
			e.state, o = "acked", queuestore.Acked
		case e.attempts < f.pol.MaxAttempts && !it.Result.Permanent:
			e.state, e.reason, o = "pending", it.Result.Reason, queuestore.RetryScheduled
			e.avail = now + f.pol.RetryDelay(e.id, e.gen, e.attempts, it.Result.RetryAfter)
		default:
			e.state, e.reason, o = "quarantined", it.Result.Reason, queuestore.Quarantined
		}
		out[i].Outcome = o
	}
	return out
}

// fakeSettleClaimer is the fake with SettleClaimBatch: a relay.SettleClaimer.
type fakeSettleClaimer struct{ *fakeQueue }

// SettleClaimBatch is SettleBatch then ClaimBatch under one lock, counted
// as the call "settle_claim" (its items also go to settles, its n to
// claimNs and scNs).
func (f fakeSettleClaimer) SettleClaimBatch(_ context.Context, items []queuestore.SettleItem, now clock.Tick, n int) ([]queuestore.SettleResult, []queuestore.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("settle_claim"); err != nil {
		return nil, nil, err
	}
	rs := f.settle(items, now)
	f.scNs = append(f.scNs, n)
	var cs []queuestore.Claim
	if n > 0 {
		cs = f.claim(now, n)
	}
	return rs, cs, nil
}

func (f *fakeQueue) ExtendBatch(_ context.Context, items []queuestore.ExtendItem, now clock.Tick) ([]queuestore.SettleResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("extend"); err != nil {
		return nil, err
	}
	out := make([]queuestore.SettleResult, len(items))
	for i, it := range items {
		if f.extend != nil {
			if o, ok := f.extend(it); ok {
				out[i].Outcome = o
				continue
			}
		}
		e, o, err := f.check(it.EventID, it.Generation, now)
		switch {
		case err != nil:
			out[i].Err = err
		case o != "":
			out[i].Outcome = o
		default:
			e.lease = now + f.pol.Lease
			out[i].Outcome = queuestore.Extended
			out[i].LeaseUntil = e.lease
		}
	}
	return out, nil
}

func (f *fakeQueue) NextDue(context.Context) (clock.Tick, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("next_due"); err != nil {
		return 0, false, err
	}
	var due clock.Tick
	ok := false
	for flow := range f.flows {
		h := f.head(flow)
		var t clock.Tick
		switch {
		case h == nil || h.state == "quarantined":
			continue
		case h.state == "pending":
			t = h.avail
		default:
			t = h.lease
		}
		if !ok || t < due {
			due, ok = t, true
		}
	}
	return due, ok, nil
}

func (f *fakeQueue) Policy(context.Context) (queuestore.Policy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("policy"); err != nil {
		return queuestore.Policy{}, err
	}
	return f.pol, nil
}

// get reads under the lock.
func (f *fakeQueue) get(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// event returns a copy of an event's state.
func (f *fakeQueue) event(id string) fakeEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.byID[id]
}

// waitFor waits until cond (called under the fake's lock) holds, re-checking
// after every queue call and every few milliseconds; it fails the test after
// a generous deadline, which only a hang reaches.
func (f *fakeQueue) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		f.mu.Lock()
		ok := cond()
		ch := f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func testPolicy(lease clock.Tick, attempts int) queuestore.Policy {
	p := queuestore.DefaultPolicy()
	p.Lease, p.MaxAttempts = lease, attempts
	return p
}
