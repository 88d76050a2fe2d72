package bench

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"

	"maragu.dev/goqite"
)

// goqiteSchema is schema_sqlite.sql of maragu.dev/goqite v0.4.0, copied
// verbatim: goqite does not export it.
//
//go:embed goqite_schema.sql
var goqiteSchema string

// Goqite is goqite v0.4.0's send → receive → delete cycle on the stores'
// pragmas ([DSN]): three transactions, one event per Step.
func Goqite() Case {
	return Case{Name: "goqite", Unit: "events/s", Setup: setupGoqite}
}

type goqiteCycle struct {
	db   *sql.DB
	q    *goqite.Queue
	body []byte
	m    *goqite.Message // the message the current Step received
}

func setupGoqite(ctx context.Context, dir string) (Workload, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db, err := OpenDB(filepath.Join(dir, goqiteFile))
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, goqiteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("goqite schema: %w", err)
	}
	q := goqite.New(goqite.NewOpts{DB: db, Name: "bench"})
	return &goqiteCycle{db: db, q: q, body: []byte(`{"delta": 1}`)}, nil
}

// Step sends, receives and deletes one message.
func (g *goqiteCycle) Step(ctx context.Context) (int, error) {
	if err := runPhases(ctx, g.phases()); err != nil {
		return 0, err
	}
	return 1, nil
}

// phases are Step's three commits.
func (g *goqiteCycle) phases() []phase {
	return []phase{
		{"send", goqiteFile, func(ctx context.Context) error {
			if err := g.q.Send(ctx, goqite.Message{Body: g.body}); err != nil {
				return fmt.Errorf("goqite send: %w", err)
			}
			return nil
		}},
		{"receive", goqiteFile, func(ctx context.Context) error {
			m, err := g.q.Receive(ctx)
			if err != nil {
				return fmt.Errorf("goqite receive: %w", err)
			}
			if m == nil {
				return fmt.Errorf("goqite receive: no message right after a send")
			}
			g.m = m
			return nil
		}},
		{"delete", goqiteFile, func(ctx context.Context) error {
			if err := g.q.Delete(ctx, g.m.ID); err != nil {
				return fmt.Errorf("goqite delete: %w", err)
			}
			return nil
		}},
	}
}

// Close closes the database.
func (g *goqiteCycle) Close() error { return g.db.Close() }
