// Package webhook signs and verifies HTTP deliveries the way the Standard
// Webhooks convention (https://www.standardwebhooks.com) does, plus one
// fairrelay header pair that binds the flow and sequence number into a
// second signature.
//
// A delivery carries three standard headers:
//
//   - [HeaderID] (webhook-id): the event ID, also sent as [HeaderIdempotencyKey],
//     as it is when it is printable ASCII, else in the ASCII form of [EncodeID]
//     (so that every HTTP stack reads the same bytes and the signature verifies
//     in the official Standard Webhooks libraries too); [DecodeID] reads it;
//   - [HeaderTimestamp] (webhook-timestamp): Unix seconds when the request was signed;
//   - [HeaderSignature] (webhook-signature): one or more space-separated
//     "v1,<base64>" signatures, each base64(HMAC-SHA256(secret, id + "." + timestamp + "." + body)).
//
// Several signatures in one header are allowed (the standard's key rotation):
// [Verify] accepts the request when any "v1" entry matches and ignores entries
// of other versions. [SetHeadersRotating] signs with several secrets, and
// [VerifyAny] and [VerifyRouteAny] accept a request that any one of several
// secrets verifies. A timestamp further than the tolerance from now, in
// either direction, is refused with [ErrTimestamp] (replay protection).
//
// fairrelay also sends [HeaderFlow] (the flow, url.PathEscape'd), [HeaderSeq]
// (the decimal sequence number) and [HeaderRoute] (fairrelay-signature): a
// "v2,<base64>" HMAC-SHA256 of the length-prefixed id, timestamp, flow and
// seq under a key derived from the secret ([SignRoute]), so that a receiver
// can trust the flow and sequence number as much as the body, and so that
// neither signature can stand in for the other. [VerifyRoute] checks it and
// returns them. (The retired v1 form, over id.timestamp.flow.seq with the
// secret itself, was the body signature of a body "flow.seq", and is
// refused.)
//
// Secrets are raw bytes. [ParseSecret] accepts the Standard Webhooks
// "whsec_<base64>" form, padded or not, as well as a plain string.
//
// The package imports nothing outside the standard library.
package webhook
