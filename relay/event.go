package relay

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Event is one claimed event as a handler sees it.
type Event struct {
	ID         string // the event ID, also the idempotency key
	Flow       string // the event's flow
	Seq        int64  // the event's sequence number in its flow (1, 2, 3 …)
	Body       []byte // the body, byte-identical to the enqueued one; do not modify
	Attempt    int    // the attempt of this delivery in the current round (1 for the first)
	Generation int64  // the claim's generation
	// Destination is the destination the event's flow delivers to
	// (queue.Claim.Destination; queue.DefaultDestination, "", for a flow
	// that named none, and always with a queue without destinations).
	// Destinations routes on it.
	Destination string
}

// Handler delivers one event. It returns nil when the event was applied (or
// had been applied before), and an error when it was not: an error made by
// [Fail], [FailPermanent] or [FailDestination] carries the settle reason
// and the failure's kind, any other error settles with [ReasonHandler] (a
// transient event failure). The settle records the error's text
// (queue.Result.Error). A panic is caught and settles with [ReasonPanic].
//
// ctx is cancelled when the relay can no longer keep the lease (its cause is
// [ErrLeaseLost]) or when a shutdown's grace period ends (cause
// [ErrShutdown]); a handler should then return promptly. Handlers of
// different flows run concurrently; two handlers of one flow never do.
type Handler interface {
	Handle(ctx context.Context, e Event) error
}

// HandlerFunc adapts a function to a [Handler].
type HandlerFunc func(ctx context.Context, e Event) error

// Handle calls f(ctx, e).
func (f HandlerFunc) Handle(ctx context.Context, e Event) error { return f(ctx, e) }

// Default settle reasons.
const (
	// ReasonHandler is the reason of a failure whose error does not carry
	// one (any error not made by Fail, or a Fail reason the queue would
	// refuse).
	ReasonHandler = "handler_error"
	// ReasonPanic is the reason of a handler that panicked.
	ReasonPanic = "panic"
)

// Failure is a handler error that names its settle reason and says how
// the failure is to be treated (docs/contract.md §7.8). Make one with
// [Fail], [FailPermanent] or [FailDestination]; find one with errors.As.
//
// A failure is the event's fault (the receiver refused this body or this
// sequence: retrying it later may help, or, when Permanent, cannot) or the
// destination's (Destination: the receiver is down, slow, refuses every
// request, or asks the relay to slow down). Destination failures feed the
// relay's breaker (Options.Breaker); event failures never do.
type Failure struct {
	Reason string // the settle reason recorded by the queue
	Err    error  // the underlying error, may be nil; its text is the settle's error text (queue.Result.Error)
	// Permanent quarantines the event at once (queue.Result.Permanent):
	// retrying cannot help.
	Permanent bool
	// RetryAfter, when > 0, is the least wait before the event is tried
	// again (queue.Result.RetryAfter, in ticks of the relay's clock: one
	// tick is a millisecond), capped by the queue's policy; with a
	// Destination failure it also sets the breaker's next probe (capped by
	// BreakerOptions.MaxProbe).
	RetryAfter time.Duration
	// Destination marks the destination's fault, not the event's: the
	// breaker counts it.
	Destination bool
}

// Error returns "reason" or "reason: err".
func (f *Failure) Error() string {
	if f.Err == nil {
		return f.Reason
	}
	return f.Reason + ": " + f.Err.Error()
}

// Unwrap returns the underlying error.
func (f *Failure) Unwrap() error { return f.Err }

// WithRetryAfter sets RetryAfter (a d <= 0 clears it) and returns f.
func (f *Failure) WithRetryAfter(d time.Duration) *Failure {
	f.RetryAfter = max(d, 0)
	return f
}

// Fail returns an error that settles the event as a transient failure of
// the event with reason: the queue retries it after its backoff. The reason
// follows the queue's rules (1..queue.MaxReasonLen bytes of printable
// UTF-8); a reason outside them is replaced by [ReasonHandler] when the
// relay settles, so that the failure is still recorded.
func Fail(reason string, err error) error {
	return &Failure{Reason: reason, Err: err}
}

// FailPermanent returns a failure that quarantines the event at once,
// whatever attempts remain: the receiver refused this body for good.
func FailPermanent(reason string, err error) *Failure {
	return &Failure{Reason: reason, Err: err, Permanent: true}
}

// FailDestination returns a transient failure that is the destination's
// fault (down, timing out, refusing every request): the breaker counts it
// (Options.Breaker).
func FailDestination(reason string, err error) *Failure {
	return &Failure{Reason: reason, Err: err, Destination: true}
}

// Sentinel errors; test for them with errors.Is.
var (
	// ErrInvalid reports an option or argument outside its documented range.
	ErrInvalid = errors.New("relay: invalid option")
	// ErrRunning reports a second Run of one Relay.
	ErrRunning = errors.New("relay: already run")
	// ErrLeaseLost is the cause of a handler context cancelled because the
	// lease of its claim was lost (an extension answered stale or expired,
	// the lease ran out, or the queue handed the flow out again).
	ErrLeaseLost = errors.New("relay: lease lost")
	// ErrShutdown is the cause of a handler context cancelled because the
	// shutdown grace period ended.
	ErrShutdown = errors.New("relay: shutdown grace period ended")
	// ErrAbandoned reports a Run that returned while handlers were still
	// running after their contexts had been cancelled.
	ErrAbandoned = errors.New("relay: handlers still running at return")
)

// result turns a handler's return into a settle result: the reason, the
// failure's kind and its error text (user info in URLs redacted).
func result(err error) queue.Result {
	if err == nil {
		return queue.Result{OK: true}
	}
	res := queue.Result{Reason: ReasonHandler, Error: errorText(err)}
	var f *Failure
	if errors.As(err, &f) {
		if queue.CheckReason(f.Reason) == nil {
			res.Reason = f.Reason
		}
		res.Permanent = f.Permanent
		res.RetryAfter = ticks(f.RetryAfter)
	}
	return res
}

// ticks is d in ticks of the relay's clock (milliseconds), rounded up so
// that a positive wait is never 0. It divides before it rounds, so that
// the longest durations do not wrap negative.
func ticks(d time.Duration) clock.Tick {
	if d <= 0 {
		return 0
	}
	t := d / time.Millisecond
	if d%time.Millisecond != 0 {
		t++
	}
	return clock.Tick(t)
}

// errorText is the settle's error text of err: its message with user info
// redacted from every URL (RedactURLs), made printable and cut by
// queue.ErrorText. For a *Failure itself it is the text of Failure.Err
// ("" when nil): the reason is recorded beside it, not repeated.
func errorText(err error) string {
	msg := err.Error()
	if f, ok := err.(*Failure); ok {
		msg = ""
		if f.Err != nil {
			msg = f.Err.Error()
		}
	}
	return queue.ErrorText(RedactURLs(msg))
}

// userInfo matches the user info of a URL inside a text.
var userInfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s@"']+@`)

// RedactURLs returns s with the user info (user:password@) of every URL in
// it replaced by "REDACTED@", so that a password given inside an address
// never reaches a log, a metric or the queue's error text.
func RedactURLs(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return userInfo.ReplaceAllString(s, "${1}REDACTED@")
}

// panicError is the error of a handler that panicked.
type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.v) }
