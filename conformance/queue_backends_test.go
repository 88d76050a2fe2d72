package conformance

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queuestore"
)

func TestQueueSQLite(t *testing.T) { RunQueue(t, sqliteQueue()) }

// FuzzQueueSQLite drives a SQLite store and its twin with the fuzzer's
// bytes, against the model (FuzzQueue).
func FuzzQueueSQLite(f *testing.F) { FuzzQueue(f, sqliteQueue()) }

// sqliteQueue is queuestore as a backend under test.
func sqliteQueue() QueueBackend {
	return QueueBackend{
		Rotation: true,
		NewLoc:   func(t testing.TB) string { return filepath.Join(t.TempDir(), "queue.db") },
		Open: func(t testing.TB, loc string, o QueueOptions) (Queue, error) {
			var opts []queuestore.Option
			if o.Policy != nil {
				opts = append(opts, queuestore.WithPolicy(*o.Policy))
			}
			if o.RealTime {
				opts = append(opts, queuestore.WithRealTime(o.Source, o.Skew))
			}
			if hook := o.Hook; hook != nil {
				opts = append(opts, queuestore.WithHook(hook))
			}
			s, err := queuestore.Open(loc, opts...)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close() error = %v", err)
				}
			})
			return s, nil
		},
		FailWrites: func(t testing.TB, loc string, w FailWrite) {
			db, err := sql.Open("sqlite", loc)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			trig := map[FailWrite]string{
				FailEventInsert: "BEFORE INSERT ON events",
				FailAuditInsert: "BEFORE INSERT ON audit",
				FailServe:       "BEFORE UPDATE OF served ON flows",
			}[w]
			if _, err := db.Exec(`CREATE TRIGGER fail_write ` + trig + ` BEGIN SELECT RAISE(ABORT, '` + string(w) + `'); END`); err != nil {
				t.Fatalf("create trigger: %v", err)
			}
		},
		SchemaVersion: queuestore.SchemaVersion,
		// The model's full count runs without the race detector (mage
		// test runs it again so): under it SQLite's Go engine is some
		// twenty times slower, and the race-built run is there to find
		// data races in the store's code, which a few sequences reach as
		// well as many; disagreements with the model are the full count's.
		// 1000 keeps CI within its budget (docs/decisions/ci-runs.md);
		// FAIRRELAY_CONFORMANCE_SEQUENCES=100000 is the long run.
		Sequences:     1000,
		RaceSequences: 25,
	}
}

func TestQueuePostgres(t *testing.T) {
	pgtest.Require(t)
	b := pgQueue()
	b.FailWrites = func(t testing.TB, loc string, w FailWrite) {
		trig := map[FailWrite]string{
			FailEventInsert: "BEFORE INSERT ON events",
			FailAuditInsert: "BEFORE INSERT ON audit",
			FailServe:       "BEFORE UPDATE OF served ON flows",
		}[w]
		sc := pgx.Identifier{loc}.Sanitize()
		ddl := `CREATE FUNCTION ` + sc + `.fail_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '` + string(w) + `'; END $$;
CREATE TRIGGER fail_write ` + trig + ` FOR EACH ROW EXECUTE FUNCTION ` + sc + `.fail_write()`
		ddl = strings.Replace(ddl, "ON events", "ON "+sc+".events", 1)
		ddl = strings.Replace(ddl, "ON audit", "ON "+sc+".audit", 1)
		ddl = strings.Replace(ddl, "ON flows", "ON "+sc+".flows", 1)
		if _, err := pgtest.Pool(t).Exec(context.Background(), ddl); err != nil {
			t.Fatalf("create trigger: %v", err)
		}
	}
	RunQueue(t, b)
}

// pgQueue is pgqueuestore as a backend under test, in a schema of its own
// per store.
func pgQueue() QueueBackend {
	return QueueBackend{
		Rotation: true,
		NewLoc: func(t testing.TB) string {
			_, schema := pgtest.Schema(t)
			return schema
		},
		Open: func(t testing.TB, loc string, o QueueOptions) (Queue, error) {
			opts := []pgqueuestore.Option{pgqueuestore.WithSchema(loc)}
			if o.Policy != nil {
				opts = append(opts, pgqueuestore.WithPolicy(*o.Policy))
			}
			if o.RealTime {
				opts = append(opts, pgqueuestore.WithRealTime(o.Source, o.Skew))
			}
			if o.Hook != nil {
				opts = append(opts, pgqueuestore.WithHook(o.Hook))
			}
			s, err := pgqueuestore.OpenPool(context.Background(), pgtest.Pool(t), opts...)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close() error = %v", err)
				}
			})
			return s, nil
		},
		SchemaVersion: pgqueuestore.SchemaVersion,
		// A quarter of it under the race detector, which runs mostly in
		// the server (docs/decisions/ci-runs.md).
		Sequences: 100,
	}
}

// queuestore.Store is a Queue as it is: its types and sentinel errors are
// the queue module's.
var _ Queue = (*queuestore.Store)(nil)
