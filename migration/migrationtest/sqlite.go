package migrationtest

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// SQLite returns a Backend with the parts that read an SQLite store's file
// without the store's package: NewLoc (a file in a temporary folder),
// ReadVersion and WriteVersion (PRAGMA user_version), Catalog (every row
// of sqlite_schema but its page number, the statement normalized, except
// the objects named in skip) and Rows (each of tables that exists, in rowid
// order, with its rowid). The store's test fills in the rest. It uses the
// database/sql driver "sqlite", which the store's package registers.
func SQLite(tables []string, skip ...string) Backend {
	return Backend{
		NewLoc: func(t *testing.T) string { return filepath.Join(t.TempDir(), "store.db") },
		ReadVersion: func(t *testing.T, loc string) int {
			db := sqliteDB(t, loc)
			if db == nil {
				return 0
			}
			var v int
			if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
				t.Fatalf("user_version: %v", err)
			}
			return v
		},
		WriteVersion: func(t *testing.T, loc string, v int) {
			db := sqliteDB(t, loc)
			if db == nil {
				t.Fatalf("write user_version: no file at %s", loc)
			}
			if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
				t.Fatalf("write user_version: %v", err)
			}
		},
		Catalog: func(t *testing.T, loc string) []string {
			db := sqliteDB(t, loc)
			if db == nil {
				return nil
			}
			rows, err := db.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema`)
			if err != nil {
				t.Fatalf("sqlite_schema: %v", err)
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var typ, name, tbl, text string
				if err := rows.Scan(&typ, &name, &tbl, &text); err != nil {
					t.Fatalf("sqlite_schema: %v", err)
				}
				if !slices.Contains(skip, name) {
					out = append(out, fmt.Sprintf("%s %s on %s: %s", typ, name, tbl, NormalizeSQL(text)))
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("sqlite_schema: %v", err)
			}
			return out
		},
		Rows: func(t *testing.T, loc string) map[string][]map[string]string {
			out := map[string][]map[string]string{}
			db := sqliteDB(t, loc)
			if db == nil {
				return out
			}
			for _, tab := range tables {
				var n int
				if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, tab).Scan(&n); err != nil {
					t.Fatalf("sqlite_schema: %v", err)
				}
				if n == 1 {
					out[tab] = sqliteRows(t, db, tab)
				}
			}
			return out
		},
	}
}

// sqliteDB opens the file at path, closed when t ends, or returns nil when
// there is no file (a new location, which opening would create).
func sqliteDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sqliteRows reads every row of tab in rowid order, with its rowid, each
// value as text (NULL as "NULL").
func sqliteRows(t *testing.T, db *sql.DB, tab string) []map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT rowid AS "rowid", * FROM "` + tab + `" ORDER BY rowid`)
	if err != nil {
		t.Fatalf("rows of %s: %v", tab, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatalf("rows of %s: %v", tab, err)
	}
	var out []map[string]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("row of %s: %v", tab, err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = text(vals[i])
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("rows of %s: %v", tab, err)
	}
	return out
}

// text is a value as Rows shows it.
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(v)
	}
	return fmt.Sprint(v)
}
