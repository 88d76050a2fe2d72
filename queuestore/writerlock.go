package queuestore

import (
	"context"
	"time"

	"github.com/fairrelay/fairrelay/writerlock"
)

// ErrWriteTimeout reports a write that waited longer than BusyTimeoutMillis
// for its turn among the writers of the file. Nothing was written. It is
// writerlock.ErrTimeout.
var ErrWriteTimeout = writerlock.ErrTimeout

// writerLock is the turn every write transaction of the store takes among
// all writers of its file, in arrival order, across processes: two lock files
// next to the database, PATH-writer and PATH-writer-gate. See the writerlock
// module and docs/performance.md ("Fair writers") for why SQLite's busy
// handler alone starves writers.
type writerLock struct{ l *writerlock.Lock }

func openWriterLock(path string, keep writerlock.Keep) (*writerLock, error) {
	l, err := writerlock.OpenKeep(path, BusyTimeoutMillis*time.Millisecond, keep)
	if err != nil {
		return nil, err
	}
	return &writerLock{l: l}, nil
}

func (w *writerLock) lock(ctx context.Context) error { return w.l.Lock(ctx) }
func (w *writerLock) unlock()                        { w.l.Unlock() }
func (w *writerLock) close() error                   { return w.l.Close() }
