package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// PGDefaultURL is the server the PostgreSQL rows use when FAIRRELAY_POSTGRES
// is unset: the project's local default, the one the pgtest module's tests
// try (docs/postgres.md "Tests").
const PGDefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// EnvPGURL names the variable that says where the PostgreSQL server is.
const EnvPGURL = "FAIRRELAY_POSTGRES"

// PGURL returns FAIRRELAY_POSTGRES, or PGDefaultURL when it is unset.
func PGURL() string {
	if u := os.Getenv(EnvPGURL); u != "" {
		return u
	}
	return PGDefaultURL
}

// PGCheck connects to the server at url and pings it, within 5 seconds: nil
// means the PostgreSQL rows can run.
func PGCheck(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

// NewPGSchema returns a schema name no other run uses: bench_<16 hex digits>.
// It is not created; the stores and River's migrations create it.
func NewPGSchema() string {
	var b [8]byte
	rand.Read(b[:])
	return "bench_" + hex.EncodeToString(b[:])
}

// DropPGSchema drops schema and everything in it, if it exists.
func DropPGSchema(ctx context.Context, url, schema string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

// analyzePG runs ANALYZE on the queue's tables, as autovacuum would soon after
// a load: the planner chooses by statistics (docs/postgres.md, "Plans").
func analyzePG(ctx context.Context, url, schema string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for _, t := range []string{"meta", "flows", "events"} {
		if _, err := c.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, t}.Sanitize()); err != nil {
			return fmt.Errorf("analyze %s.%s: %w", schema, t, err)
		}
	}
	return nil
}

// pgQueue is a pgqueuestore in a schema of its own, dropped on Close; the
// cases use it through the contract (queue.Store).
type pgQueue struct {
	queue.Store
	url, schema string
}

func openPGQueue(ctx context.Context, url string) (*pgQueue, error) {
	schema := NewPGSchema()
	q, err := pgqueuestore.Open(ctx, url, pgqueuestore.WithSchema(schema))
	if err != nil {
		DropPGSchema(ctx, url, schema)
		return nil, err
	}
	return &pgQueue{Store: q, url: url, schema: schema}, nil
}

// Close closes the store and drops its schema.
func (p *pgQueue) Close() error {
	p.Store.Close()
	return DropPGSchema(context.Background(), p.url, p.schema)
}

// PGBatchedCycle is the batched queue cycle on PostgreSQL: EnqueueBatch →
// ClaimBatch → SettleBatch, three transactions (three turns, three commits)
// per batch of size events, one event in each of size flows, size events per
// Step. The queue lives in a schema of its own, dropped on Close.
func PGBatchedCycle(url string, size int) Case {
	return Case{
		Name: fmt.Sprintf("pg/batch-%d", size),
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			p, err := openPGQueue(ctx, url)
			if err != nil {
				return nil, err
			}
			return &pgBatched{batchedCycle: newBatchedCycle(p, size), pgQueue: p}, nil
		},
	}
}

// pgBatched is the cycle on a pgqueuestore (its pool closed with it).
type pgBatched struct {
	batchedCycle
	*pgQueue
}

// PGClaimSettle is [ClaimSettle] on PostgreSQL: one Claim and one successful
// Settle per Step, on a backlog of flows flows, perFlow events each, loaded
// untimed with [LoadBacklog] and analyzed: the SQLite case's Step on the
// PostgreSQL queue.
func PGClaimSettle(url string, flows, perFlow int) Case {
	return pgClaimSettle(url, fmt.Sprintf("pg/claim+settle/%d", flows), func(ctx context.Context, p *pgQueue) error {
		return LoadBacklog(ctx, p, "e", flows, perFlow)
	})
}

// pgClaimSettle is a claim+settle case named name on a new PostgreSQL
// queue (a schema of its own, dropped on Close) that load fills; the
// tables are analyzed after the load.
func pgClaimSettle(url, name string, load func(ctx context.Context, p *pgQueue) error) Case {
	return Case{
		Name: name,
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			p, err := openPGQueue(ctx, url)
			if err != nil {
				return nil, err
			}
			if err := load(ctx, p); err != nil {
				p.Close()
				return nil, err
			}
			if err := analyzePG(ctx, url, p.schema); err != nil {
				p.Close()
				return nil, err
			}
			return &claimSettle{q: p}, nil
		},
	}
}

// PGVersion returns the server's version (SHOW server_version).
func PGVersion(ctx context.Context, url string) (string, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", fmt.Errorf("server_version: %w", err)
	}
	return v, nil
}

// PGCeiling is the PostgreSQL storage ceiling: one-row `INSERT` transactions
// (autocommit: one durable commit each) into a bare table in a schema of its
// own, one commit per Step.
func PGCeiling(url string) Case {
	return Case{
		Name: "pg/ceiling",
		Unit: "commits/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			schema := NewPGSchema()
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				return nil, err
			}
			t := pgx.Identifier{schema, "t"}.Sanitize()
			if _, err := c.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()+"; CREATE TABLE "+t+" (id bigserial PRIMARY KEY, body bytea NOT NULL)"); err != nil {
				c.Close(ctx)
				DropPGSchema(ctx, url, schema)
				return nil, fmt.Errorf("ceiling schema: %w", err)
			}
			return &pgCeiling{c: c, url: url, schema: schema, insert: "INSERT INTO " + t + " (body) VALUES ($1)"}, nil
		},
	}
}

type pgCeiling struct {
	c                   *pgx.Conn
	url, schema, insert string
}

// Step commits one row.
func (p *pgCeiling) Step(ctx context.Context) (int, error) {
	if _, err := p.c.Exec(ctx, p.insert, body); err != nil {
		return 0, fmt.Errorf("ceiling insert: %w", err)
	}
	return 1, nil
}

// Close closes the connection and drops the schema.
func (p *pgCeiling) Close() error {
	p.c.Close(context.Background())
	return DropPGSchema(context.Background(), p.url, p.schema)
}
