// Package webhook signs and verifies HTTP deliveries the way the Standard
// Webhooks convention (https://www.standardwebhooks.com) does, plus one
// fairrelay header pair that binds the flow and sequence number into a
// second signature.
//
// A delivery carries three standard headers:
//
//   - [HeaderID] (webhook-id): the event ID, also sent as [HeaderIdempotencyKey];
//   - [HeaderTimestamp] (webhook-timestamp): Unix seconds when the request was signed;
//   - [HeaderSignature] (webhook-signature): one or more space-separated
//     "v1,<base64>" signatures, each base64(HMAC-SHA256(secret, id + "." + timestamp + "." + body)).
//
// Several signatures in one header are allowed (the standard's key rotation):
// [Verify] accepts the request when any "v1" entry matches and ignores entries
// of other versions. A timestamp further than the tolerance from now, in
// either direction, is refused with [ErrTimestamp] (replay protection).
//
// fairrelay also sends [HeaderFlow] (the flow, url.PathEscape'd), [HeaderSeq]
// (the decimal sequence number) and [HeaderRoute] (fairrelay-signature): a
// "v1,<base64>" HMAC-SHA256 of id + "." + timestamp + "." + flow + "." + seq
// with the same secret, so that a receiver can trust the flow and sequence
// number as much as the body. [VerifyRoute] checks it and returns them.
//
// Secrets are raw bytes. [ParseSecret] accepts the Standard Webhooks
// "whsec_<base64>" form as well as a plain string.
//
// The package imports nothing outside the standard library.
package webhook
