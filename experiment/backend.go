package experiment

import (
	"context"
	"fmt"
	"os"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// QueueStore is what the scenarios do with a queue. queuestore.Store and
// pgqueuestore.Store both satisfy it, so a scenario runs unchanged on either
// backend (docs/experiment.md "On PostgreSQL").
type QueueStore interface {
	Enqueue(ctx context.Context, e queue.Event, now clock.Tick) (queue.Enqueued, error)
	EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error)
	Claim(ctx context.Context, now clock.Tick) (queue.Claim, bool, error)
	ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]queue.Claim, error)
	Settle(ctx context.Context, eventID string, generation int64, r queue.Result, now clock.Tick) (queue.Outcome, error)
	Extend(ctx context.Context, eventID string, generation int64, now clock.Tick) (queue.Outcome, error)
	ExtendBatch(ctx context.Context, items []queue.ExtendItem, now clock.Tick) ([]queue.SettleResult, error)
	Redrive(ctx context.Context, eventID string, generation int64, reason string, now clock.Tick) error
	RedriveAll(ctx context.Context, f queue.RedriveFilter, reason string, now clock.Tick) ([]queue.Redriven, error)
	QuarantinedMatching(ctx context.Context, f queue.RedriveFilter) ([]queue.QuarantinedEvent, error)
	Event(ctx context.Context, id string) (queue.EventState, error)
	FlowEvents(ctx context.Context, flow string) ([]queue.EventState, error)
	Quarantined(ctx context.Context) ([]queue.QuarantinedEvent, error)
	Audit(ctx context.Context) ([]queue.AuditEntry, error)
	AuditAll(ctx context.Context) ([]queue.AuditRecord, error)
	Flows(ctx context.Context) ([]queue.FlowState, error)
	Stats(ctx context.Context) (queue.Stats, error)
	Policy(ctx context.Context) (queue.Policy, error)
	SetPolicy(ctx context.Context, p queue.Policy, reason string, now clock.Tick) error
	Close() error
}

// weighter is a queue that can change a flow's weight (the rotation order).
// queuestore has it; pgqueuestore has it once rotation lands there.
type weighter interface {
	SetWeight(ctx context.Context, flow string, weight int, reason string, now clock.Tick) error
}

// ReceiverStore is what the scenarios do with a receiver; receiverstore.Store
// and pgreceiverstore.Store both satisfy it.
type ReceiverStore interface {
	Receive(ctx context.Context, m receiver.Message) (receiver.Outcome, error)
	Total(ctx context.Context, flow string) (int64, error)
	NextExpected(ctx context.Context, flow string) (int64, error)
	Conflicts(ctx context.Context) ([]receiver.ConflictRecord, error)
	Snapshot(ctx context.Context) (receiver.Snapshot, error)
	Close() error
}

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
}

// WithMaxDelta is the backend's WithMaxDelta: the largest delta the
// receiver applies.
func WithMaxDelta(n int) ReceiverOption { return func(o *receiverOptions) { o.maxDelta = n } }

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
	}
	return nil, fmt.Errorf("%w: unknown backend %q", errBadJob, name)
}
