package relay

import (
	"context"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

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
}

// Handler delivers one event. It returns nil when the event was applied (or
// had been applied before), and an error when it was not: an error made by
// [Fail] carries the settle reason, any other error settles with
// [ReasonHandler]. A panic is caught and settles with [ReasonPanic].
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

// Failure is a handler error that names its settle reason. Make one with
// [Fail]; find one with errors.As.
type Failure struct {
	Reason string // the settle reason recorded by the queue
	Err    error  // the underlying error, may be nil
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

// Fail returns an error that settles the event as a failure with reason.
// The reason follows the queue's rules (1..queue.MaxReasonLen bytes of
// printable UTF-8); a reason outside them is replaced by [ReasonHandler] when
// the relay settles, so that the failure is still recorded.
func Fail(reason string, err error) error {
	return &Failure{Reason: reason, Err: err}
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

// result turns a handler's return into a settle result.
func result(err error) queue.Result {
	if err == nil {
		return queue.Result{OK: true}
	}
	var f *Failure
	if errors.As(err, &f) && validReason(f.Reason) {
		return queue.Result{Reason: f.Reason}
	}
	return queue.Result{Reason: ReasonHandler}
}

// validReason mirrors the queue's reason rules so that a handler's bad
// reason cannot make its settle item invalid.
func validReason(s string) bool {
	if len(s) == 0 || len(s) > queue.MaxReasonLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// panicError is the error of a handler that panicked.
type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.v) }
