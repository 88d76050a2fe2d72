package soak

import (
	"fmt"
	"time"
)

// Summary is a whole run: the chaos, the drain and what Check found.
type Summary struct {
	Backend                                  string
	Stores                                   Stores // where the queue and the receiver were
	Seed                                     int64
	Kills                                    int // SIGKILLs sent during the chaos: to the receiver, the relays and the producers
	ReceiverKills, RelayKills, ProducerKills int
	Faults                                   FaultCounts // faults injected by kind (FaultKill: the kills); a cut or terminate that found nothing to end is not counted
	StartRefused                             int         // starts that exited, not ready, while the server was unreachable (not crashes)
	StoreErrors                              int         // the relays' failed queue calls, each retried (their logs)
	Recovered                                int         // the relays' returns to working queue calls after failures (their logs)
	BreakerOpens                             int         // the times a relay's breaker opened (the receiver unreachable: their logs)
	ProducerRetries                          int         // the producers' failed calls, each retried
	Restarts                                 int         // processes started again after an exit
	Crashes                                  int         // exits the soak did not cause
	Chaos                                    time.Duration
	Recovery                                 time.Duration // from the end of the chaos until the chaos's relays left nothing pending or in flight
	Drain                                    time.Duration
	Duration                                 time.Duration
	Result
}

// Failed reports whether the run broke any guarantee.
func (s Summary) Failed() bool { return len(s.Problems) > 0 }

// String is the one summary line:
//
//	soak: backend=B kills=K faults=KIND:N,... events=E flows=F lost=L duplicated=D stuck=S quarantined=Q (injected=I) ...
func (s Summary) String() string {
	verdict := "ok"
	if s.Failed() {
		verdict = fmt.Sprintf("FAILED(%d problems)", len(s.Problems))
	}
	backend := s.Backend
	if s.Stores.Shards > 0 {
		backend += fmt.Sprintf(" shards=%d", s.Stores.Shards)
	}
	return fmt.Sprintf("soak: backend=%s kills=%d faults=%s events=%d flows=%d lost=%d duplicated=%d stuck=%d quarantined=%d (injected=%d) pruned=%d "+
		"killed=receiver:%d,relay:%d,producer:%d retried=%d store_errors=%d recovered=%d breaker_opens=%d producer_retries=%d start_refused=%d crashes=%d restarts=%d receipts=%d duration=%s (chaos %s, recovery %s, drain %s) seed=%d %s",
		backend, s.Kills, s.Faults, s.Events, s.Flows, s.Lost, s.Duplicated, s.Stuck, s.Quarantined, s.Injected, s.Pruned,
		s.ReceiverKills, s.RelayKills, s.ProducerKills, s.Retried, s.StoreErrors, s.Recovered, s.BreakerOpens, s.ProducerRetries, s.StartRefused, s.Crashes, s.Restarts, s.Receipts, s.Duration.Round(time.Second), s.Chaos.Round(time.Second), s.Recovery.Round(time.Second), s.Drain.Round(time.Second), s.Seed, verdict)
}
