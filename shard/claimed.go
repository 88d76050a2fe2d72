package shard

import "github.com/fairrelay/fairrelay/clock"

// claimMap remembers the shard of each event a Store claimed (or
// extended), so that the claim's settle or extension goes straight to its
// shard. It is a routing hint only: a Store that finds no entry asks each
// shard for the event (shardOfEvent), so dropping an entry early costs at
// most N reads and never changes an answer (of an ID in one shard; an ID
// reused in another shard, §7.10, is found in the first that has it).
//
// An entry goes when its claim is answered for (any per-item answer to a
// settle, an extension answered stale or expired or with an item error:
// after those the worker stops, docs/contract.md §7.2). A claim nobody
// answers for through this Store (abandoned by a relay at shutdown, kept
// from the caller by a failing shard of a batch, settled by another
// process after its lease ran out, docs/contract.md §7.10) is dropped by
// time instead, in two generations: new entries (a claim, or a claim
// extended in a batch, with its new lease end) go into cur; a sweep at
// now, once now has reached oldEnd (the latest lease end in old), drops
// old whole and makes cur the new old. Every call that a shard accepted
// sweeps at its now. An entry is therefore never dropped before its lease
// end, and it lives at most two generations, each spanning no more than
// the longest lease plus the gap to the next call: the map holds the
// claims made or extended in about the last two leases, whatever ran
// before, at O(1) per call (a sweep drops a map; it walks no entry).
//
// A call whose now is below the last sweep's (a clock set back: each
// shard checks its own mark, so another shard may accept it) drops both
// generations: their ends no longer bound anything, and they are hints.
type claimMap struct {
	cur, old       map[string]int
	curEnd, oldEnd clock.Tick
	last           clock.Tick // the now of the last sweep
}

// put records that id is in shard i, its lease ending at end.
func (m *claimMap) put(id string, i int, end clock.Tick) {
	if m.cur == nil {
		m.cur = map[string]int{}
	}
	m.cur[id] = i
	m.curEnd = max(m.curEnd, end)
}

// get is the shard recorded for id.
func (m *claimMap) get(id string) (int, bool) {
	if i, ok := m.cur[id]; ok {
		return i, true
	}
	i, ok := m.old[id]
	return i, ok
}

// drop forgets id.
func (m *claimMap) drop(id string) {
	delete(m.cur, id)
	delete(m.old, id)
}

// sweep drops the old generation once every lease in it ended by now (or
// at once when it is empty), and starts a new one; at most twice (then
// both are empty). A now below the last sweep's drops both.
func (m *claimMap) sweep(now clock.Tick) {
	if now < m.last {
		*m = claimMap{last: now}
		return
	}
	m.last = now
	for len(m.old)+len(m.cur) > 0 && (now >= m.oldEnd || len(m.old) == 0) {
		m.old, m.oldEnd = m.cur, m.curEnd
		m.cur, m.curEnd = nil, 0
	}
}
