package relay

import "sync/atomic"

// Totals counts what became of the relay's claims ((*Relay).Totals). Every
// claim ends as exactly one of Delivered, Retried, Quarantined, LeasesLost
// or SettleErrors, or is still InFlight, so
//
//	Delivered + Retried + Quarantined + LeasesLost + SettleErrors + InFlight == Claimed
type Totals struct {
	Claimed     int64 // events claimed (probes included)
	Delivered   int64 // settled Acked: the receiver applied the event
	Retried     int64 // settled RetryScheduled: the queue tries it again
	Quarantined int64 // settled Quarantined: attempts exhausted, or permanent
	Permanent   int64 // of Quarantined, those quarantined because the failure was permanent
	// LeasesLost counts claims given up before their settle (the lease
	// was lost, ran out, the flow was claimed again, or a shutdown left
	// the claim to its lease) and settles answered Stale or Expired.
	LeasesLost   int64
	SettleErrors int64 // settle items the queue refused (queue.SettleResult.Err)
	InFlight     int64 // claimed and not yet ended as one of the above
}

// totals are the relay's counters.
type totals struct {
	claimed, delivered, retried, quarantined, permanent, lost, settleErrors atomic.Int64
}

// Totals returns the relay's counts so far. It is safe to call at any
// time, from any goroutine; InFlight is never negative.
func (r *Relay) Totals() Totals {
	t := &r.tot
	// The ends first, then Claimed: a claim is counted claimed before it
	// ends, so Claimed read last is never below their sum.
	out := Totals{
		Delivered:    t.delivered.Load(),
		Retried:      t.retried.Load(),
		Quarantined:  t.quarantined.Load(),
		Permanent:    t.permanent.Load(),
		LeasesLost:   t.lost.Load(),
		SettleErrors: t.settleErrors.Load(),
	}
	out.Claimed = t.claimed.Load()
	out.InFlight = out.Claimed - out.Delivered - out.Retried - out.Quarantined - out.LeasesLost - out.SettleErrors
	return out
}
