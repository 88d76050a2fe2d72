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
// the schema as it was. Version 1 is the only one, so no older schema
// exists. Not parallel: it sets migrateHook.
func TestMigrations(t *testing.T) {
	pgtest.Require(t)
	b := pgtest.Migrations([]string{"flows", "receipts", "conflicts"})
	b.Version = SchemaVersion
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
