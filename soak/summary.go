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
	Restarts                                 int // processes started again after an exit
	Crashes                                  int // exits the soak did not cause
	Chaos                                    time.Duration
	Drain                                    time.Duration
	Duration                                 time.Duration
	Result
}

// Failed reports whether the run broke any guarantee.
func (s Summary) Failed() bool { return len(s.Problems) > 0 }

// String is the one summary line:
//
//	soak: backend=sqlite kills=K events=E flows=F lost=L duplicated=D stuck=S quarantined=Q (injected=I) ...
func (s Summary) String() string {
	verdict := "ok"
	if s.Failed() {
		verdict = fmt.Sprintf("FAILED(%d problems)", len(s.Problems))
	}
	return fmt.Sprintf("soak: backend=%s kills=%d events=%d flows=%d lost=%d duplicated=%d stuck=%d quarantined=%d (injected=%d) "+
		"killed=receiver:%d,relay:%d,producer:%d retried=%d crashes=%d restarts=%d receipts=%d duration=%s (chaos %s, drain %s) seed=%d %s",
		s.Backend, s.Kills, s.Events, s.Flows, s.Lost, s.Duplicated, s.Stuck, s.Quarantined, s.Injected,
		s.ReceiverKills, s.RelayKills, s.ProducerKills, s.Retried, s.Crashes, s.Restarts, s.Receipts, s.Duration.Round(time.Second), s.Chaos.Round(time.Second), s.Drain.Round(time.Second), s.Seed, verdict)
}
