package writerlock

import (
	"fmt"
	"time"
)

// Keep lets a process keep the file's turn for a short run of consecutive
// writes instead of handing it over after every one.
//
// Why: a hand-over between processes costs more than the lock. The next
// process starts with a cold SQLite page cache (a connection drops its cache
// when another one has written the WAL) and, measured on this project's
// machines, its fsync'd commit takes longer than a run of commits from one
// process. With a hand-over after every write, 8 claimant processes drained a
// queue at about 0.4 of one process's rate; see docs/performance.md.
//
// A run ends at whichever comes first: MaxRun writes, or a write that ends
// more than MaxHold after the run's first write took the turn, or Linger
// without a next write. Then the turn goes to the writer queued at the gate,
// and this process queues behind the others, so turns still go round in
// arrival order, MaxRun writes at a time. The price is latency: a waiter can
// wait for up to MaxRun writes (at most MaxHold plus one write) of every
// process ahead of it, plus Linger when a run ends for want of a write.
type Keep struct {
	// MaxRun is the most consecutive writes one run may take; 0 or 1 keeps
	// nothing.
	MaxRun int
	// MaxHold ends a run whose writes have held the turn this long.
	MaxHold time.Duration
	// Linger is how long a kept turn waits for the process's next write
	// before it is handed over.
	Linger time.Duration
}

// DefaultKeep is what [Open] uses: runs of up to 64 writes within 20 ms,
// the turn kept for 2 ms between two writes.
//
// Measured (docs/performance.md, tuning runs of 2026-12-02 with these runs
// and a 1 ms linger): 8 claimant processes draining one queue reached 0.90 (0.85–1.05) of one process's rate, against 0.45 with the turn
// handed over after every write, each process within 0.88–1.11 of a fair
// share, the longest write about 200 ms, against 30 ms. Shorter runs cost
// throughput: 8 writes within 5 ms gave 0.57 (0.52–1.06), 32 writes within
// 10 ms 0.73 (0.69–0.99). A program that needs shorter waits more than
// throughput opens its Lock with a smaller Keep.
var DefaultKeep = Keep{MaxRun: 64, MaxHold: 20 * time.Millisecond, Linger: 2 * time.Millisecond}

func (k Keep) check() error {
	if k.MaxRun < 0 || k.MaxHold < 0 || k.Linger < 0 {
		return fmt.Errorf("writerlock: keep %+v has a negative field", k)
	}
	if k.MaxRun > 1 && (k.MaxHold == 0 || k.Linger == 0) {
		return fmt.Errorf("writerlock: keep %+v: a run needs a positive MaxHold and Linger", k)
	}
	return nil
}

// keeps reports whether a run of run writes, held for held so far, keeps the
// turn for one more.
func (k Keep) keeps(run int, held time.Duration) bool {
	return run < k.MaxRun && held < k.MaxHold
}
