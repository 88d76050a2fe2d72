package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/relay"
)

// Local returns a relay.Handler that delivers each event to r in this
// process, with the mapping the experiment uses and the same settle reasons
// an HTTP delivery to NewServer gives:
//
//	accepted, duplicate            nil (success: the effect is applied, once)
//	conflict, gap                  relay.Fail("conflict" | "gap")
//	unsupported_delta              relay.Fail("unsupported_delta")
//	ErrInvalidBody, ErrInvalid     relay.Fail("invalid_body") (HTTP: 400)
//	ErrEffect, any other error     relay.Fail("unavailable") (HTTP: 503, 500)
//
// The event's ID, flow, sequence number and body reach Receive unchanged.
func Local(r Receiver) relay.Handler {
	return relay.HandlerFunc(func(ctx context.Context, e relay.Event) error {
		out, err := r.Receive(ctx, receiver.Message{ID: e.ID, Flow: e.Flow, Seq: e.Seq, Body: e.Body})
		switch {
		case errors.Is(err, receiver.ErrInvalidBody), errors.Is(err, receiver.ErrInvalid):
			return relay.Fail(relay.ReasonInvalidBody, err)
		case err != nil:
			return relay.Fail(relay.ReasonUnavailable, err)
		}
		switch out {
		case receiver.Accepted, receiver.Duplicate:
			return nil
		case receiver.Conflict:
			return relay.Fail(relay.ReasonConflict, nil)
		case receiver.Gap:
			return relay.Fail(relay.ReasonGap, nil)
		case receiver.UnsupportedDelta:
			return relay.Fail(relay.ReasonUnsupportedDelta, nil)
		}
		return relay.Fail(relay.ReasonUnavailable, fmt.Errorf("inbox: unknown receiver outcome %q", out))
	})
}
