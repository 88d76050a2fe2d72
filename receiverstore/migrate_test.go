package receiverstore

import (
	"fmt"
	"testing"

	"github.com/fairrelay/fairrelay/migration/migrationtest"
)

// TestMigrations runs the migration clauses every store shares
// (migrationtest) on the receiver's file: a new file runs every migration,
// a newer file is refused, a failure after a migration leaves the file as
// it was. Version 1 is the only one, so no older file exists. Not
// parallel: it sets migrateHook.
func TestMigrations(t *testing.T) {
	b := migrationtest.SQLite(receiverTables)
	b.Version = SchemaVersion
	b.Open = func(t *testing.T, loc string) error {
		s, err := Open(loc)
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
	b.ErrNewer = ErrSchemaVersion
	migrationtest.Run(t, b)
}
