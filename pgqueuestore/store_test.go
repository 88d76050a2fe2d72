package pgqueuestore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

func open(t testing.TB, opts ...Option) (*Store, string, string) {
	t.Helper()
	url, schema := pgtest.Schema(t)
	s, err := Open(context.Background(), url, append([]Option{WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url, schema
}

func execSQL(t testing.TB, url, sql string) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

// TestReopenVersionsPolicy: a reopen keeps everything; a newer version, a
// foreign schema and a different explicit policy are refused.
func TestReopenVersionsPolicy(t *testing.T) {
	ctx := context.Background()
	s, url, schema := open(t)
	if _, err := s.Enqueue(ctx, queue.Event{ID: "a", Flow: "f", Body: []byte("x")}, 3); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, url, WithSchema(schema), WithPolicy(queue.DefaultPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	st, err := s2.Stats(ctx)
	if err != nil || st.ClockMark != 3 || st.Events.Pending != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	p := queue.DefaultPolicy()
	p.Lease = 7
	if _, err := Open(ctx, url, WithSchema(schema), WithPolicy(p)); !errors.Is(err, queue.ErrPolicyMismatch) {
		t.Fatalf("other policy: %v", err)
	}
	execSQL(t, url, "INSERT INTO "+schema+".schema_migrations (version) VALUES (99)")
	if _, err := Open(ctx, url, WithSchema(schema)); !errors.Is(err, queue.ErrSchemaVersion) {
		t.Fatalf("newer version: %v", err)
	}
	_, other := pgtest.Schema(t)
	execSQL(t, url, "CREATE SCHEMA "+other+"; CREATE TABLE "+other+".x (i int)")
	if _, err := Open(ctx, url, WithSchema(other)); !errors.Is(err, queue.ErrSchemaVersion) {
		t.Fatalf("foreign schema: %v", err)
	}
}

// TestSchemaNameLength: a schema name whose wake-up channel would not fit
// PostgreSQL's 63-byte names is ErrInvalid and creates nothing; the longest
// accepted one works end to end, its wake-up included.
func TestSchemaNameLength(t *testing.T) {
	ctx := context.Background()
	url, long := pgtest.SchemaOfLen(t, MaxSchemaLen+1)
	if _, err := Open(ctx, url, WithSchema(long)); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("a %d-byte schema name: %v, want ErrInvalid", len(long), err)
	}
	if n := pgtest.SchemasWithPrefix(t, long); n != 0 {
		t.Fatalf("schemas after the refusal: %d, want none", n)
	}
	_, longest := pgtest.SchemaOfLen(t, MaxSchemaLen)
	s, err := Open(ctx, url, WithSchema(longest), WithNotifyInterval(0))
	if err != nil {
		t.Fatalf("a %d-byte schema name: %v", len(longest), err)
	}
	defer s.Close()
	l, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := s.Enqueue(ctx, queue.Event{ID: "a", Flow: "f", Body: []byte("x")}, 1); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := l.Wait(wctx); err != nil {
		t.Fatalf("wake-up on the longest schema name: %v", err)
	}
}

// TestSchemaNameInjection: a schema name with a line break is ErrInvalid
// and runs nothing: the store puts the quoted name into its migrations'
// comments too, where a line break would end the comment.
func TestSchemaNameInjection(t *testing.T) {
	pgtest.RefusesSchemaInjection(t, func(ctx context.Context, url, schema string) (*Store, error) {
		return Open(ctx, url, WithSchema(schema))
	}, queue.ErrInvalid)
}
