package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The hold on a sharded queue (docs/contract.md §7.10: changing N is
// offline). Every process that writes to a sharded queue (relay, web,
// enqueue, redrive, …) holds it shared for as long as it has the queue
// open; 'relayctl reshard' takes it exclusive for its whole run and
// refuses to start while anyone holds it. So a reshard never runs beside a
// relay or any other writer, whose writes into the old set after the copy
// would be lost, and no writer opens a set while it is being moved aside.
// Read commands take no hold: they see the old set or the new one, each
// consistent.
//
// On SQLite the hold is an flock(2) of the file DIR.lock beside the queue's
// directory (beside, not inside, so that it stays put when the reshard
// renames the directory): a file lock lasts as long as the process.
//
// On PostgreSQL it is a session advisory lock keyed by the base schema's
// name, and a session can end under the process (a server's
// idle_session_timeout, pg_terminate_backend, a restart, a cut network),
// taking the lock with it. So the lock is not only on the hold's own
// connection: every connection a writer makes takes it shared as it
// connects (pgGuard), before any statement, and keeps it for its life. A
// writer's statement therefore always runs in a session that holds the
// lock, and a reshard, which holds it exclusive, never runs beside one,
// however the writer's sessions come and go. A connection made once the
// hold is taken also checks that the shard schemas are still the ones the
// process opened (a reshard may have swapped them while the writer had no
// session), and a refused connection stops the process. The hold's own
// connection is checked every holdCheckInterval (pgHold.keep), which also
// keeps it from idling out: a writer that lost it takes it again or
// stops; a reshard that lost it stops, and its swap runs in the hold's own
// session, so it commits only if the lock was held from start to end.

// errHeld says the hold was not free.
var errHeld = errors.New("held by another process")

// errHoldLost says a process lost its hold on a sharded queue while it
// ran: it stops (its root context ends with this cause), since it can no
// longer tell that no reshard runs beside it.
var errHoldLost = errors.New("this process lost its hold on the sharded queue")

// errSetChanged says a writer's new connection found shard schemas other
// than the ones the process opened: a reshard swapped the set while the
// writer had no session.
var errSetChanged = errors.New("the queue's shard schemas are not the ones this process opened (a reshard swapped them)")

// holdCheckInterval is how often a PostgreSQL hold's own connection is
// checked (and so kept from idling out: a server's idle_session_timeout
// shorter than this ends it). Tests shorten it.
var holdCheckInterval = 5 * time.Second

// holdPingTimeout is how long a check waits for the hold's connection to
// answer before it counts the session as ended.
const holdPingTimeout = time.Minute

// shardLockFile is the lock file of the SQLite sharded queue in dir: one
// file however the directory is written (orders, orders/, ./orders/.).
func shardLockFile(dir string) string { return filepath.Clean(dir) + ".lock" }

// holdSQLite takes the hold of the SQLite sharded queue in dir, shared or
// exclusive, without waiting: errHeld when another process has it in a
// conflicting mode.
func holdSQLite(dir string, exclusive bool) (io.Closer, error) {
	return flockFile(shardLockFile(dir), exclusive)
}

// pgLockKey is the advisory lock's key text of a base schema: its hash
// is the second key of the lock's two.
func pgLockKey(base string) string { return "fairrelay shards " + base }

// pgLockClass is the first key of the hold's two-key advisory lock
// ("frly"). Two-key locks are a key space of their own, apart from the
// one-bigint keys the stores lock (event IDs, flows, schemas: a 64-bit
// hash of an event ID chosen by a producer), so no store's lock can ever
// be the hold's.
const pgLockClass = 0x66726c79

// holdWatch is what a process does about a lost hold: lost ends its root
// context with the cause (nil: nothing, as in tests that open a set by
// hand), log says what happened.
type holdWatch struct {
	lost func(error)
	log  *slog.Logger
}

// logger is w's logger, or one that discards.
func (w holdWatch) logger() *slog.Logger {
	if w.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.log
}

// pgTryLock takes the advisory lock of key on pc, shared or exclusive,
// without waiting: errHeld when another session has it in a conflicting
// mode. A session lock outlives the statement's transaction.
func pgTryLock(ctx context.Context, pc *pgconn.PgConn, key string, exclusive bool) error {
	fn := "pg_try_advisory_lock_shared"
	if exclusive {
		fn = "pg_try_advisory_lock"
	}
	res := pc.ExecParams(ctx, `SELECT `+fn+`($1::int4, hashtext($2::text))`,
		[][]byte{[]byte(strconv.Itoa(pgLockClass)), []byte(key)}, nil, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("lock: %w", res.Err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return errors.New("lock: no answer")
	}
	if string(res.Rows[0][0]) != "t" {
		return errHeld
	}
	return nil
}

// pgUnlockAll gives back every session lock of pc before it closes,
// waiting at most a second (on a cut network the session ends with the
// connection anyway).
func pgUnlockAll(pc *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pc.Exec(ctx, `SELECT pg_advisory_unlock_all()`).Close()
}

// pgSetPrint is the fingerprint of the shard schemas of base as pc sees
// them: every name BASE_sNNN with the schema's OID. A reshard's swap gives
// the names to other schemas, which changes it. Read in a statement after
// the lock's, so that its snapshot is taken under the lock.
func pgSetPrint(ctx context.Context, pc *pgconn.PgConn, base string) (string, error) {
	res := pc.ExecParams(ctx, `SELECT coalesce(string_agg(nspname || '=' || oid::text, ',' ORDER BY nspname), '')
		FROM pg_namespace WHERE starts_with(nspname, $1::text) AND substr(nspname, length($1::text) + 1) ~ '^[0-9]{3}$'`,
		[][]byte{[]byte(base + "_s")}, nil, nil, nil).Read()
	if res.Err != nil {
		return "", fmt.Errorf("read the shard schemas: %w", res.Err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return "", errors.New("read the shard schemas: no answer")
	}
	return string(res.Rows[0][0]), nil
}

// pgGuard is a writer's hold on a PostgreSQL sharded queue as every one
// of its connections takes it: afterConnect takes the lock shared on each
// new connection before any statement runs there, and, once arm has
// recorded the set, checks that the set is still the one opened.
type pgGuard struct {
	base string
	w    holdWatch

	mu    sync.Mutex
	print string // the set's fingerprint; empty until arm
	lost  sync.Once
}

// newPGGuard is the guard of base's set, not yet armed.
func newPGGuard(base string, w holdWatch) *pgGuard { return &pgGuard{base: base, w: w} }

// install makes cfg's connections take the guard's lock: every
// connection, the pool's and any the stores make from its ConnConfig.
//
// A pool connection gives its lock back before it closes (BeforeClose):
// the server releases a closed session's locks only once its backend has
// exited, after the client moved on, so without it a reshard started right
// after the last writer stopped could find the hold still taken.
func (g *pgGuard) install(cfg *pgxpool.Config) {
	prevClose := cfg.BeforeClose
	cfg.BeforeClose = func(c *pgx.Conn) {
		if prevClose != nil {
			prevClose(c)
		}
		pgUnlockAll(c.PgConn())
	}
	prev := cfg.ConnConfig.AfterConnect
	cfg.ConnConfig.AfterConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
		if prev != nil {
			if err := prev(ctx, pc); err != nil {
				return err
			}
		}
		return g.afterConnect(ctx, pc)
	}
}

// afterConnect takes the lock shared on a new connection and, once armed,
// checks the set: a refusal closes the connection, and after arm it also
// stops the process (the hold is lost: a reshard runs or has run).
func (g *pgGuard) afterConnect(ctx context.Context, pc *pgconn.PgConn) error {
	want := g.armed()
	err := pgTryLock(ctx, pc, pgLockKey(g.base), false)
	if err == nil && want != "" {
		var got string
		if got, err = pgSetPrint(ctx, pc, g.base); err == nil && got != want {
			err = errSetChanged
		}
	}
	if want != "" && (errors.Is(err, errHeld) || errors.Is(err, errSetChanged)) {
		g.lose(g.refusal(err))
	}
	return err
}

// refusal is errHoldLost for a connection or a hold that could not take
// the lock again.
func (g *pgGuard) refusal(err error) error {
	if errors.Is(err, errHeld) {
		return fmt.Errorf("%w %s: a reshard holds the queue (%w); stopped writing", errHoldLost, g.base, err)
	}
	return fmt.Errorf("%w %s: %w; stopped writing", errHoldLost, g.base, err)
}

// lose stops the process with err, once.
func (g *pgGuard) lose(err error) {
	g.lost.Do(func() {
		g.w.logger().Error("lost the hold on the sharded queue", "err", err)
		if g.w.lost != nil {
			g.w.lost(err)
		}
	})
}

// armed is the set's fingerprint that arm recorded (empty before).
func (g *pgGuard) armed() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.print
}

// arm records the set as the hold's connection c sees it, under the lock.
func (g *pgGuard) arm(ctx context.Context, c *pgx.Conn) error {
	p, err := pgSetPrint(ctx, c.PgConn(), g.base)
	if err != nil {
		return err
	}
	if p == "" {
		return fmt.Errorf("read the shard schemas: none of %s", shardSchema(g.base, 0))
	}
	g.mu.Lock()
	g.print = p
	g.mu.Unlock()
	return nil
}

// pgHold is a held advisory lock: the connection that holds it (nil once
// lost or closed), and, once keep has started it, the goroutine that
// checks it.
type pgHold struct {
	pool      *pgxpool.Pool
	base      string
	exclusive bool

	// mu is held while c is used: by the check, by with, by Close.
	mu sync.Mutex
	c  *pgxpool.Conn

	every  time.Duration      // holdCheckInterval when keep started
	tried  bool               // a retake failed since the hold was lost: said once
	stop   context.CancelFunc // ends the check; nil until keep
	done   chan struct{}      // closed when the check has ended
	closed bool
}

// holdPG takes the hold of the PostgreSQL sharded queue of base on pool,
// without waiting.
func holdPG(ctx context.Context, pool *pgxpool.Pool, base string, exclusive bool) (*pgHold, error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := pgTryLock(ctx, c.Conn().PgConn(), pgLockKey(base), exclusive); err != nil {
		c.Release()
		return nil, err
	}
	return &pgHold{pool: pool, base: base, exclusive: exclusive, c: c}, nil
}

// keep starts checking the hold every holdCheckInterval on its own
// connection, which keeps the session from idling out. When the check
// fails the session has ended, and the lock with it: a writer's hold (g
// set: the writer's guard) takes it again on another connection of the
// pool, trying again at each interval while the server cannot be reached
// (its connections take the lock themselves meanwhile), and stops the
// process through g when a reshard holds the lock or has swapped the set;
// an exclusive hold (a reshard's) stops the process at once, since a
// writer may have started since.
func (h *pgHold) keep(w holdWatch, g *pgGuard) {
	ctx, cancel := context.WithCancel(context.Background())
	h.every, h.stop, h.done = holdCheckInterval, cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		t := time.NewTicker(h.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if h.check(ctx, w, g) {
				return
			}
		}
	}()
}

// check checks the hold once and takes it again if it was lost; stopped
// says the hold is gone for good (the process was stopped) or Close is
// under way.
func (h *pgHold) check(ctx context.Context, w holdWatch, g *pgGuard) (stopped bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() != nil {
		return true
	}
	log := w.logger()
	if h.c != nil {
		// A ping whose context ends closes the connection (pgx), and the
		// lock with it: give a slow server far longer than the interval.
		cctx, cancel := context.WithTimeout(ctx, holdPingTimeout)
		err := h.c.Ping(cctx)
		cancel()
		if err == nil {
			return false
		}
		if ctx.Err() != nil {
			return true // Close cancelled the check
		}
		h.c.Conn().Close(context.Background())
		h.c.Release()
		h.c = nil
		if h.exclusive || g == nil {
			err = fmt.Errorf("%w %s: the reshard's session ended (%w), so a writer may have opened the queue since; stopped", errHoldLost, h.base, err)
			log.Error("lost the hold on the sharded queue", "err", err)
			if w.lost != nil {
				w.lost(err)
			}
			return true
		}
		log.Warn("the session holding the sharded queue ended; taking the hold again", "queue", h.base, "err", err)
	}
	cctx, cancel := context.WithTimeout(ctx, h.every)
	defer cancel()
	c, err := h.pool.Acquire(cctx)
	if err == nil {
		if err = pgTryLock(cctx, c.Conn().PgConn(), pgLockKey(h.base), false); err == nil {
			var got string
			if got, err = pgSetPrint(cctx, c.Conn().PgConn(), h.base); err == nil && got != g.armed() {
				err = errSetChanged
			}
		}
		if err != nil {
			c.Conn().Close(context.Background())
			c.Release()
		}
	}
	switch {
	case err == nil:
		h.c, h.tried = c, false
		log.Info("took the hold on the sharded queue again", "queue", h.base)
		return false
	case errors.Is(err, errHeld) || errors.Is(err, errSetChanged):
		g.lose(g.refusal(err))
		return true
	case ctx.Err() != nil:
		return true
	default:
		// The server cannot be reached: try again at every check, saying
		// so once. No write gets through meanwhile without the lock
		// (pgGuard).
		if !h.tried {
			h.tried = true
			log.Warn("could not take the hold on the sharded queue again; trying again at every check", "queue", h.base, "every", h.every, "err", err)
		}
		return false
	}
}

// with runs fn on the hold's own connection, in the session that holds
// the lock: what fn commits there, it commits only while the lock is held.
func (h *pgHold) with(ctx context.Context, fn func(c *pgx.Conn) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c == nil {
		return fmt.Errorf("%w %s: its session ended", errHoldLost, h.base)
	}
	return fn(h.c.Conn())
}

// Close ends the hold: the check stops, and the lock is released with the
// session's state. Closing again does nothing: the connection went back to
// the pool the first time, and must not be used after that.
func (h *pgHold) Close() error {
	if h.closed {
		return nil
	}
	h.closed = true
	if h.stop != nil {
		h.stop()
		<-h.done
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c == nil {
		return nil
	}
	c := h.c
	h.c = nil
	// Releasing the connection to the pool would keep the session and its
	// lock: give the lock back (the server frees a closed session's locks
	// only once its backend has exited), then destroy the connection.
	pgUnlockAll(c.Conn().PgConn())
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Conn().Close(cctx)
	c.Release()
	return nil
}
