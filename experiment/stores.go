package experiment

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" driver for integrity checks and triggers

	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// The two database files of every scenario folder.
const (
	QueueFile    = "queue.db"
	ReceiverFile = "receiver.db"
)

// QueuePath is the scenario's queue database.
func (l *Lab) QueuePath() string { return filepath.Join(l.Dir, QueueFile) }

// ReceiverPath is the scenario's receiver database.
func (l *Lab) ReceiverPath() string { return filepath.Join(l.Dir, ReceiverFile) }

// Queue opens the scenario's queue.db. The store is closed by [Lab.CloseStores]
// or when the scenario ends.
func (l *Lab) Queue(opts ...queuestore.Option) (*queuestore.Store, error) {
	q, err := queuestore.Open(l.QueuePath(), opts...)
	if err != nil {
		return nil, err
	}
	l.onClose(q.Close)
	return q, nil
}

// Receiver opens the scenario's receiver.db. The store is closed by
// [Lab.CloseStores] or when the scenario ends.
func (l *Lab) Receiver(opts ...receiverstore.Option) (*receiverstore.Store, error) {
	r, err := receiverstore.Open(l.ReceiverPath(), opts...)
	if err != nil {
		return nil, err
	}
	l.onClose(r.Close)
	return r, nil
}

// CloseStores closes every store and SQL handle the scenario has opened so
// far, e.g. before a child process takes over or a store is reopened with
// other options.
func (l *Lab) CloseStores() error {
	return l.closeAll()
}

// SQL opens a plain SQL handle on one of the scenario's files (QueueFile or
// ReceiverFile), with the stores' connection settings. Scenarios use it only
// to install and drop the triggers that make a second write fail.
func (l *Lab) SQL(file string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(filepath.Join(l.Dir, file)))
	if err != nil {
		return nil, err
	}
	l.onClose(db.Close)
	return db, nil
}

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

// integrity runs PRAGMA integrity_check on one of the scenario's files.
func (l *Lab) integrity(ctx context.Context, file string) (string, error) {
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

// snapshots opens both files afresh (no hooks, default options) and reads
// their full snapshots, as JSON, with the scenario's normalisation applied to
// the queue.
func (l *Lab) snapshots(ctx context.Context) (queue, receiver json.RawMessage, err error) {
	q, err := queuestore.Open(l.QueuePath())
	if err != nil {
		return nil, nil, err
	}
	defer q.Close()
	qs, err := q.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	r, err := receiverstore.Open(l.ReceiverPath())
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
