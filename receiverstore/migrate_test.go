package receiverstore

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/migration/migrationtest"
)

// TestMigrations runs the migration clauses every store shares
// (migrationtest) on the receiver's file: a new file runs every migration,
// a newer file is refused, a failure after a migration leaves the file as
// it was, a version-1 file (before retention) and a version-2 one (before
// the prune's order of ties) reach the newest version with every row
// kept. Not parallel: it sets migrateHook.
func TestMigrations(t *testing.T) {
	b := migrationtest.SQLite(receiverTables)
	b.Version = SchemaVersion
	b.Olds = []migrationtest.Old{{Name: "V1Build", Version: 1, Make: func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "v1.db")
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`PRAGMA user_version = 1`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(migrations[0].SQL + `
INSERT INTO flows VALUES ('f', 3, 7);
INSERT INTO receipts VALUES ('a', 'f', 1, CAST('{"delta": 3}' AS BLOB), 3), ('b', 'f', 2, CAST('{"delta": 4}' AS BLOB), 4);
INSERT INTO conflicts VALUES ('x', 'f', 1, CAST('{"delta": 9}' AS BLOB), 'seq_taken', 'a', 'f', 1, 0);`); err != nil {
			t.Fatal(err)
		}
		return path
	}}, {Name: "V2Build", Version: 2, Make: func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "v2.db")
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`PRAGMA user_version = 2`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(migrations[0].SQL + migrations[1].SQL + `
INSERT INTO flows VALUES ('f', 4, 8, 1);
INSERT INTO receipts VALUES ('b', 'f', 2, CAST('{"delta": 4}' AS BLOB), 4, 1000001), ('c', 'f', 3, CAST('{"delta": 1}' AS BLOB), 1, 1000001);
INSERT INTO conflicts VALUES ('x', 'f', 1, CAST('{"delta": 9}' AS BLOB), 'seq_behind', '', '', 0, 4);`); err != nil {
			t.Fatal(err)
		}
		return path
	}}}
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
