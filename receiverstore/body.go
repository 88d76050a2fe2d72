package receiverstore

import "github.com/fairrelay/fairrelay/receiver"

// MaxBodyLen is receiver.MaxBodyLen: the largest body, in bytes, that
// Receive reads. A longer body is [ErrInvalidBody]. receiver.ParseDelta
// reads bodies, the same parser in every backend.
const MaxBodyLen = receiver.MaxBodyLen
