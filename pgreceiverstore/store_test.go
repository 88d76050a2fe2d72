package pgreceiverstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/receiver"
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

func msg(id, flow string, seq int64, delta int) receiver.Message {
	return receiver.Message{ID: id, Flow: flow, Seq: seq, Body: fmt.Appendf(nil, `{"delta": %d}`, delta)}
}

func execSQL(t *testing.T, url, sql string) {
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

// TestReopenKeepsAndVersions: a reopen keeps everything; a newer version
// and a schema with foreign tables are refused.
func TestReopenKeepsAndVersions(t *testing.T) {
	ctx := context.Background()
	s, url, schema := open(t)
	if o, err := s.Receive(ctx, msg("a", "f", 1, 3)); err != nil || o != receiver.Accepted {
		t.Fatal(o, err)
	}
	s2, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	snap, err := s2.Snapshot(ctx)
	if err != nil || snap.SchemaVersion != receiver.SnapshotFormat || len(snap.Receipts) != 1 || snap.Flows[0].Total != 3 {
		t.Fatalf("%+v %v", snap, err)
	}
	execSQL(t, url, "INSERT INTO "+schema+".schema_migrations (version) VALUES (99)")
	if _, err := Open(ctx, url, WithSchema(schema)); !errors.Is(err, receiver.ErrSchemaVersion) {
		t.Fatalf("newer version: %v", err)
	}
	_, other := pgtest.Schema(t)
	execSQL(t, url, "CREATE SCHEMA "+other+"; CREATE TABLE "+other+".x (i int)")
	if _, err := Open(ctx, url, WithSchema(other)); !errors.Is(err, receiver.ErrSchemaVersion) {
		t.Fatalf("foreign schema: %v", err)
	}
	if _, err := Open(ctx, url, WithSchema(schema), WithMaxDelta(0)); !errors.Is(err, receiver.ErrInvalidOption) {
		t.Fatalf("max delta 0: %v", err)
	}
}

// TestAcceptIsAtomic makes the flow write fail (a trigger) and finds the
// receipt undone.
func TestAcceptIsAtomic(t *testing.T) {
	ctx := context.Background()
	s, url, schema := open(t)
	execSQL(t, url, `CREATE FUNCTION `+schema+`.boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom'; END $$;
CREATE TRIGGER boom BEFORE INSERT OR UPDATE ON `+schema+`.flows FOR EACH ROW EXECUTE FUNCTION `+schema+`.boom()`)
	if _, err := s.Receive(ctx, msg("a", "f", 1, 3)); err == nil {
		t.Fatal("accept with a failing flow write succeeded")
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Receipts) != 0 || len(snap.Flows) != 0 {
		t.Fatalf("after the failed accept: %+v %v", snap, err)
	}
}

// TestConcurrentReceivers: 8 goroutines deliver the same 3 flows × 30
// messages, each in its own order of flows; every message is accepted
// exactly once and the totals are exact.
func TestConcurrentReceivers(t *testing.T) {
	ctx := context.Background()
	s, _, _ := open(t)
	const flows, per, workers = 3, 30, 8
	var wg sync.WaitGroup
	counts := make([]map[receiver.Outcome]int, workers)
	errs := make(chan error, workers)
	for w := range workers {
		counts[w] = map[receiver.Outcome]int{}
		wg.Go(func() {
			for seq := int64(1); seq <= per; seq++ {
				for k := range flows {
					f := (k + w) % flows
					m := msg(fmt.Sprintf("f%d-%d", f, seq), fmt.Sprintf("f%d", f), seq, f+1)
					for {
						o, err := s.Receive(ctx, m)
						if err != nil {
							errs <- err
							return
						}
						counts[w][o]++
						if o != receiver.Gap {
							break
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	accepted := 0
	for _, c := range counts {
		accepted += c[receiver.Accepted]
		if c[receiver.Conflict] != 0 {
			t.Fatalf("conflicts: %v", c)
		}
	}
	if accepted != flows*per {
		t.Fatalf("accepted %d, want %d", accepted, flows*per)
	}
	for f := range flows {
		if tot, err := s.Total(ctx, fmt.Sprintf("f%d", f)); err != nil || tot != int64(per*(f+1)) {
			t.Fatalf("flow %d total %d, %v", f, tot, err)
		}
	}
}

// TestSchemaNameLength: a schema name PostgreSQL would cut short is
// ErrInvalidOption and creates nothing; the longest accepted one works.
func TestSchemaNameLength(t *testing.T) {
	ctx := context.Background()
	url, long := pgtest.SchemaOfLen(t, MaxSchemaLen+1)
	if _, err := Open(ctx, url, WithSchema(long)); !errors.Is(err, receiver.ErrInvalidOption) {
		t.Fatalf("a %d-byte schema name: %v, want ErrInvalidOption", len(long), err)
	}
	if n := pgtest.SchemasWithPrefix(t, long); n != 0 {
		t.Fatalf("schemas after the refusal: %d, want none", n)
	}
	_, longest := pgtest.SchemaOfLen(t, MaxSchemaLen)
	s, err := Open(ctx, url, WithSchema(longest))
	if err != nil {
		t.Fatalf("a %d-byte schema name: %v", MaxSchemaLen, err)
	}
	defer s.Close()
	if out, err := s.Receive(ctx, msg("a", "f", 1, 2)); err != nil || out != receiver.Accepted {
		t.Fatalf("Receive = %v, %v", out, err)
	}
}

// TestSchemaNameInjection: a schema name with a line break is ErrInvalidOption
// and runs nothing: the store puts the quoted name into its migrations'
// comments too, where a line break would end the comment.
func TestSchemaNameInjection(t *testing.T) {
	pgtest.RefusesSchemaInjection(t, func(ctx context.Context, url, schema string) (*Store, error) {
		return Open(ctx, url, WithSchema(schema))
	}, receiver.ErrInvalidOption)
}
