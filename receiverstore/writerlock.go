package receiverstore

import (
	"time"

	"github.com/fairrelay/fairrelay/writerlock"
)

// ErrWriteTimeout reports a write that waited longer than writeTurnTimeout
// for its turn among the writers of the file. Nothing was written. It is
// writerlock.ErrTimeout.
var ErrWriteTimeout = writerlock.ErrTimeout

// writeTurnTimeout bounds the wait for a turn to write: the busy timeout in dsn.
const writeTurnTimeout = 10 * time.Second
