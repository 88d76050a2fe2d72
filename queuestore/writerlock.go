package queuestore

import "github.com/fairrelay/fairrelay/writerlock"

// ErrWriteTimeout reports a write that waited longer than BusyTimeoutMillis
// for its turn among the writers of the file. Nothing was written. It is
// writerlock.ErrTimeout.
var ErrWriteTimeout = writerlock.ErrTimeout
