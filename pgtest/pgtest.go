// Package pgtest finds the PostgreSQL server that tests run against and
// gives each test a schema of its own (docs/postgres.md "Tests").
//
// The server is FAIRRELAY_POSTGRES (a URL) when it is set, else the
// project's local default, postgres://postgres@127.0.0.1:5432/test. With
// no server reachable a test is skipped with one line saying how to run it;
// with FAIRRELAY_REQUIRE_POSTGRES=1 (set by .ci/run) it fails instead, so
// CI cannot pass without running the PostgreSQL tests.
//
// StartCluster (cluster.go) starts a private cluster instead, in a
// directory of its own on a free port, which a test or the soak may stop
// and restart at will (the shared server must never be restarted: other
// tests run on it).
//
// It is a test helper: _test.go files import it, and the soak, which
// runs its chaos on a private cluster.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the server the tests try when FAIRRELAY_POSTGRES is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// EnvURL names the variable that says where the server is; EnvRequire the
// one that turns "no server" into a failure.
const (
	EnvURL     = "FAIRRELAY_POSTGRES"
	EnvRequire = "FAIRRELAY_REQUIRE_POSTGRES"
)

// URL returns the server's URL: FAIRRELAY_POSTGRES or DefaultURL.
func URL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return DefaultURL
}

var (
	probeOnce sync.Once
	probeErr  error
	pool      *pgxpool.Pool
	skipOnce  sync.Once
)

// PoolSize is the most connections the shared pool opens: a test binary
// of this project never holds more, however many stores its tests open,
// so parallel test packages stay below the server's max_connections.
const PoolSize = 8

// probe connects once per test binary.
func probe() error {
	probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cfg, err := pgxpool.ParseConfig(URL())
		if err != nil {
			probeErr = err
			return
		}
		cfg.MaxConns = PoolSize
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			probeErr = err
			return
		}
		if err := p.Ping(ctx); err != nil {
			p.Close()
			probeErr = err
			return
		}
		pool = p
	})
	return probeErr
}

// Require skips t (or fails it, with FAIRRELAY_REQUIRE_POSTGRES=1) when
// the server cannot be reached, and returns its URL otherwise. The first
// skip in a test binary also prints its one-line reason on stderr.
func Require(t testing.TB) string {
	t.Helper()
	if err := probe(); err != nil {
		msg := fmt.Sprintf("PostgreSQL tests skipped: no server at %s (%v); start one or set %s=postgres://…, and %s=1 to make this a failure",
			URL(), err, EnvURL, EnvRequire)
		// One line per test binary, on stderr, which go test shows
		// without -v; each test's own skip (or failure) says it again.
		skipOnce.Do(func() { fmt.Fprintln(os.Stderr, msg) })
		Missing(t, msg)
	}
	return URL()
}

// Missing ends t because something the PostgreSQL tests need is not
// there (the server, its binaries, an extension): it skips t with msg,
// or fails it with FAIRRELAY_REQUIRE_POSTGRES=1, where nothing may be
// missing (CI).
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Pool returns the test binary's shared pool (at most PoolSize
// connections), skipping or failing t as Require does. Stores opened with
// OpenPool on it never exhaust the server's connections.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	Require(t)
	return pool
}

// Schema returns the server's URL and a new schema name of the form
// test_<16 hex digits>, unique to this call, which is dropped (with
// everything in it) when t ends. The schema is not created: the stores
// create their own schema on Open.
func Schema(t testing.TB) (url, schema string) {
	t.Helper()
	url = Require(t)
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema = "test_" + hex.EncodeToString(b[:])
	dropWhenDone(t, schema)
	return url, schema
}

// dropWhenDone drops schema, with everything in it, when t ends.
func dropWhenDone(t testing.TB, schema string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
}

// SchemaOfLen is Schema with a name of exactly n bytes (n at least 21, the
// length of Schema's names), padded with 'x': for tests of the limits of
// PostgreSQL's 63-byte names. It is dropped when t ends, as Schema's are.
func SchemaOfLen(t testing.TB, n int) (url, schema string) {
	t.Helper()
	url, base := Schema(t)
	if n < len(base) {
		t.Fatalf("pgtest: SchemaOfLen(%d): names are at least %d bytes", n, len(base))
	}
	schema = base + strings.Repeat("x", n-len(base))
	dropWhenDone(t, schema)
	return url, schema
}

// SchemasWithPrefix counts the server's schemas whose names begin with
// prefix, cut to the 63 bytes the server keeps of a name: a test that a
// refused Open created nothing, under its full name or the one the server
// would have cut it to.
func SchemasWithPrefix(t testing.TB, prefix string) int {
	t.Helper()
	Require(t)
	prefix = prefix[:min(len(prefix), 63)]
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE starts_with(nspname, $1)`, prefix).Scan(&n); err != nil {
		t.Fatalf("pgtest: count schemas: %v", err)
	}
	return n
}

// RefusesSchemaInjection checks that open, a store's Open on the server at
// url with the schema name it is given, refuses a name holding a line
// break with an error that is want, and that nothing ran: the name would
// end an SQL comment of a migration it is put into, and the test's name
// creates a schema if it runs. A store open did open is closed.
func RefusesSchemaInjection[S io.Closer](t *testing.T, open func(ctx context.Context, url, schema string) (S, error), want error) {
	t.Helper()
	url, injected := Schema(t)
	name := "x\nCREATE SCHEMA " + injected + ";--"
	dropWhenDone(t, name)
	s, err := open(context.Background(), url, name)
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, want) {
		t.Fatalf("schema name %q: %v, want %v", name, err, want)
	}
	if n, m := SchemasWithPrefix(t, injected), SchemasWithPrefix(t, name); n+m != 0 {
		t.Fatalf("after the refusal: %d injected schemas, %d of the name; want none", n, m)
	}
}
