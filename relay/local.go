package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/receiver"
)

// LocalReceiver is what NewLocal delivers to: a receiver store of either
// backend (receiver.Store), or inbox.Batcher over one (group commit).
type LocalReceiver interface {
	Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error)
}

// NewLocal returns a Handler that delivers each event to r in this process,
// with the same settle reasons an HTTP delivery (NewHTTP) to the receiver
// server (inbox.NewServer) gives:
//
//	accepted, duplicate            nil (success: the effect is applied, once)
//	pruned                         nil (success: applied once, its receipt since pruned)
//	conflict, gap                  Fail("conflict" | "gap")
//	unsupported_delta              Fail("unsupported_delta")
//	ErrInvalidBody, ErrInvalid     FailPermanent("invalid_body") (HTTP: 400)
//	ErrEffect, any other error     FailDestination("unavailable") (HTTP: 503, 500)
//
// The event's ID, flow, sequence number and body reach Receive unchanged.
func NewLocal(r LocalReceiver) Handler {
	return HandlerFunc(func(ctx context.Context, e Event) error {
		out, err := r.Receive(ctx, receiver.Message{ID: e.ID, Flow: e.Flow, Seq: e.Seq, Body: e.Body})
		switch {
		case errors.Is(err, receiver.ErrInvalidBody), errors.Is(err, receiver.ErrInvalid):
			return FailPermanent(ReasonInvalidBody, err)
		case err != nil:
			return FailDestination(ReasonUnavailable, err)
		}
		if out.Applied() { // accepted, duplicate or pruned: delivered
			return nil
		}
		switch out {
		case receiver.Conflict:
			return Fail(ReasonConflict, nil)
		case receiver.Gap:
			return Fail(ReasonGap, nil)
		case receiver.UnsupportedDelta:
			return Fail(ReasonUnsupportedDelta, nil)
		}
		return Fail(ReasonUnavailable, fmt.Errorf("relay: unknown receiver outcome %q", out))
	})
}
