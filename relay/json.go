package relay

import (
	"context"
	"encoding/json"
)

// JSONHandler returns a Handler that decodes each event's body into a T
// with encoding/json and calls f with it, the way a typed worker is
// written: f sees a value, never bytes.
//
// A body that does not decode into T (not JSON, the wrong JSON type for a
// field, trailing data after the value) fails permanently with
// ReasonInvalidBody and the decoder's error as its text: no retry can
// make it decode, so the event is quarantined at once and f is not called
// (an operator fixes the consumer or the event and redrives it). Fields of
// the body that T does not have are ignored, as encoding/json does by
// default, so that a producer may add a field before every consumer knows
// it; a consumer that must refuse them writes its own Handler with a
// json.Decoder and DisallowUnknownFields.
//
// f's error is the handler's: nil for success, Fail, FailPermanent,
// FailDestination or any other error, as for any Handler. T is decoded
// afresh for every event; a pointer T is allocated by encoding/json.
func JSONHandler[T any](f func(ctx context.Context, e Event, v T) error) Handler {
	return HandlerFunc(func(ctx context.Context, e Event) error {
		var v T
		if err := json.Unmarshal(e.Body, &v); err != nil {
			return FailPermanent(ReasonInvalidBody, err)
		}
		return f(ctx, e, v)
	})
}
