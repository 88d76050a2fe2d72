package relay_test

import (
	"context"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// allowed reports whether the claim under way may take a head of
// destination d, having taken took[d] of them: the ClaimFor filter's
// Exclude and Room, as the stores apply them (docs/contract.md §7.11).
func (f *fakeQueue) allowed(d string, took map[string]int) bool {
	if f.filter == nil {
		return true
	}
	if slices.Contains(f.filter.Exclude, d) {
		return false
	}
	if r, ok := f.filter.Room[d]; ok && took[d] >= r {
		return false
	}
	return true
}

// fakeDestQueue is the fake with destinations: a relay.DestinationQueue.
// Its registered destinations are dests; each flow's is fakeQueue.dest.
type fakeDestQueue struct {
	fakeSettleClaimer
	dests   *[]queue.DestinationState
	filters *[]queue.ClaimFilter // every claim's filter, in call order
}

func newFakeDest(pol queue.Policy) fakeDestQueue {
	f := newFake(pol)
	f.dest = map[string]string{}
	return fakeDestQueue{fakeSettleClaimer{f}, new([]queue.DestinationState), new([]queue.ClaimFilter)}
}

// register adds (or replaces) a registered destination.
func (q fakeDestQueue) register(d queue.Destination) {
	q.mu.Lock()
	defer q.mu.Unlock()
	*q.dests = slices.DeleteFunc(*q.dests, func(s queue.DestinationState) bool { return s.Name == d.Name })
	*q.dests = append(*q.dests, queue.DestinationState{Destination: d, SecretCount: len(d.Secrets)})
	q.bump()
}

// enqueueTo adds n events to flow, which delivers to dest.
func (q fakeDestQueue) enqueueTo(flow, dest string, n int) {
	q.mu.Lock()
	q.dest[flow] = dest
	q.mu.Unlock()
	q.enqueue(flow, n)
}

// Destinations is the operator's read, with its counts (a call
// "destination counts"); RegisteredDestinations the relay's (a call
// "destinations").
func (q fakeDestQueue) Destinations(context.Context) ([]queue.DestinationState, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call("destination counts"); err != nil {
		return nil, err
	}
	return slices.Clone(*q.dests), nil
}

func (q fakeDestQueue) RegisteredDestinations(context.Context) ([]queue.Destination, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call("destinations"); err != nil {
		return nil, err
	}
	out := make([]queue.Destination, len(*q.dests))
	for i, d := range *q.dests {
		out[i] = d.Destination
	}
	return out, nil
}

func (q fakeDestQueue) ClaimFor(_ context.Context, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.Claim, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call("claim"); err != nil {
		return nil, err
	}
	q.filter = &f
	*q.filters = append(*q.filters, f)
	defer func() { q.filter = nil }()
	return q.claim(now, n), nil
}

func (q fakeDestQueue) SettleClaimFor(_ context.Context, items []queue.SettleItem, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.SettleResult, []queue.Claim, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call("settle_claim"); err != nil {
		return nil, nil, err
	}
	rs := q.settle(items, now)
	q.scNs = append(q.scNs, n)
	var cs []queue.Claim
	if n > 0 {
		q.filter = &f
		*q.filters = append(*q.filters, f)
		cs = q.claim(now, n)
		q.filter = nil
	}
	return rs, cs, nil
}
