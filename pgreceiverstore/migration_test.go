package pgreceiverstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/migration/migrationtest"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/receiver"
)

// TestMigrations runs the migration clauses every store shares
// (migrationtest) on the receiver's schema: a new schema runs every
// migration, a newer schema is refused, a failure after a migration leaves
// the schema as it was, a version-1 schema (before retention), a
// version-2 one (before the one-call receive) and a version-4 one (before
// the prune's order of ties) reach the newest version with every row
// kept. Not parallel: it sets migrateHook.
func TestMigrations(t *testing.T) {
	pgtest.Require(t)
	b := pgtest.Migrations([]string{"flows", "receipts", "conflicts"})
	b.Version = SchemaVersion
	b.Olds = []migrationtest.Old{{Name: "V1Build", Version: 1, Make: func(t *testing.T) string {
		_, schema := pgtest.Schema(t)
		pgtest.ExecIn(t, schema, `CREATE TABLE {s}.schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO {s}.schema_migrations (version) VALUES (1);
`+migrations[0].SQL+`
INSERT INTO {s}.flows VALUES ('f', 3, 7);
INSERT INTO {s}.receipts VALUES ('a', 'f', 1, '{"delta": 3}', 3), ('b', 'f', 2, '{"delta": 4}', 4);
INSERT INTO {s}.conflicts VALUES ('x', 'f', 1, '{"delta": 9}', 'seq_taken', 'a', 'f', 1, 0);`)
		return schema
	}}, {Name: "V2Build", Version: 2, Make: func(t *testing.T) string {
		_, schema := pgtest.Schema(t)
		pgtest.ExecIn(t, schema, `CREATE TABLE {s}.schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO {s}.schema_migrations (version) VALUES (1), (2);
`+migrations[0].SQL+"\n"+migrations[1].SQL+`
INSERT INTO {s}.flows VALUES ('f', 4, 8, 1);
INSERT INTO {s}.receipts VALUES ('b', 'f', 2, '{"delta": 4}', 4, '2026-01-01 00:00:01+00'), ('c', 'f', 3, '{"delta": 1}', 1, '2026-01-01 00:00:02+00');
INSERT INTO {s}.conflicts VALUES ('x', 'f', 1, '{"delta": 9}', 'seq_behind', '', '', 0, 4);`)
		return schema
	}}, {Name: "V4Build", Version: 4, Make: func(t *testing.T) string {
		_, schema := pgtest.Schema(t)
		pgtest.ExecIn(t, schema, `CREATE TABLE {s}.schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO {s}.schema_migrations (version) VALUES (1), (2), (3), (4);
`+migrations[0].SQL+"\n"+migrations[1].SQL+"\n"+migrations[2].SQL+"\n"+migrations[3].SQL+`
INSERT INTO {s}.flows VALUES ('f', 4, 8, 1);
INSERT INTO {s}.receipts VALUES ('b', 'f', 2, '{"delta": 4}', 4, '2026-01-01 00:00:01+00'), ('c', 'f', 3, '{"delta": 1}', 1, '2026-01-01 00:00:01+00');
INSERT INTO {s}.conflicts VALUES ('x', 'f', 1, '{"delta": 9}', 'seq_behind', '', '', 0, 4);`)
		return schema
	}}}
	b.Open = func(t *testing.T, schema string) error {
		s, err := OpenPool(context.Background(), pgtest.Pool(t), WithSchema(schema))
		if err != nil {
			return err
		}
		return s.Close()
	}
	b.FailAfter = func(v int) func() {
		migrateHook = func(at int) error {
			if at == v {
				return fmt.Errorf("injected failure after migration %d", v)
			}
			return nil
		}
		return func() { migrateHook = nil }
	}
	b.ErrNewer = receiver.ErrSchemaVersion
	migrationtest.Run(t, b)
}
