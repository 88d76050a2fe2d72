package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
)

// Ceiling is the storage ceiling: one-row `BEGIN IMMEDIATE; INSERT; COMMIT`
// transactions with the stores' pragmas ([DSN]), one commit per Step.
func Ceiling() Case {
	return Case{Name: "ceiling", Unit: "commits/s", Setup: setupCeiling}
}

type ceiling struct {
	db  *sql.DB
	row []byte
}

func setupCeiling(ctx context.Context, dir string) (Workload, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db, err := OpenDB(filepath.Join(dir, ceilingFile))
	if err != nil {
		return nil, err
	}
	const schema = `CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB NOT NULL) STRICT`
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("ceiling schema: %w", err)
	}
	return &ceiling{db: db, row: []byte(`{"delta": 1}`)}, nil
}

// Step commits one row.
func (c *ceiling) Step(ctx context.Context) (int, error) {
	if err := runPhases(ctx, c.phases()); err != nil {
		return 0, err
	}
	return 1, nil
}

// phases are Step's one commit.
func (c *ceiling) phases() []phase {
	return []phase{{"commit", ceilingFile, func(ctx context.Context) error {
		tx, err := c.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO t (body) VALUES (?)`, c.row); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	}}}
}

// Close closes the database.
func (c *ceiling) Close() error { return c.db.Close() }
