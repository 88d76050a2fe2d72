package pgqueuestore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A pipe collects statements whose arguments are known in Go and sends
// them in one pgx.Batch: one network round trip for all of them, run by
// the server one after the other in the order queued, inside the caller's
// transaction. The first statement that fails stops the pipe; its error
// is returned wrapped with what the statement was for, and the
// transaction is then aborted (the caller returns the error and rolls it
// back): never retried. See docs/decisions/postgres-batch-round-trips.md.
type pipe struct {
	steps []step
}

// step is one queued statement: its SQL, arguments, what it is for (the
// error's prefix), and what reads its result.
type step struct {
	sql  string
	args []any
	what string
	tag  func(pgconn.CommandTag) error // Exec result check, or nil
	rows func(pgx.Rows) error          // row scanner of a query, or nil
}

// exec queues a statement whose result only matters when it fails.
func (p *pipe) exec(what, sql string, args ...any) {
	p.steps = append(p.steps, step{sql: sql, args: args, what: what})
}

// execCheck queues a statement and a check of its command tag.
func (p *pipe) execCheck(what string, check func(pgconn.CommandTag) error, sql string, args ...any) {
	p.steps = append(p.steps, step{sql: sql, args: args, what: what, tag: check})
}

// query queues a query; scan is called once for each row.
func (p *pipe) query(what string, scan func(pgx.Rows) error, sql string, args ...any) {
	p.steps = append(p.steps, step{sql: sql, args: args, what: what, rows: scan})
}

// len is the number of statements queued.
func (p *pipe) len() int { return len(p.steps) }

// send runs the queued statements in one batch, in order, and empties the
// pipe. A pipe of one statement is sent as that statement.
func (p *pipe) send(ctx context.Context, tx pgx.Tx) error {
	steps := p.steps
	p.steps = nil
	if len(steps) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, st := range steps {
		b.Queue(st.sql, st.args...)
	}
	br := tx.SendBatch(ctx, b)
	for _, st := range steps {
		if err := st.read(br); err != nil {
			_ = br.Close() // the statement's error is the one to return
			return err
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("send batch: %w", err)
	}
	return nil
}

// commit queues COMMIT after the statements on p and sends them all in
// one batch: the transaction's last round trip. A statement that fails on
// the server stops the batch before COMMIT (the caller rolls back); a
// COMMIT that the server answers with ROLLBACK is pgx.ErrTxCommitRollback.
// The server runs COMMIT before Go reads the first result of the batch,
// so a step whose result Go checks or reads (execCheck, query) cannot
// stop it: such steps are sent first, in a round trip of their own. A
// check that must go with COMMIT is made by the server (checkedRows).
func (p *pipe) commit(ctx context.Context, tx pgx.Tx) error {
	for _, st := range p.steps {
		if st.tag != nil || st.rows != nil {
			if err := p.send(ctx, tx); err != nil {
				return err
			}
			break
		}
	}
	p.execCheck("commit", func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	}, "COMMIT")
	return p.send(ctx, tx)
}

// checkedRows wraps sql, a set UPDATE that changes one row for each
// element of its array $1, so that the server itself fails it, and with
// it the transaction, when it changes another number of rows: the error
// is the cast of "N rows changed, want M" to an integer. Go's check of
// the command tag would come too late in a batch that ends with COMMIT.
func checkedRows(sql string) string {
	return "WITH w AS (" + sql + "\nRETURNING 1)\nSELECT CASE WHEN count(*) = cardinality($1::text[]) THEN 0\n" +
		"    ELSE (count(*) || ' rows changed, want ' || cardinality($1::text[]))::integer END FROM w"
}

// read reads the step's result from br.
func (st step) read(br pgx.BatchResults) error {
	if st.rows == nil {
		ct, err := br.Exec()
		if err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
		if st.tag != nil {
			if err := st.tag(ct); err != nil {
				return fmt.Errorf("%s: %w", st.what, err)
			}
		}
		return nil
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("%s: %w", st.what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := st.rows(rows); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", st.what, err)
	}
	return nil
}
