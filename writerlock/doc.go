// Package writerlock makes the writers of one SQLite file take turns in
// arrival order, across goroutines and across processes.
//
// SQLite does not queue writers: a BEGIN IMMEDIATE that finds the write lock
// taken polls through its busy handler, and the writer that has just
// committed nearly always wins the next turn. Under several writer processes
// one takes almost every turn, the others wait seconds, and a wait past the
// busy timeout surfaces as SQLITE_BUSY. A [Lock] taken around each write
// transaction fixes that with two flock(2) files beside the database (see
// [Lock] for how). It adds no retry: it only orders writers before BEGIN.
//
// A hand-over between processes is not free: the next process starts with a
// cold page cache and a slower first commit. So a process keeps the turn for
// a short run of consecutive writes ([Keep], [DefaultKeep]) before it hands
// it over; runs still go round in arrival order. [OpenKeep] chooses another
// trade between throughput and the longest wait.
//
// Where flock(2) does not exist (Windows), Lock takes no turns and writers
// fall back to SQLite's busy timeout, safe but not fair.
//
// fairrelay's queuestore and receiverstore use it; docs/performance.md in the
// repository has the measurements behind it. The package imports nothing
// outside the standard library.
package writerlock

import "errors"

var (
	// ErrTimeout reports a wait for a turn that lasted longer than the
	// timeout given to [Open]. The caller holds nothing; nothing was written.
	ErrTimeout = errors.New("writerlock: waited too long for a turn to write")
	// ErrClosed reports a Lock called after Close. The caller holds nothing.
	ErrClosed = errors.New("writerlock: the lock is closed")
)
