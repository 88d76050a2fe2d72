package inbox

import (
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of the refusal log's pace (ServerOptions.LogEvery, LogBurst).
const (
	DefaultLogEvery = time.Second
	DefaultLogBurst = 5
)

// refusalLog writes one WARN line per refusal, at most burst at once and
// then one per every for each reason, so that an outage of thousands of
// refused deliveries gives a handful of lines per second; the next line of
// a reason counts the ones it did not write.
type refusalLog struct {
	log   *slog.Logger
	now   func() time.Time
	every rate.Limit
	burst int

	mu  sync.Mutex
	per map[string]*reasonPace // by reason: the server's bounded set of labels
}

type reasonPace struct {
	lim        *rate.Limiter
	suppressed int64
}

func newRefusalLog(log *slog.Logger, now func() time.Time, every time.Duration, burst int) *refusalLog {
	if every == 0 {
		every = DefaultLogEvery
	}
	if burst <= 0 {
		burst = DefaultLogBurst
	}
	l := &refusalLog{log: log, now: now, every: rate.Every(every), burst: burst, per: map[string]*reasonPace{}}
	if every < 0 {
		l.every = rate.Inf
	}
	return l
}

// warn logs a refusal of reason with attrs, unless the reason's pace is
// spent; then it only counts it.
func (l *refusalLog) warn(reason string, attrs ...any) {
	l.mu.Lock()
	p := l.per[reason]
	if p == nil {
		p = &reasonPace{lim: rate.NewLimiter(l.every, l.burst)}
		l.per[reason] = p
	}
	if !p.lim.AllowN(l.now(), 1) {
		p.suppressed++
		l.mu.Unlock()
		return
	}
	n := p.suppressed
	p.suppressed = 0
	l.mu.Unlock()
	args := append([]any{"reason", reason}, attrs...)
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	l.log.Warn("inbox: refused a request", args...)
}
