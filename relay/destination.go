package relay

import (
	"context"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// DestinationQueue is a Queue whose flows deliver to registered
// destinations (docs/contract.md §7.11): the part of
// queue.DestinationStore the relay uses. *queuestore.Store and
// *pgqueuestore.Store are DestinationQueues. When the queue given to New is
// one, the relay claims with ClaimFor and SettleClaimFor and a filter of
// its own (docs/runtime.md "Destinations"):
//
//   - Exclude names every destination whose breaker is open and not due for
//     a probe, or probing: its flows are not claimed, so not charged, and
//     keep their place;
//   - Room caps each destination the relay knows at what it has left of
//     its own handler slots (Options.DestinationSlots, less the slots its
//     flows hold now), and a destination due for a probe at 1 (the probe);
//
// and the store adds its own limits (each destination's Concurrency and
// Rate over every process, and its pause). Each destination has its own
// breaker (docs/contract.md §7.8); the default destination's is the one
// Breaker and the fairrelay_breaker_* metrics report.
type DestinationQueue interface {
	Queue
	// RegisteredDestinations lists the registered destinations
	// (queue.DestinationStore): the relay reads it every
	// Options.DestinationRefresh, so that each has its breaker from its
	// first claim on.
	RegisteredDestinations(ctx context.Context) ([]queue.Destination, error)
	// Destinations lists the registered destinations with their flows
	// and backlog (queue.DestinationStore); RunUntilIdle reads it once, at
	// the end, to count the events left in paused destinations.
	Destinations(ctx context.Context) ([]queue.DestinationState, error)
	// ClaimFor is ClaimBatch that also leaves out what f says.
	ClaimFor(ctx context.Context, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.Claim, error)
	// SettleClaimFor is SettleClaimBatch whose claims also leave out what f says.
	SettleClaimFor(ctx context.Context, items []queue.SettleItem, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.SettleResult, []queue.Claim, error)
}

// DefaultDestinationRefresh is the default of Options.DestinationRefresh
// and DestinationsOptions.Refresh.
const DefaultDestinationRefresh = 10 * time.Second

// DefaultDestinationLabel is the destination label of the default
// destination (queue.DefaultDestination) in the relay's metrics. It
// begins with an underscore, which no registered name does
// (queue.CheckDestinationName), so it never mixes with a registered
// destination's series.
const DefaultDestinationLabel = "_default"

// destRecheck is how many ticks the relay waits before it claims again
// after a claim that left something out came back short while the queue
// still says a head is due: that head may be one the filter leaves out,
// and claiming again at the next tick would spin. Each such claim that
// claims nothing doubles the wait, up to Options.Poll (loop.nextRecheck),
// so that a destination down for an hour costs no claim every 20 ticks;
// a settle, Notify, a handler's end (a freed slot, a probe's answer) or a
// claim that takes events sets it back to destRecheck. A settle, Notify,
// a freed slot, a probe's time or the poll claim earlier.
const destRecheck clock.Tick = 20

// DestinationLabel is the metric label of a destination: its name, or
// DefaultDestinationLabel for the default destination.
func DestinationLabel(name string) string {
	if name == queue.DefaultDestination {
		return DefaultDestinationLabel
	}
	return name
}

// destBreakers holds a breaker per destination the relay knows; "" is the
// relay's own breaker (Relay.Breaker). Only the loop's goroutine changes a
// breaker; the map is read by scrapes and DestinationBreakers, hence mu.
type destBreakers struct {
	mu     sync.Mutex
	m      map[string]*breaker
	counts map[string]*destCounts // by destination; made at its first start or settle
	opts   BreakerOptions
}

// destCounts are a destination's counts since the relay was made, for
// DestinationStatus (the loop's goroutine writes them, under
// destBreakers.mu).
type destCounts struct {
	delivered, failed int64
	inflight          int
}

func (d *destBreakers) init(def *breaker) {
	d.m = map[string]*breaker{queue.DefaultDestination: def}
	d.opts = def.o
}

// get returns the breaker of name, made closed when it is new.
func (d *destBreakers) get(name string) (b *breaker, isNew bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b = d.m[name]
	if b == nil {
		b = newBreaker(d.opts)
		d.m[name] = b
		isNew = true
	}
	return b, isNew
}

// count returns name's counts; d.mu must be held.
func (d *destBreakers) count(name string) *destCounts {
	c := d.counts[name]
	if c == nil {
		if d.counts == nil {
			d.counts = make(map[string]*destCounts)
		}
		c = &destCounts{}
		d.counts[name] = c
	}
	return c
}

// running records that n handlers of name's events run now.
func (d *destBreakers) running(name string, n int) {
	d.mu.Lock()
	d.count(name).inflight = n
	d.mu.Unlock()
}

// settled counts a settle of one of name's claims with outcome o: an ack
// is delivered, a retry scheduled or a quarantine is failed (as the
// fairrelay_destination_* metrics count them).
func (d *destBreakers) settled(name string, o queue.Outcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch o {
	case queue.Acked:
		d.count(name).delivered++
	case queue.RetryScheduled, queue.Quarantined:
		d.count(name).failed++
	}
}

// loopView returns the map itself, for the loop's goroutine only: it is
// the one writer (get), so its reads need no lock and no copy.
func (d *destBreakers) loopView() map[string]*breaker { return d.m }

// all returns a copy of the map.
func (d *destBreakers) all() map[string]*breaker {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.m)
}

// DestinationBreakers returns the state of every destination's breaker,
// by destination name (queue.DefaultDestination, "", is the one Breaker
// returns). It knows the destinations registered at the relay's last read
// of them and those it claimed for. It is safe to call at any time, from
// any goroutine.
func (r *Relay) DestinationBreakers() map[string]BreakerState {
	out := make(map[string]BreakerState)
	for name, b := range r.dests.all() {
		out[name] = b.snapshot()
	}
	return out
}

// DestinationStatus is what a relay knows of one destination: its
// breaker and its counts since the relay was made (Relay.DestinationStatus).
type DestinationStatus struct {
	Name      string       // the destination's name; queue.DefaultDestination ("") for the default one
	Label     string       // its metric label (DestinationLabel)
	Breaker   BreakerState // its breaker (the default destination's is Relay.Breaker)
	Delivered int64        // its events acked by this relay
	Failed    int64        // its failed deliveries settled (retry scheduled or quarantined)
	InFlight  int          // its handlers running now
}

// DestinationStatus returns what the relay knows of each destination,
// sorted by name (so the default destination, "", first): every
// destination DestinationBreakers names, and any other whose events it
// ran. The counts are this relay's own since it was made, as the
// fairrelay_destination_* metrics count them; other relays on the same
// queue count their own. It is safe to call at any time, from any
// goroutine.
func (r *Relay) DestinationStatus() []DestinationStatus {
	brs := r.dests.all()
	r.dests.mu.Lock()
	counts := make(map[string]destCounts, len(r.dests.counts))
	for name, c := range r.dests.counts {
		counts[name] = *c
	}
	r.dests.mu.Unlock()
	names := make([]string, 0, len(brs)+len(counts))
	for name := range brs {
		names = append(names, name)
	}
	for name := range counts {
		if brs[name] == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]DestinationStatus, len(names))
	for i, name := range names {
		c := counts[name]
		st := DestinationStatus{Name: name, Label: DestinationLabel(name), Delivered: c.delivered, Failed: c.failed, InFlight: c.inflight}
		if b := brs[name]; b != nil {
			st.Breaker = b.snapshot()
		} else {
			st.Breaker = BreakerState{State: BreakerClosed}
		}
		out[i] = st
	}
	return out
}

// brOf is the breaker that cl's answers feed: its destination's with a
// DestinationQueue, the relay's one breaker otherwise.
func (l *loop) brOf(cl *claim) *breaker {
	if l.r.dq == nil {
		return l.r.br
	}
	return l.destBreaker(cl.c.Destination)
}

// destBreaker returns the breaker of name, and starts its metric series
// when it is new.
func (l *loop) destBreaker(name string) *breaker {
	b, isNew := l.r.dests.get(name)
	if isNew {
		l.r.m.destination(name)
	}
	return b
}

// refreshDests rereads the registered destinations once
// Options.DestinationRefresh has passed since the last read (at once at
// the start), so that every one of them is capped and broken from its
// first claim on.
func (l *loop) refreshDests() {
	if l.r.dq == nil || l.blocked() || time.Now().Before(l.destRefreshAt) {
		return
	}
	l.destRefreshAt = time.Now().Add(l.r.o.DestinationRefresh)
	ds, err := l.r.dq.RegisteredDestinations(l.sctx)
	if err != nil {
		l.storeFailed("destinations", err)
		return
	}
	l.storeOK()
	for _, d := range ds {
		l.destBreaker(d.Name)
	}
}

// destFilter is the filter of a claim of n with a DestinationQueue, with
// the destinations whose probe it carries (only when probes), and whether
// any destination the relay knows may be claimed at all.
//
// While the relay knows more than one destination, each has
// Options.DestinationSlots handler slots of its own (running or parked
// claims; free): its room in this claim is what it has left of them, and a
// destination with none left is excluded. A breaker open and not yet due for a probe, or
// probing, excludes its destination; one due for a probe gives it room 1
// (when probes; else it stays excluded).
func (l *loop) destFilter(n int, now time.Time, probes bool) (f queue.ClaimFilter, probing []string, ok bool) {
	brs := l.r.dests.loopView()
	capped := len(brs) > 1
	var parked map[string]int
	if capped && len(l.parked) > 0 {
		parked = make(map[string]int)
		for _, cl := range l.parked {
			parked[cl.c.Destination]++
		}
	}
	names := make([]string, 0, len(brs))
	for name := range brs {
		names = append(names, name)
	}
	sort.Strings(names) // a stable filter: the same state, the same call
	for _, name := range names {
		b := brs[name]
		room := n
		if capped {
			room = min(n, l.r.o.DestinationSlots-l.destRun[name]-parked[name])
		}
		switch {
		case b.state == BreakerProbing, b.state == BreakerOpen && (!probes || !b.probeDue(now)):
			room = 0
		case b.state == BreakerOpen:
			room = min(room, 1)
			if room > 0 {
				probing = append(probing, name)
			}
		}
		if room <= 0 {
			f.Exclude = append(f.Exclude, name)
			continue
		}
		ok = true
		if room < n {
			if f.Room == nil {
				f.Room = make(map[string]int)
			}
			f.Room[name] = room
		}
	}
	return f, probing, ok
}

// probeRoom reports that destination name has a handler slot for a probe:
// the loop neither claims for nor waits on a probe that its cap would
// refuse (a handler of that destination that ends wakes the loop anyway).
func (l *loop) probeRoom(name string, brs map[string]*breaker) bool {
	if len(brs) <= 1 || l.destRun[name] < l.r.o.DestinationSlots && len(l.parked) == 0 {
		return true
	}
	used := l.destRun[name]
	for _, cl := range l.parked {
		if cl.c.Destination == name {
			used++
		}
	}
	return used < l.r.o.DestinationSlots
}

// anyProbeDue reports a destination's breaker due for its probe, with a
// slot for it.
func (l *loop) anyProbeDue(now time.Time) bool {
	brs := l.r.dests.loopView()
	for name, b := range brs {
		if b.probeDue(now) && l.probeRoom(name, brs) {
			return true
		}
	}
	return false
}

// nextProbe returns the earliest probe time of an open breaker whose
// destination has a slot for it (zero when there is none).
func (l *loop) nextProbe() time.Time {
	var t time.Time
	brs := l.r.dests.loopView()
	for name, b := range brs {
		if b.state == BreakerOpen && (t.IsZero() || b.next.Before(t)) && l.probeRoom(name, brs) {
			t = b.next
		}
	}
	return t
}

// claimFor is claim with a DestinationQueue: ClaimFor with destFilter's
// filter, the probes of the breakers due for one riding along with the
// claims of the destinations that are up.
func (l *loop) claimFor(now clock.Tick) {
	l.allOut = false
	for !l.blocked() && l.free() > 0 {
		t := time.Now()
		if !l.anyProbeDue(t) && (now < l.nextClaim || l.gathering()) {
			return
		}
		n := min(l.r.o.Batch, l.free())
		f, probing, ok := l.destFilter(n, t, true)
		if !ok {
			l.allOut = true // wait for a slot, a probe's time or a refresh
			return
		}
		for _, name := range probing {
			l.destBreaker(name).startProbe(t)
		}
		cs, err := l.r.dq.ClaimFor(l.sctx, now, n, f)
		l.lastAsk = time.Now()
		l.freedAt = time.Time{}
		if err != nil {
			for _, name := range probing {
				l.destBreaker(name).probeLost(time.Now())
			}
			l.storeFailed("claim", err)
			return
		}
		l.storeOK()
		l.filtered = len(f.Exclude) > 0 || len(f.Room) > 0
		more := l.took(now, cs, n)
		l.probed(probing, cs)
		if !more || len(probing) > 0 {
			return
		}
	}
}

// probed hands each probing breaker its probe: the claim of its
// destination in cs, or none (nothing of it was due: it waits one more
// interval).
func (l *loop) probed(probing []string, cs []queue.Claim) {
	for _, name := range probing {
		var cl *claim
		for _, c := range cs {
			if c.Destination == name {
				cl = l.held(c)
				break
			}
		}
		l.destBreaker(name).probeClaimed(cl, time.Now())
		if cl != nil {
			l.r.log.Info("relay: breaker probe", "destination", DestinationLabel(name), "event", cl.c.EventID, "flow", cl.c.Flow, "attempt", cl.c.Attempts)
		}
	}
}

// noteClaimed tells each breaker counting failures of the claims of its
// destination started now (breaker.claimed, per destination).
func (l *loop) noteClaimed(cls []*claim) {
	if l.r.dq == nil {
		l.r.br.claimed(cls)
		return
	}
	for _, cl := range cls {
		if b := l.brOf(cl); b.failures > 0 && !b.other && cl.c.Flow != b.flow {
			b.other = true
		}
	}
}

// othersHeld reports claims held (running or parked) of flows of cl's
// destination other than cl's own.
func (l *loop) othersHeld(cl *claim) bool {
	if l.r.dq == nil {
		return len(l.byFlow) > 0 || len(l.parked) > 0
	}
	d := cl.c.Destination
	for _, m := range []map[string]*claim{l.byFlow, l.parked} {
		for _, o := range m {
			if o != cl && o.c.Destination == d {
				return true
			}
		}
	}
	return false
}
