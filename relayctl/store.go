package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fairrelay/fairrelay/clock"
)

// queueStore is what relayctl needs from queue.db. queuestore.go implements it on
// top of queuestore.Store; the rows are relayctl's own (json tags included)
// so that the output format is fixed here, not by the library's field names.
type queueStore interface {
	Close() error
	Stats(ctx context.Context) (statsRow, error)
	Flows(ctx context.Context) ([]flowRow, error)
	FlowEvents(ctx context.Context, flow string) ([]eventRow, error)
	Event(ctx context.Context, id string) (eventRow, error)
	Quarantined(ctx context.Context) ([]quarantinedRow, error)
	Audit(ctx context.Context) ([]auditRow, error)
	Redrive(ctx context.Context, id string, generation int64, reason string, now clock.Tick) error
	Enqueue(ctx context.Context, ev newEvent, now clock.Tick) (enqueuedRow, error)
	EnqueueBatch(ctx context.Context, evs []newEvent, now clock.Tick) ([]enqueuedRow, error)
	Snapshot(ctx context.Context) (any, error)
	// Rotation reports whether the queue's recorded policy is the rotation
	// order (docs/contract.md §7.6).
	Rotation(ctx context.Context) (bool, error)
	// SetWeight sets a flow's weight, audited with the reason.
	SetWeight(ctx context.Context, flow string, weight int, reason string, now clock.Tick) error
}

// receiverStore is what relayctl needs from receiver.db; receiverstore.go
// implements it on top of receiverstore.Store.
type receiverStore interface {
	Close() error
	Totals(ctx context.Context) ([]totalRow, error)
	Total(ctx context.Context, flow string) (int64, error)
	Conflicts(ctx context.Context) ([]conflictRow, error)
	Snapshot(ctx context.Context) (any, error)
}

// errKind classifies a store error so that a command can say it in plain
// words with what it knows (the event's state, the flow, the tick).
type errKind int

const (
	kindOther errKind = iota
	kindNotFound
	kindNotQuarantined
	kindStaleGeneration
	kindEmptyReason
	kindTimeRegression
	kindConflict
	kindInvalid
)

// mustExist refuses a database path that does not exist or is not a file, so
// that a typo never turns into a fresh empty database. Messages show path as
// the user gave it.
func (e *env) mustExist(path, what, flagName string) error {
	if path == "" {
		return usagef("--%s is empty", flagName)
	}
	fi, err := os.Stat(e.abs(path))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s database %s does not exist (give its path with --%s PATH)", what, path, flagName)
	case err != nil:
		return fmt.Errorf("%s database: %w", what, err)
	case fi.IsDir():
		return fmt.Errorf("%s database %s is a directory, not a file", what, path)
	}
	return nil
}

// abs resolves a relative path against e.dir, the working folder of an
// in-process run (tests); a real run has none and uses the process's own.
func (e *env) abs(path string) string {
	if e.dir == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(e.dir, path)
}

// openQueue opens the queue at e.queuePath, which must exist unless create
// is true (only enqueue creates a queue).
func (e *env) openQueue(create bool) (queueStore, error) {
	if !create {
		if err := e.mustExist(e.queuePath, "queue", "queue"); err != nil {
			return nil, err
		}
	} else if e.queuePath == "" {
		return nil, usagef("--queue is empty")
	}
	q, err := e.openQueueAt(e.abs(e.queuePath))
	if err != nil {
		return nil, fmt.Errorf("open queue %s: %w", e.queuePath, err)
	}
	return q, nil
}

// openReceiver opens the receiver at e.receiverPath, which must exist.
// optional says the command can do without it (an empty --receiver).
func (e *env) openReceiver(optional bool) (receiverStore, error) {
	if err := e.mustExist(e.receiverPath, "receiver", "receiver"); err != nil {
		if optional && !errors.As(err, new(*usageError)) {
			err = fmt.Errorf("%w; --receiver '' leaves the receiver out", err)
		}
		return nil, err
	}
	r, err := e.openReceiverAt(e.abs(e.receiverPath))
	if err != nil {
		return nil, fmt.Errorf("open receiver %s: %w", e.receiverPath, err)
	}
	return r, nil
}

// closeWith closes c and keeps the first error.
func closeWith(c interface{ Close() error }, err *error) {
	if cerr := c.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close: %w", cerr)
	}
}

// currentTick is the tick a write acts at: --now when given, otherwise the
// queue's clock mark (an operator acts at the present logical time).
func currentTick(ctx context.Context, q queueStore, now tickFlag) (clock.Tick, error) {
	if now.set {
		return now.tick, nil
	}
	st, err := q.Stats(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the clock mark: %w", err)
	}
	return clock.Tick(st.ClockMark), nil
}
