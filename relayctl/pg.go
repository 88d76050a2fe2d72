package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
)

// A --queue or --receiver value that starts with postgres:// or
// postgresql:// names a store in PostgreSQL (pgqueuestore,
// pgreceiverstore) instead of a SQLite file. Its schema is the query
// parameter schema=NAME, which is taken out of the URL before pgx sees it;
// without it the stores' default schemas (fairrelay_queue,
// fairrelay_receiver) are used.

// isPostgres reports whether a --queue or --receiver value is a PostgreSQL
// URL.
func isPostgres(path string) bool {
	return strings.HasPrefix(path, "postgres://") || strings.HasPrefix(path, "postgresql://")
}

// shown is a --queue or --receiver value as messages and logs show it:
// a PostgreSQL URL without its password.
func shown(path string) string {
	if !isPostgres(path) {
		return path
	}
	u, err := url.Parse(path)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// pgTarget splits a PostgreSQL URL into the URL pgx connects to and the
// schema (def unless ?schema=NAME says otherwise). flagName is the flag for
// messages.
func pgTarget(raw, def, flagName string) (conn, schema string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", usagef("--%s: not a valid PostgreSQL URL", flagName)
	}
	schema = def
	q := u.Query()
	if q.Has("schema") {
		schema = q.Get("schema")
		if schema == "" {
			return "", "", usagef("--%s %s: schema= is empty", flagName, u.Redacted())
		}
		q.Del("schema")
		u.RawQuery = q.Encode()
	}
	return u.String(), schema, nil
}

// errNoSchema is pgOpen's refusal of a schema that does not exist.
var errNoSchema = errors.New("does not exist")

// pgOpen connects to the URL of a --queue or --receiver value and, unless
// create is set, makes sure the schema exists: a typo must not turn into a
// fresh empty store, as for a SQLite file (store.go, mustExist). minConns
// raises the pool's size when the URL does not set pool_max_conns (the
// relay holds one connection for LISTEN).
func pgOpen(ctx context.Context, raw, def, what, flagName string, create bool, minConns int32) (*pgxpool.Pool, string, error) {
	conn, schema, err := pgTarget(raw, def, flagName)
	if err != nil {
		return nil, "", err
	}
	cfg, err := pgxpool.ParseConfig(conn)
	if err != nil {
		return nil, "", usagef("--%s %s: %v", flagName, shown(raw), err)
	}
	if !strings.Contains(conn, "pool_max_conns") && cfg.MaxConns < minConns {
		cfg.MaxConns = minConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("connect: %w", err)
	}
	if !create {
		var ok bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok)
		if err != nil {
			pool.Close()
			return nil, "", fmt.Errorf("connect: %w", err)
		}
		if !ok {
			pool.Close()
			return nil, "", fmt.Errorf("%s schema %s %w (name an existing one with --%s 'postgres://…?schema=NAME')",
				what, pgx.Identifier{schema}.Sanitize(), errNoSchema, flagName)
		}
	}
	return pool, schema, nil
}

// pgQueue is *pgqueuestore.Store as a queueLib; Close closes the pool, which
// it owns.
type pgQueue struct {
	*pgqueuestore.Store
	pool   *pgxpool.Pool
	schema string
}

func (p pgQueue) Close() error {
	err := p.Store.Close()
	p.pool.Close()
	return err
}

// openPGQueue opens the queue store of a postgres:// --queue value. create
// says the schema may be new (enqueue). opts are added to the schema's.
func openPGQueue(ctx context.Context, raw string, create bool, minConns int32, opts ...pgqueuestore.Option) (pgQueue, error) {
	pool, schema, err := pgOpen(ctx, raw, pgqueuestore.DefaultSchema, "queue", "queue", create, minConns)
	if err != nil {
		return pgQueue{}, err
	}
	s, err := pgqueuestore.OpenPool(ctx, pool, append([]pgqueuestore.Option{pgqueuestore.WithSchema(schema)}, opts...)...)
	if err != nil {
		pool.Close()
		return pgQueue{}, err
	}
	return pgQueue{Store: s, pool: pool, schema: schema}, nil
}

// pgQueueDB is the *queueDB of a postgres:// --queue value. Real time
// opens the store again on the same pool.
func pgQueueDB(ctx context.Context, raw string, create bool) (*queueDB, error) {
	p, err := openPGQueue(ctx, raw, create, 0)
	if err != nil {
		return nil, err
	}
	reopen := func(old queueLib, src clock.Source, skew clock.Tick) (queueLib, error) {
		o := old.(pgQueue)
		s, err := pgqueuestore.OpenPool(ctx, o.pool, pgqueuestore.WithSchema(o.schema), pgqueuestore.WithRealTime(src, skew))
		if err != nil {
			return nil, err
		}
		return pgQueue{Store: s, pool: o.pool, schema: o.schema}, nil
	}
	return &queueDB{s: p, reopen: reopen}, nil
}

// pgReceiver is *pgreceiverstore.Store with the pool it owns.
type pgReceiver struct {
	*pgreceiverstore.Store
	pool *pgxpool.Pool
}

func (p pgReceiver) Close() error {
	err := p.Store.Close()
	p.pool.Close()
	return err
}

// openPGReceiver opens the receiver store of a postgres:// --receiver
// value; create says the schema may be new (receive, relay in process).
func openPGReceiver(ctx context.Context, raw string, create bool) (pgReceiver, error) {
	pool, schema, err := pgOpen(ctx, raw, pgreceiverstore.DefaultSchema, "receiver", "receiver", create, 0)
	if err != nil {
		return pgReceiver{}, err
	}
	s, err := pgreceiverstore.OpenPool(ctx, pool, pgreceiverstore.WithSchema(schema))
	if err != nil {
		pool.Close()
		return pgReceiver{}, err
	}
	return pgReceiver{Store: s, pool: pool}, nil
}
