package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

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
	kindTimeAhead
	kindTickOverflow
	kindPolicyMismatch
	kindFlowPaused
	kindFlowNotPaused
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
	case fi.IsDir() && what == "queue" && e.isShardDir(path):
		// A directory of shard files is a sharded queue (shard.go);
		// opening it checks its labels.
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
func (e *env) openQueue(create bool) (*queueDB, error) {
	if e.isShardDir(e.queuePath) {
		return e.shardedQueue(false)
	}
	if isPostgres(e.queuePath) {
		return e.pgQueue(create, false)
	}
	if !create {
		if err := e.mustExist(e.queuePath, "queue", "queue"); err != nil {
			return nil, err
		}
	} else if e.queuePath == "" {
		return nil, usagef("--queue is empty")
	} else if _, err := os.Stat(e.abs(e.queuePath)); errors.Is(err, fs.ErrNotExist) {
		if err := e.refuseReshardLeftover(e.queuePath); err != nil {
			return nil, err
		}
	}
	q, err := e.openQueueAt(e.abs(e.queuePath))
	if err != nil {
		return nil, fmt.Errorf("open queue %s: %w", e.queuePath, err)
	}
	if create {
		if err := refuseShardMember(e.ctx, q, e.queuePath); err != nil {
			return nil, errors.Join(err, q.Close())
		}
	}
	return q, nil
}

// openReceiver opens the receiver at e.receiverPath, which must exist.
// optional says the command can do without it (an empty --receiver).
func (e *env) openReceiver(optional bool) (*receiverDB, error) {
	if isPostgres(e.receiverPath) {
		return e.pgReceiver()
	}
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

// readQueue opens the queue at e.queuePath for a read command: it must
// exist, and it is opened read-only, so that nothing is created beside it
// and no write permission is needed (docs/operations.md).
func (e *env) readQueue() (*queueDB, error) {
	if e.isShardDir(e.queuePath) {
		return e.shardedQueue(true)
	}
	if isPostgres(e.queuePath) {
		return e.pgQueue(false, true)
	}
	if err := e.mustExist(e.queuePath, "queue", "queue"); err != nil {
		return nil, err
	}
	q, err := e.readQueueAt(e.abs(e.queuePath))
	if err != nil {
		return nil, fmt.Errorf("open queue %s: %w", e.queuePath, err)
	}
	return q, nil
}

// readReceiver is openReceiver for a read command: read-only, creating
// nothing.
func (e *env) readReceiver(optional bool) (*receiverDB, error) {
	if isPostgres(e.receiverPath) {
		return e.pgReceiver()
	}
	if err := e.mustExist(e.receiverPath, "receiver", "receiver"); err != nil {
		if optional && !errors.As(err, new(*usageError)) {
			err = fmt.Errorf("%w; --receiver '' leaves the receiver out", err)
		}
		return nil, err
	}
	r, err := e.readReceiverAt(e.abs(e.receiverPath))
	if err != nil {
		return nil, fmt.Errorf("open receiver %s: %w", e.receiverPath, err)
	}
	return r, nil
}

// pgQueue opens a postgres:// --queue (pg.go). A read command (readOnly)
// opens it as a write command does, but takes no writer's hold on a
// sharded queue: PostgreSQL has no read-only store, and opening an existing
// schema changes nothing in it.
func (e *env) pgQueue(create, readOnly bool) (*queueDB, error) {
	if q, err := e.shardedQueueDB(readOnly); !errors.Is(err, errNotSharded) {
		if err != nil {
			return nil, fmt.Errorf("open queue %s: %w", shown(e.queuePath), err)
		}
		return q, nil
	}
	q, err := pgQueueDB(e.ctx, e.queuePath, create)
	if err != nil {
		return nil, fmt.Errorf("open queue %s: %w", shown(e.queuePath), err)
	}
	if create {
		if err := refuseShardMember(e.ctx, q, shown(e.queuePath)); err != nil {
			return nil, errors.Join(err, q.Close())
		}
	}
	return q, nil
}

// pgReceiver opens a postgres:// --receiver for a command that reads it: the
// schema must exist.
func (e *env) pgReceiver() (*receiverDB, error) {
	r, err := openPGReceiver(e.ctx, e.receiverPath, false)
	if err != nil {
		return nil, fmt.Errorf("open receiver %s: %w", shown(e.receiverPath), err)
	}
	return &receiverDB{r}, nil
}

// shardedQueue opens the sharded queue in the directory --queue names
// (shard.go); readOnly opens its files read-only.
func (e *env) shardedQueue(readOnly bool) (*queueDB, error) {
	q, err := e.shardedQueueDB(readOnly)
	if err != nil {
		return nil, fmt.Errorf("open sharded queue %s: %w", e.queuePath, err)
	}
	return q, nil
}

// closeWith closes c and keeps the first error.
func closeWith(c interface{ Close() error }, err *error) {
	if cerr := c.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close: %w", cerr)
	}
}
