package pgtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSchemaIsDropped creates a table in a test schema and checks that the
// cleanup dropped the schema.
func TestSchemaIsDropped(t *testing.T) {
	url := Require(t)
	var schema string
	t.Run("inner", func(t *testing.T) {
		var u string
		u, schema = Schema(t)
		c, err := pgx.Connect(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".t (x int)"); err != nil {
			t.Fatal(err)
		}
	})
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s still exists", schema)
	}
}

// endRecorder is a testing.TB that records how Missing ended it. A real
// Fatal or Skip stops the test; the recorder returns, so it keeps the
// first end only.
type endRecorder struct {
	testing.TB
	ended string
}

func (r *endRecorder) Helper()           {}
func (r *endRecorder) Fatal(args ...any) { r.end("fatal: " + fmt.Sprint(args...)) }
func (r *endRecorder) Skip(args ...any)  { r.end("skip: " + fmt.Sprint(args...)) }

func (r *endRecorder) end(how string) {
	if r.ended == "" {
		r.ended = how
	}
}

// TestMissing_SkipsOrFails: what a test needs is missing; it is skipped
// on a user's machine and fails where PostgreSQL is required.
func TestMissing_SkipsOrFails(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"", "skip: no x"},
		{"0", "skip: no x"},
		{"1", "fatal: no x"},
	} {
		t.Setenv(EnvRequire, c.env)
		r := &endRecorder{}
		Missing(r, "no x")
		if r.ended != c.want {
			t.Errorf("%s=%q: Missing ended the test with %q, want %q", EnvRequire, c.env, r.ended, c.want)
		}
	}
}
