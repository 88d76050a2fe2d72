package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

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
	conn, schema, _, err = pgTargetReply(raw, def, flagName)
	return conn, schema, err
}

// pgTargetReply is pgTarget that also takes reply_timeout=DURATION out of
// the URL (0 when absent).
func pgTargetReply(raw, def, flagName string) (conn, schema string, reply time.Duration, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", 0, usagef("--%s: not a valid PostgreSQL URL", flagName)
	}
	schema = def
	q := u.Query()
	if q.Has("reply_timeout") {
		reply, err = time.ParseDuration(q.Get("reply_timeout"))
		if err != nil || reply <= 0 {
			return "", "", 0, usagef("--%s %s: reply_timeout=%s: want a positive Go duration such as 30s", flagName, u.Redacted(), q.Get("reply_timeout"))
		}
		q.Del("reply_timeout")
		u.RawQuery = q.Encode()
	}
	if q.Has("schema") {
		schema = q.Get("schema")
		if schema == "" {
			return "", "", 0, usagef("--%s %s: schema= is empty", flagName, u.Redacted())
		}
		q.Del("schema")
		u.RawQuery = q.Encode()
	}
	return u.String(), schema, reply, nil
}

// pgConfig is the connection configuration of a --queue or --receiver
// URL, with relayctl's network settings (configureNetwork), the URL pgx
// parsed (without schema= and reply_timeout=) and the schema.
func pgConfig(raw, def, flagName string) (cfg *pgxpool.Config, conn, schema string, err error) {
	conn, schema, reply, err := pgTargetReply(raw, def, flagName)
	if err != nil {
		return nil, "", "", err
	}
	cfg, err = pgxpool.ParseConfig(conn)
	if err != nil {
		return nil, "", "", usagef("--%s %s: %v", flagName, shown(raw), err)
	}
	configureNetwork(cfg, conn, reply)
	return cfg, conn, schema, nil
}

// errNoSchema is pgOpen's refusal of a schema that does not exist.
var errNoSchema = errors.New("does not exist")

// pgOpen connects to the URL of a --queue or --receiver value and, unless
// create is set, makes sure the schema exists: a typo must not turn into a
// fresh empty store, as for a SQLite file (store.go, mustExist). minConns
// raises the pool's size when the URL does not set pool_max_conns (the
// relay holds one connection for LISTEN).
func pgOpen(ctx context.Context, raw, def, what, flagName string, create bool, minConns int32) (*pgxpool.Pool, string, error) {
	return pgOpenWith(ctx, raw, def, what, flagName, create, minConns, nil)
}

// pgOpenWith is pgOpen that lets configure change the pool's
// configuration, given the schema, before the pool makes a connection.
func pgOpenWith(ctx context.Context, raw, def, what, flagName string, create bool, minConns int32,
	configure func(cfg *pgxpool.Config, schema string)) (*pgxpool.Pool, string, error) {
	cfg, conn, schema, err := pgConfig(raw, def, flagName)
	if err != nil {
		return nil, "", err
	}
	if configure != nil {
		configure(cfg, schema)
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
			return nil, errors.Join(err, o.Close())
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

// The network settings of relayctl's PostgreSQL connections
// (docs/reliability.md, "Network and database faults"). A URL parameter of
// the same name wins over each.
const (
	// defaultConnectTimeout bounds one connection attempt
	// (connect_timeout): a server that is down or unreachable fails the
	// attempt instead of hanging it.
	defaultConnectTimeout = 10 * time.Second
	// defaultReplyTimeout is relay's and receive's reply_timeout: a
	// connection that sent a statement and has heard nothing back for this
	// long is closed, and the call fails (the relay retries it with its
	// capped backoff; the receiver answers 503). It is what ends a call
	// on a connection lost in a partition, which TCP alone may not notice
	// for many minutes. Other commands have none unless the URL sets one:
	// an operator's long statement (a large redrive-all) must not be cut.
	defaultReplyTimeout = 30 * time.Second
	// keepAliveIdle, keepAliveInterval and keepAliveCount are the TCP
	// keepalives of every connection: an idle connection to a vanished
	// host is found dead after about 15 + 3 x 5 = 30 s.
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
)

// configureNetwork sets cfg's network behaviour where the URL conn does
// not: connect_timeout, TCP keepalives, the reply timeout (reply, or
// defaultReplyTimeout for relay and receive), the server's
// idle_in_transaction_session_timeout (the reply timeout, so a session
// whose client vanished mid-transaction gives its locks back), and
// application_name fairrelay-COMMAND (fairrelay-relay, fairrelay-receive,
// ...), by which an operator, or the soak, finds the sessions of each
// kind of process in pg_stat_activity.
func configureNetwork(cfg *pgxpool.Config, conn string, reply time.Duration) {
	cc := cfg.ConnConfig
	if !strings.Contains(conn, "connect_timeout") {
		cc.ConnectTimeout = defaultConnectTimeout
	}
	cmd := commandName(os.Args)
	if reply == 0 && (cmd == "relay" || cmd == "receive") {
		reply = defaultReplyTimeout
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "fairrelay-" + cmd
	}
	if _, ok := cc.RuntimeParams["idle_in_transaction_session_timeout"]; !ok && reply > 0 {
		cc.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(reply.Milliseconds(), 10)
	}
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
	}}
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil || reply <= 0 {
			return c, err
		}
		return &replyConn{Conn: c, wait: reply}, nil
	}
}

// commandName is relayctl's command in args (os.Args): the first argument
// after the global flags, which all take a value; "relayctl" when there is
// none.
func commandName(args []string) string {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			if !strings.Contains(a, "=") {
				i++ // the flag's value
			}
			continue
		}
		return a
	}
	return "relayctl"
}

// replyConn is a connection that gives up on a reply that does not come:
// once something was written, the next read must bring a first byte within
// wait, or it fails with a timeout (pgx then closes the connection). A
// read after the reply began (a long result, a LISTEN connection waiting
// for notifications) has no such limit. A deadline pgx sets (a context's)
// is kept: the earlier of the two applies.
type replyConn struct {
	net.Conn
	wait time.Duration

	mu       sync.Mutex
	awaiting time.Time // when the write that awaits a reply was made (zero: none)
	own      time.Time // the read deadline pgx set (zero: none)
}

// apply sets the connection's read deadline from the state; mu is held.
func (c *replyConn) apply() error {
	d := c.own
	if !c.awaiting.IsZero() {
		if r := c.awaiting.Add(c.wait); d.IsZero() || r.Before(d) {
			d = r
		}
	}
	return c.Conn.SetReadDeadline(d)
}

func (c *replyConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.awaiting.IsZero() {
		c.awaiting = time.Now()
		_ = c.apply()
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *replyConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		if !c.awaiting.IsZero() {
			c.awaiting = time.Time{}
			_ = c.apply()
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *replyConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own = t
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.apply()
}

func (c *replyConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.own = t
	return c.apply()
}

// autovacuumWarning is what relayctl relay and receive log at start for a
// PostgreSQL server whose autovacuum is off (docs/postgres.md, "Vacuum").
const autovacuumWarning = "PostgreSQL's autovacuum is off: every claim and settle rewrites a row of the queue's flows and meta tables, and every receive one of the receiver's flows; nothing reclaims their dead rows, and the tables and their indexes grow until a VACUUM runs"

// warnAutovacuum logs autovacuumWarning once for each PostgreSQL server
// among vals (--queue and --receiver values; a SQLite path is skipped)
// that runs with autovacuum off. It reads the setting on a connection of
// its own, closed at once, within 5 s; a server it cannot ask is logged,
// not fatal: the relay's own connections report a server that is down.
func warnAutovacuum(ctx context.Context, log *slog.Logger, vals ...string) {
	seen := map[string]bool{}
	for _, raw := range vals {
		if !isPostgres(raw) {
			continue
		}
		cfg, _, _, err := pgConfig(raw, "", "queue")
		if err != nil {
			continue // the store's own open has already refused it
		}
		key := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
		if seen[key] {
			continue
		}
		seen[key] = true
		off, err := autovacuumOff(ctx, cfg.ConnConfig)
		switch {
		case err != nil:
			log.Warn("could not read the PostgreSQL server's autovacuum setting", "server", shown(raw), "err", err)
		case off:
			log.Warn(autovacuumWarning, "server", shown(raw), "docs", `docs/postgres.md, "Vacuum"`)
		}
	}
}

// autovacuumOff reports whether the server cc connects to runs with
// autovacuum off.
func autovacuumOff(ctx context.Context, cc *pgx.ConnConfig) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return false, err
	}
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, "SHOW autovacuum").Scan(&v); err != nil {
		return false, err
	}
	return v == "off", nil
}
