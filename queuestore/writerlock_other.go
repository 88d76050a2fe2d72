//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package queuestore

import (
	"context"
	"errors"
)

// writerLock takes no turns where flock(2) is missing: writers wait under
// SQLite's busy_timeout alone, safe but not fair (see writerlock.go).
type writerLock struct{}

// ErrWriteTimeout reports a write that waited longer than BusyTimeoutMillis
// for its turn among the writers of the file. Nothing was written.
var ErrWriteTimeout = errors.New("queuestore: waited too long for a turn to write")

func openWriterLock(string) (*writerLock, error) { return &writerLock{}, nil }
func (*writerLock) lock(context.Context) error   { return nil }
func (*writerLock) unlock()                      {}
func (*writerLock) close() error                 { return nil }
