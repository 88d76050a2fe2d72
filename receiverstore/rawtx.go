package receiverstore

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"
)

// writeConn is the one connection every write transaction of a Store runs
// on, driven through the driver's own interfaces (sql.Conn.Raw) instead of
// a database/sql Tx. The SQL, the BEGIN IMMEDIATE, the commit and its fsync
// are the same; what goes is database/sql's bookkeeping around them, which
// cost more CPU than SQLite's own work on these short transactions: a Tx
// starts a goroutine that watches a derived, cancelable context, and
// because of that context the driver starts another one to interrupt BEGIN,
// for every transaction; each statement is bound to the Tx again and its
// arguments and results go through reflection-based conversions. On
// /dev/shm a three-statement write transaction took about 125 µs through a
// Tx and 50 µs this way (PERFORMANCE.md, "Write transactions on the
// driver").
//
// Statements are prepared once, on this connection, at Open. The caller's
// context reaches every statement and the commit, so a canceled context
// still interrupts a write and rolls it back.
type writeConn struct {
	mu     sync.Mutex // one write transaction at a time on conn
	conn   *sql.Conn
	stmts  map[string]driver.Stmt
	closed bool
}

// openWriteConn takes a connection out of db's pool for the store's writes
// and prepares queries on it.
func openWriteConn(ctx context.Context, db *sql.DB, queries []string) (*writeConn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("write connection: %w", err)
	}
	w := &writeConn{conn: conn, stmts: make(map[string]driver.Stmt, len(queries))}
	if err := w.prepare(ctx, queries); err != nil {
		return nil, errors.Join(err, w.close())
	}
	return w, nil
}

// prepare prepares queries on the write connection.
func (w *writeConn) prepare(ctx context.Context, queries []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conn.Raw(func(dc any) error {
		p, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot prepare with a context", dc)
		}
		for _, q := range queries {
			st, err := p.PrepareContext(ctx, q)
			if err != nil {
				return fmt.Errorf("prepare %q: %w", q, err)
			}
			w.stmts[q] = st
		}
		return nil
	})
}

// close closes the prepared statements and gives the connection back to
// the pool (which closes it with the pool). Closing again does nothing.
func (w *writeConn) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	if len(w.stmts) > 0 {
		errs = append(errs, w.conn.Raw(func(any) error {
			var errs []error
			for _, st := range w.stmts {
				errs = append(errs, st.Close())
			}
			return errors.Join(errs...)
		}))
		w.stmts = nil
	}
	errs = append(errs, w.conn.Close())
	return errors.Join(errs...)
}

// tx runs fn in one read-write transaction (BEGIN IMMEDIATE: the DSN's
// _txlock) on the write connection and commits it when fn returns nil; any
// error rolls everything back.
func (w *writeConn) tx(ctx context.Context, fn func(*rawTx) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conn.Raw(func(dc any) error {
		b, ok := dc.(driver.ConnBeginTx)
		if !ok {
			return fmt.Errorf("begin: driver connection %T cannot begin with a context", dc)
		}
		dtx, err := b.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if err := fn(&rawTx{dc: dc, stmts: w.stmts}); err != nil {
			if rerr := dtx.Rollback(); rerr != nil {
				return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
			}
			return err
		}
		// The driver rolls back a commit that fails.
		if err := dtx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	})
}

// rawTx is one transaction on the write connection.
type rawTx struct {
	dc    any
	stmts map[string]driver.Stmt
}

// namedArgs converts args as database/sql does for a driver without its
// own converter (driver.Valuer, named integer types such as clock.Tick).
func namedArgs(args []any) ([]driver.NamedValue, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv, nil
}

// exec runs q: its prepared statement, or q itself when it is not prepared.
func (t *rawTx) exec(ctx context.Context, q string, args ...any) (driver.Result, error) {
	nv, err := namedArgs(args)
	if err != nil {
		return nil, err
	}
	if st, ok := t.stmts[q]; ok {
		return st.(driver.StmtExecContext).ExecContext(ctx, nv)
	}
	e, ok := t.dc.(driver.ExecerContext)
	if !ok {
		return nil, fmt.Errorf("driver connection %T cannot exec with a context", t.dc)
	}
	return e.ExecContext(ctx, q, nv)
}

// queryRow runs q and keeps its first row, as sql.DB.QueryRow does.
func (t *rawTx) queryRow(ctx context.Context, q string, args ...any) *rawRow {
	nv, err := namedArgs(args)
	if err != nil {
		return &rawRow{err: err}
	}
	var rows driver.Rows
	if st, ok := t.stmts[q]; ok {
		rows, err = st.(driver.StmtQueryContext).QueryContext(ctx, nv)
	} else if qc, ok := t.dc.(driver.QueryerContext); ok {
		rows, err = qc.QueryContext(ctx, q, nv)
	} else {
		err = fmt.Errorf("driver connection %T cannot query with a context", t.dc)
	}
	if err != nil {
		return &rawRow{err: err}
	}
	vals := make([]driver.Value, len(rows.Columns()))
	err = rows.Next(vals)
	cerr := rows.Close()
	switch {
	case err == io.EOF && cerr == nil:
		return &rawRow{err: sql.ErrNoRows}
	case err != nil && err != io.EOF:
		return &rawRow{err: err}
	case cerr != nil:
		return &rawRow{err: cerr}
	}
	return &rawRow{vals: vals}
}

// rawRow is the first row of a query, or the error that stopped it.
type rawRow struct {
	vals []driver.Value
	err  error
}

// Scan copies the row's columns into dest, as sql.Row.Scan does for the
// destinations the write paths use (*int64, *int, *string, *[]byte and any
// sql.Scanner such as sql.NullInt64); it is sql.ErrNoRows when there was no
// row. Any other conversion is an error (sql.Row.Scan would turn an integer
// into a string, say; no write path asks for that).
func (r *rawRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", len(r.vals), len(dest))
	}
	for i, d := range dest {
		if err := assign(d, r.vals[i]); err != nil {
			return fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
		}
	}
	return nil
}

// assign stores the driver value v in dest.
func assign(dest any, v driver.Value) error {
	switch d := dest.(type) {
	case sql.Scanner:
		return d.Scan(v)
	case *int64:
		if n, ok := v.(int64); ok {
			*d = n
			return nil
		}
	case *int:
		if n, ok := v.(int64); ok && int64(int(n)) == n {
			*d = int(n)
			return nil
		}
	case *string:
		switch s := v.(type) {
		case string:
			*d = s
			return nil
		case []byte:
			*d = string(s)
			return nil
		}
	case *[]byte:
		switch s := v.(type) {
		case nil:
			*d = nil
			return nil
		case []byte:
			*d = bytes.Clone(s)
			return nil
		case string:
			*d = []byte(s)
			return nil
		}
	}
	return fmt.Errorf("converting %T to %T is unsupported", v, dest)
}
