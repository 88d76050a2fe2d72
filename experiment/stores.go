package experiment

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" driver for integrity checks and triggers

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/shard"
)

// The two stores of every scenario, by their file names. On PostgreSQL the
// same names select the scenario's schemas.
const (
	QueueFile    = "queue.db"
	ReceiverFile = "receiver.db"
)

// QueuePath is the scenario's queue database file (SQLite).
func (l *Lab) QueuePath() string { return filepath.Join(l.Dir, QueueFile) }

// ReceiverPath is the scenario's receiver database file (SQLite).
func (l *Lab) ReceiverPath() string { return filepath.Join(l.Dir, ReceiverFile) }

// Backend is where the scenario's stores live: SQLite unless the scenario
// runs with [RunOn].
func (l *Lab) Backend() Backend {
	if l.backend == nil {
		return SQLite()
	}
	return l.backend
}

// Queue opens the scenario's queue (queue.db). The store is closed by
// [Lab.CloseStores] or when the scenario ends.
func (l *Lab) Queue(opts ...QueueOption) (QueueStore, error) {
	return l.OpenQueue(QueueFile, opts...)
}

// OpenQueue opens another queue of the scenario, named like a file
// ("other.db"): a file in the folder on SQLite, a schema on PostgreSQL.
func (l *Lab) OpenQueue(file string, opts ...QueueOption) (QueueStore, error) {
	var o queueOptions
	for _, opt := range opts {
		opt(&o)
	}
	l.used(file)
	q, err := l.Backend().openQueue(context.Background(), l, file, o)
	if err != nil {
		return nil, err
	}
	l.onClose(q.Close)
	return q, nil
}

// Receiver opens the scenario's receiver (receiver.db). The store is closed
// by [Lab.CloseStores] or when the scenario ends.
func (l *Lab) Receiver(opts ...ReceiverOption) (ReceiverStore, error) {
	var o receiverOptions
	for _, opt := range opts {
		opt(&o)
	}
	l.used(ReceiverFile)
	r, err := l.Backend().openReceiver(context.Background(), l, ReceiverFile, o)
	if err != nil {
		return nil, err
	}
	l.onClose(r.Close)
	return r, nil
}

// used records a store name the scenario opened, for the cleanup.
func (l *Lab) used(file string) {
	for _, f := range l.files {
		if f == file {
			return
		}
	}
	l.files = append(l.files, file)
}

// CloseStores closes every store and SQL handle the scenario has opened so
// far, e.g. before a child process takes over or a store is reopened with
// other options.
func (l *Lab) CloseStores() error {
	return l.closeAll()
}

// queueSnapshot reads q's full snapshot, ready for encoding/json:
// queuestore.Snapshot or queue.Snapshot, which encode alike but for the
// rotation state that only queuestore has so far.
func queueSnapshot(ctx context.Context, q QueueStore) (any, error) {
	switch s := q.(type) {
	case *queuestore.Store:
		return s.Snapshot(ctx)
	case *pgqueuestore.Store:
		return s.Snapshot(ctx)
	case *shard.Store:
		return s.Snapshot(ctx)
	}
	return nil, fmt.Errorf("snapshot: unknown queue store %T", q)
}

// snapshots opens both stores afresh (no hooks, default options) and reads
// their full snapshots, as JSON, with the scenario's normalisation applied to
// the queue.
func (l *Lab) snapshots(ctx context.Context) (queue, receiver json.RawMessage, err error) {
	b := l.Backend()
	q, err := b.openQueue(ctx, l, QueueFile, queueOptions{})
	if err != nil {
		return nil, nil, err
	}
	defer q.Close()
	qs, err := queueSnapshot(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	r, err := b.openReceiver(ctx, l, ReceiverFile, receiverOptions{})
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	rs, err := r.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	if queue, err = marshalSnapshot(qs, l.normalise); err != nil {
		return nil, nil, err
	}
	if receiver, err = marshalSnapshot(rs, nil); err != nil {
		return nil, nil, err
	}
	return queue, receiver, nil
}

// marshalSnapshot marshals a store's snapshot as it is and applies the
// normalisation rules to it.
func marshalSnapshot(snap any, rules []fieldRule) (json.RawMessage, error) {
	data, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("marshal snapshot: %w", err)
	}
	n, err := parseNode(data)
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		table, ok := n.field(r.table)
		if !ok || table.kind != '[' {
			return nil, fmt.Errorf("normalise: snapshot has no table %q", r.table)
		}
		for i := range table.items {
			f, ok := table.items[i].field(r.field)
			if !ok {
				return nil, fmt.Errorf("normalise: table %q has no field %q", r.table, r.field)
			}
			*f = node{raw: quote(r.marker)}
		}
	}
	return n.compact(), nil
}

// sqliteBackend keeps each store in a file of the scenario's folder.
type sqliteBackend struct{}

// SQLite is the default backend: each store is a SQLite file in the
// scenario's folder (queue.db, receiver.db, …).
func SQLite() Backend { return sqliteBackend{} }

// Name implements Backend.
func (sqliteBackend) Name() string { return BackendSQLite }

// String says where the stores are.
func (sqliteBackend) String() string { return "sqlite, files in each scenario's temporary folder" }

func (sqliteBackend) openQueue(_ context.Context, l *Lab, file string, o queueOptions) (QueueStore, error) {
	var opts []queuestore.Option
	if o.policy != nil {
		opts = append(opts, queuestore.WithPolicy(*o.policy))
	}
	if o.hook != nil {
		opts = append(opts, queuestore.WithHook(o.hook))
	}
	if o.rtSet {
		opts = append(opts, queuestore.WithRealTime(o.realTime, o.skew))
	}
	return queuestore.Open(filepath.Join(l.Dir, file), opts...)
}

func (sqliteBackend) openReceiver(_ context.Context, l *Lab, file string, o receiverOptions) (ReceiverStore, error) {
	var opts []receiverstore.Option
	if o.maxDelta != 0 {
		opts = append(opts, receiverstore.WithMaxDelta(o.maxDelta))
	}
	if o.hook != nil {
		opts = append(opts, receiverstore.WithHook(o.hook))
	}
	if o.now != nil {
		opts = append(opts, receiverstore.WithNow(o.now))
	}
	return receiverstore.Open(filepath.Join(l.Dir, file), opts...)
}

// integrity runs PRAGMA integrity_check on one of the scenario's files.
func (sqliteBackend) integrity(ctx context.Context, l *Lab, file string) (string, error) {
	db, err := sql.Open("sqlite", dsn(filepath.Join(l.Dir, file)))
	if err != nil {
		return "", err
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res); err != nil {
		return "", fmt.Errorf("integrity_check %s: %w", file, err)
	}
	return res, nil
}

// failWrites installs a trigger that aborts event with msg (RAISE(ABORT)).
func (sqliteBackend) failWrites(ctx context.Context, l *Lab, file, name, event, msg string) (func() error, error) {
	db, err := sql.Open("sqlite", dsn(filepath.Join(l.Dir, file)))
	if err != nil {
		return nil, err
	}
	l.onClose(db.Close)
	ddl := fmt.Sprintf(`CREATE TRIGGER %s BEFORE %s BEGIN SELECT RAISE(ABORT, '%s'); END`, name, event, msg)
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return nil, fmt.Errorf("install trigger: %w", err)
	}
	return func() error {
		if _, err := db.ExecContext(ctx, "DROP TRIGGER "+name); err != nil {
			return fmt.Errorf("drop trigger: %w", err)
		}
		return nil
	}, nil
}

func (sqliteBackend) job(*Lab, *Job) {}

func (sqliteBackend) cleanup(context.Context, *Lab) error { return nil }

// dsn is the connection string of docs/contract.md §2.7, as the stores use it, with the
// path percent-encoded so that a '#' or '?' in a folder name cannot cut it.
func dsn(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	u := url.URL{
		Scheme: "file",
		Path:   filepath.ToSlash(path),
		RawQuery: "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
			"&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)&_txlock=immediate",
	}
	return u.String()
}

// SQLiteVersion returns the version of the SQLite library the stores use.
func SQLiteVersion(ctx context.Context) (string, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v); err != nil {
		return "", fmt.Errorf("sqlite_version: %w", err)
	}
	return v, nil
}
