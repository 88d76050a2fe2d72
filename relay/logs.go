package relay

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	"golang.org/x/time/rate"
)

// The failure log's limits: per reason, at most failureLogBurst lines at
// once and failureLogRate lines per second after that; the lines left out
// are counted in one line per reason at most every failureLogSummary.
const (
	failureLogRate    = 2
	failureLogBurst   = 5
	failureLogSummary = 10 * time.Second
)

// failureLog logs failed deliveries at WARN, rate-limited per reason (the
// bounded label of the metrics, so the map stays small), and counts what
// it leaves out. Only the loop's goroutine uses it.
type failureLog struct {
	log        *slog.Logger
	lim        map[string]*rate.Limiter
	suppressed map[string]int64
	next       time.Time // when the suppressed counts are logged; zero when none
}

func newFailureLog(log *slog.Logger) *failureLog {
	return &failureLog{log: log, lim: map[string]*rate.Limiter{}, suppressed: map[string]int64{}}
}

// allow reports whether a failure of reason may be logged now, and counts
// it as suppressed when not.
func (f *failureLog) allow(reason string, now time.Time) bool {
	key := reasonLabel(reason)
	l := f.lim[key]
	if l == nil {
		l = rate.NewLimiter(failureLogRate, failureLogBurst)
		f.lim[key] = l
	}
	if l.AllowN(now, 1) {
		return true
	}
	if len(f.suppressed) == 0 {
		f.next = now.Add(failureLogSummary)
	}
	f.suppressed[key]++
	return false
}

// summary logs the suppressed counts once their time has come (or at
// once when force), one line per reason.
func (f *failureLog) summary(now time.Time, force bool) {
	if len(f.suppressed) == 0 || (!force && now.Before(f.next)) {
		return
	}
	for _, reason := range slices.Sorted(maps.Keys(f.suppressed)) {
		f.log.Warn("relay: failure lines suppressed", "reason", reason, "count", f.suppressed[reason])
	}
	clear(f.suppressed)
	f.next = time.Time{}
}

// deadline returns when summary has lines to log (zero when none).
func (f *failureLog) deadline() time.Time { return f.next }
