package pgtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/migration/migrationtest"
	"github.com/jackc/pgx/v5"
)

// Migrations returns a migrationtest.Backend with the parts that read a
// PostgreSQL store's schema without the store's package: NewLoc (a Schema
// name), ReadVersion and WriteVersion (the schema_migrations table),
// Catalog (columns, constraints, indexes, triggers, functions and
// relations' options, each as the server prints it, the schema's name
// replaced by "{s}") and Rows (each of tables that exists, ordered by all
// its columns in order). The store's test fills in the rest.
func Migrations(tables []string) migrationtest.Backend {
	return migrationtest.Backend{
		NewLoc: func(t *testing.T) string {
			_, schema := Schema(t)
			return schema
		},
		ReadVersion: func(t *testing.T, schema string) int {
			ctx := context.Background()
			name := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
			var exists bool
			if err := Pool(t).QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
				t.Fatalf("pgtest: read the version of %s: %v", schema, err)
			}
			var v int
			if !exists {
				return 0
			}
			if err := Pool(t).QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+name).Scan(&v); err != nil {
				t.Fatalf("pgtest: read the version of %s: %v", schema, err)
			}
			return v
		},
		WriteVersion: func(t *testing.T, schema string, v int) {
			ExecIn(t, schema, fmt.Sprintf(`INSERT INTO {s}.schema_migrations (version) VALUES (%d)`, v))
		},
		Catalog: catalog,
		Rows: func(t *testing.T, schema string) map[string][]map[string]string {
			out := map[string][]map[string]string{}
			for _, tab := range tables {
				if rows := tableRows(t, schema, tab); rows != nil {
					out[tab] = rows
				}
			}
			return out
		},
	}
}

// ExecIn runs sql, one statement or several, in schema, which it creates
// when missing: "{s}" in sql stands for the quoted schema name, as in the
// stores' migrations.
func ExecIn(t testing.TB, schema, sql string) {
	t.Helper()
	q := pgx.Identifier{schema}.Sanitize()
	if _, err := Pool(t).Exec(context.Background(), "CREATE SCHEMA IF NOT EXISTS "+q+";\n"+strings.ReplaceAll(sql, "{s}", q)); err != nil {
		t.Fatalf("pgtest: in schema %s: %v", schema, err)
	}
}

// qCatalog lists a schema's objects, one line each, as the server prints
// them.
const qCatalog = `SELECT 'column ' || table_name || '.' || column_name || ' #' || ordinal_position || ' ' || data_type
    || coalesce(' collate ' || collation_name, '') || ' nullable ' || is_nullable
    || coalesce(' default ' || column_default, '') || ' generated ' || is_generated
    || coalesce(' as ' || generation_expression, '')
FROM information_schema.columns WHERE table_schema = $1
UNION ALL
SELECT 'constraint ' || r.relname || '.' || c.conname || ' ' || c.contype::text || ': ' || pg_get_constraintdef(c.oid)
FROM pg_constraint AS c JOIN pg_class AS r ON r.oid = c.conrelid JOIN pg_namespace AS n ON n.oid = c.connamespace
WHERE n.nspname = $1
UNION ALL
SELECT 'index ' || tablename || '.' || indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = $1
UNION ALL
SELECT 'trigger ' || r.relname || '.' || g.tgname || ': ' || pg_get_triggerdef(g.oid)
FROM pg_trigger AS g JOIN pg_class AS r ON r.oid = g.tgrelid JOIN pg_namespace AS n ON n.oid = r.relnamespace
WHERE n.nspname = $1 AND NOT g.tgisinternal
UNION ALL
SELECT 'function ' || p.proname || ': ' || pg_get_functiondef(p.oid)
FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = $1
UNION ALL
SELECT 'relation ' || r.relname || ' kind ' || r.relkind::text || coalesce(' options ' || array_to_string(r.reloptions, ','), '')
FROM pg_class AS r JOIN pg_namespace AS n ON n.oid = r.relnamespace WHERE n.nspname = $1`

// catalog is Migrations' Catalog.
func catalog(t *testing.T, schema string) []string {
	t.Helper()
	rows, err := Pool(t).Query(context.Background(), qCatalog, schema)
	if err != nil {
		t.Fatalf("pgtest: catalog of %s: %v", schema, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("pgtest: catalog of %s: %v", schema, err)
	}
	quoted := pgx.Identifier{schema}.Sanitize()
	for i, l := range lines {
		l = strings.ReplaceAll(l, quoted, "{s}")
		lines[i] = migrationtest.NormalizeSQL(strings.ReplaceAll(l, schema, "{s}"))
	}
	return lines
}

// tableRows reads every row of schema.tab, ordered by all its columns in
// order, each value as text (NULL as "NULL"); nil when there is no such
// table.
func tableRows(t *testing.T, schema, tab string) []map[string]string {
	t.Helper()
	ctx := context.Background()
	name := pgx.Identifier{schema, tab}.Sanitize()
	var n int
	if err := Pool(t).QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`, schema, tab).Scan(&n); err != nil {
		t.Fatalf("pgtest: columns of %s: %v", name, err)
	}
	if n == 0 {
		return nil
	}
	order := make([]string, n)
	for i := range order {
		order[i] = fmt.Sprint(i + 1)
	}
	rows, err := Pool(t).Query(ctx, "SELECT * FROM "+name+" ORDER BY "+strings.Join(order, ", "))
	if err != nil {
		t.Fatalf("pgtest: rows of %s: %v", name, err)
	}
	defer rows.Close()
	out := []map[string]string{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatalf("pgtest: rows of %s: %v", name, err)
		}
		row := map[string]string{}
		for i, f := range rows.FieldDescriptions() {
			switch v := vals[i].(type) {
			case nil:
				row[f.Name] = "NULL"
			case []byte:
				row[f.Name] = string(v)
			default:
				row[f.Name] = fmt.Sprint(v)
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("pgtest: rows of %s: %v", name, err)
	}
	return out
}
