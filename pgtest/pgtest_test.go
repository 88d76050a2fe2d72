package pgtest

import (
	"context"
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
