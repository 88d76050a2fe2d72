package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The hold on a sharded queue. Every process that writes to a sharded
// queue (relay, web, enqueue, redrive, …) holds it shared for as long as
// it has the queue open; 'relayctl reshard' takes it exclusive for its
// whole run and refuses to start while anyone holds it. So a reshard never
// runs beside a relay or any other writer, whose writes into the old set
// after the copy would be lost, and no writer opens a set while it is
// being moved aside. Read commands take no hold: they see the old set or
// the new one, each consistent.
//
// On SQLite the hold is an flock(2) of the file DIR.lock beside the queue's
// directory (beside, not inside, so that it stays put when the reshard
// renames the directory); on PostgreSQL a session advisory lock, keyed by
// the base schema's name, on a connection kept for the hold's life.

// errHeld says the hold was not free.
var errHeld = errors.New("held by another process")

// shardLockFile is the lock file of the SQLite sharded queue in dir: one
// file however the directory is written (orders, orders/, ./orders/.).
func shardLockFile(dir string) string { return filepath.Clean(dir) + ".lock" }

// holdSQLite takes the hold of the SQLite sharded queue in dir, shared or
// exclusive, without waiting: errHeld when another process has it in a
// conflicting mode.
func holdSQLite(dir string, exclusive bool) (io.Closer, error) {
	return flockFile(shardLockFile(dir), exclusive)
}

// pgLockKey is the advisory lock's key text of a base schema.
func pgLockKey(base string) string { return "fairrelay shards " + base }

// pgHold is a held advisory lock: the connection that holds it, nil once
// the hold has ended.
type pgHold struct{ c *pgxpool.Conn }

// Close ends the hold: the lock is released with the session's state.
// Closing again does nothing: the connection went back to the pool the
// first time, and must not be used after that.
func (h *pgHold) Close() error {
	if h.c == nil {
		return nil
	}
	c := h.c
	h.c = nil
	// Releasing the connection to the pool keeps the session; unlock
	// explicitly first, then destroy the connection so nothing lingers.
	_, _ = c.Exec(context.Background(), `SELECT pg_advisory_unlock_all()`)
	c.Conn().Close(context.Background())
	c.Release()
	return nil
}

// holdPG takes the hold of the PostgreSQL sharded queue of base on pool,
// without waiting.
func holdPG(ctx context.Context, pool *pgxpool.Pool, base string, exclusive bool) (io.Closer, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	fn := "pg_try_advisory_lock_shared"
	if exclusive {
		fn = "pg_try_advisory_lock"
	}
	var ok bool
	if err := c.QueryRow(ctx, `SELECT `+fn+`(hashtext($1)::bigint)`, pgLockKey(base)).Scan(&ok); err != nil {
		c.Release()
		return nil, fmt.Errorf("lock: %w", err)
	}
	if !ok {
		c.Release()
		return nil, errHeld
	}
	return &pgHold{c}, nil
}
