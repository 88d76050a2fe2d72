package experiment

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// QueueStore is a scenario's queue: the queue contract as the queue module
// declares it (queue.Store). queuestore.Store and pgqueuestore.Store both
// are one, so a scenario runs unchanged on either backend
// (docs/experiment.md "On PostgreSQL"); the rotation scenarios also use
// queue.Weighter, which both have.
type QueueStore = queue.Store

// ReceiverStore is a scenario's receiver: the receiver contract as the
// receiver module declares it (receiver.Store); receiverstore.Store and
// pgreceiverstore.Store both are one.
type ReceiverStore = receiver.Store

// QueueOption sets up a queue a scenario opens, on either backend.
type QueueOption func(*queueOptions)

type queueOptions struct {
	policy   *queue.Policy
	hook     func(queue.HookPoint)
	realTime clock.Source
	skew     clock.Tick
	rtSet    bool
}

// WithPolicy is the backend's WithPolicy: the policy a new queue records;
// an existing queue with another one refuses to open (queue.ErrPolicyMismatch).
func WithPolicy(p queue.Policy) QueueOption { return func(o *queueOptions) { o.policy = &p } }

// WithRealTime is the backend's WithRealTime: ticks are real time read from
// src, with the given skew.
func WithRealTime(src clock.Source, skew clock.Tick) QueueOption {
	return func(o *queueOptions) { o.realTime, o.skew, o.rtSet = src, skew, true }
}

// withQueueHook is the backend's WithHook.
func withQueueHook(fn func(queue.HookPoint)) QueueOption {
	return func(o *queueOptions) { o.hook = fn }
}

// ReceiverOption sets up a receiver a scenario opens, on either backend.
type ReceiverOption func(*receiverOptions)

type receiverOptions struct {
	maxDelta int
	hook     func(receiver.HookPoint)
	now      func() time.Time
}

// WithMaxDelta is the backend's WithMaxDelta: the largest delta the
// receiver applies.
func WithMaxDelta(n int) ReceiverOption { return func(o *receiverOptions) { o.maxDelta = n } }

// WithReceiverClock is the backend's WithNow: the wall clock the receiver
// reads when it accepts a message, recorded with the receipt and compared
// by Prune (docs/contract.md §7.9). A scenario that prunes receipts sets
// it, so no real time reaches a golden file.
func WithReceiverClock(now func() time.Time) ReceiverOption {
	return func(o *receiverOptions) { o.now = now }
}

// withReceiverHook is the backend's WithHook.
func withReceiverHook(fn func(receiver.HookPoint)) ReceiverOption {
	return func(o *receiverOptions) { o.hook = fn }
}

// Backend is where a scenario's stores live: SQLite files in the scenario's
// folder ([SQLite]) or PostgreSQL schemas ([Postgres]). A store is named by
// its file name (QueueFile, ReceiverFile, or another such as "other.db"),
// whichever backend holds it, so traces and check names are the same.
type Backend interface {
	// Name is "sqlite" or "postgres", the value of [BackendEnv].
	Name() string
	// String says where the stores are, for a console.
	String() string
	openQueue(ctx context.Context, l *Lab, file string, o queueOptions) (QueueStore, error)
	openReceiver(ctx context.Context, l *Lab, file string, o receiverOptions) (ReceiverStore, error)
	// integrity checks a store's storage after the scenario: "ok" or what
	// is wrong.
	integrity(ctx context.Context, l *Lab, file string) (string, error)
	// failWrites installs a trigger named name that makes event ("INSERT
	// ON events") on the store's table fail with msg, and returns a
	// function that drops it.
	failWrites(ctx context.Context, l *Lab, file, name, event, msg string) (func() error, error)
	// job fills in what a child process needs to reach l's stores, and
	// lab rebuilds the child's Lab from it.
	job(l *Lab, j *Job)
	// cleanup removes what the scenario left on the server, if anything.
	cleanup(ctx context.Context, l *Lab) error
}

// The environment variable that selects the backend, and its values.
const (
	BackendEnv      = "FAIRRELAY_BACKEND"
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// BackendFromEnv returns the backend FAIRRELAY_BACKEND names: SQLite when it
// is unset or "sqlite", PostgreSQL at [PostgresURL] for "postgres".
func BackendFromEnv() (Backend, error) {
	switch v := os.Getenv(BackendEnv); v {
	case "", BackendSQLite:
		return SQLite(), nil
	case BackendPostgres:
		return Postgres(PostgresURL())
	case BackendSQLiteShard1:
		return SQLiteShard1(), nil
	default:
		return nil, fmt.Errorf("%s=%q: want %q or %q", BackendEnv, v, BackendSQLite, BackendPostgres)
	}
}

// backendByName returns the backend a child process was told to use.
func backendByName(name, url, run string) (Backend, error) {
	switch name {
	case "", BackendSQLite:
		return SQLite(), nil
	case BackendPostgres:
		return postgresWithRun(url, run)
	case BackendSQLiteShard1:
		return SQLiteShard1(), nil
	}
	return nil, fmt.Errorf("%w: unknown backend %q", errBadJob, name)
}
