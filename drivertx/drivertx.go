package drivertx

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

// ErrClosed reports a transaction asked of a Conn after Close.
var ErrClosed = errors.New("drivertx: connection closed")

// Conn is one connection taken out of a database/sql pool for write
// transactions, driven through the driver's own interfaces (sql.Conn.Raw)
// instead of a database/sql Tx. The SQL, the BEGIN, the commit and its
// fsync are the same; what goes is database/sql's bookkeeping around them, which
// cost more CPU than SQLite's own work on these short transactions: a Tx
// starts a goroutine that watches a derived, cancelable context, and
// because of that context the driver starts another one to interrupt BEGIN,
// for every transaction; each statement is bound to the Tx again and its
// arguments and results go through reflection-based conversions. On
// /dev/shm a three-statement write transaction took about 125 µs through a
// Tx and 50 µs this way
// (docs/decisions/write-transactions-on-the-driver.md in the repository).
//
// Statements are prepared once, on this connection, at Open. The caller's
// context reaches BEGIN, every statement and the commit, so a canceled
// context still interrupts a write and rolls it back. A Conn is safe for
// concurrent use; its transactions run one at a time.
type Conn struct {
	mu     sync.Mutex // one write transaction at a time on conn
	conn   *sql.Conn
	stmts  map[string]driver.Stmt
	closed bool
}

// Open takes a connection out of db's pool for write transactions and
// prepares queries on it. The connection stays out of the pool until Close.
func Open(ctx context.Context, db *sql.DB, queries []string) (*Conn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("write connection: %w", err)
	}
	w := &Conn{conn: conn, stmts: make(map[string]driver.Stmt, len(queries))}
	if err := w.Prepare(ctx, queries); err != nil {
		return nil, errors.Join(err, w.Close())
	}
	return w, nil
}

// Prepare prepares more queries on the connection, for queries whose tables
// do not exist yet when Open runs (a schema that a first transaction
// creates). A query prepared twice keeps its first statement.
func (w *Conn) Prepare(ctx context.Context, queries []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	return w.conn.Raw(func(dc any) error {
		p, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot prepare with a context", dc)
		}
		for _, q := range queries {
			if _, ok := w.stmts[q]; ok {
				continue
			}
			st, err := p.PrepareContext(ctx, q)
			if err != nil {
				return fmt.Errorf("prepare %q: %w", q, err)
			}
			w.stmts[q] = st
		}
		return nil
	})
}

// Close closes the prepared statements and gives the connection back to
// the pool (which closes it with the pool). Closing again does nothing.
func (w *Conn) Close() error {
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

// Tx runs fn in one transaction on the connection and commits it when fn
// returns nil; any error rolls everything back. The transaction begins as
// the driver begins one with default options (with modernc.org/sqlite, the
// DSN's _txlock: BEGIN IMMEDIATE for fairrelay's stores). Transactions on
// one Conn run one at a time. ctx reaches BEGIN, every statement and the
// commit.
func (w *Conn) Tx(ctx context.Context, fn func(*Tx) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	return w.conn.Raw(func(dc any) error {
		b, ok := dc.(driver.ConnBeginTx)
		if !ok {
			return fmt.Errorf("begin: driver connection %T cannot begin with a context", dc)
		}
		dtx, err := b.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if err := fn(&Tx{dc: dc, stmts: w.stmts}); err != nil {
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

// Tx is one transaction on a Conn, valid only inside the function given to
// Conn.Tx.
type Tx struct {
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

// Exec runs q: its prepared statement, or q itself when it was not
// prepared at Open. args convert as database/sql converts them for a driver
// without its own converter.
func (t *Tx) Exec(ctx context.Context, q string, args ...any) (driver.Result, error) {
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

// QueryRow runs q (prepared or not, as Exec) and keeps its first row, as
// sql.DB.QueryRow does.
func (t *Tx) QueryRow(ctx context.Context, q string, args ...any) *Row {
	nv, err := namedArgs(args)
	if err != nil {
		return &Row{err: err}
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
		return &Row{err: err}
	}
	vals := make([]driver.Value, len(rows.Columns()))
	err = rows.Next(vals)
	cerr := rows.Close()
	switch {
	case err == io.EOF && cerr == nil:
		return &Row{err: sql.ErrNoRows}
	case err != nil && err != io.EOF:
		return &Row{err: err}
	case cerr != nil:
		return &Row{err: cerr}
	}
	return &Row{vals: vals}
}

// Row is the first row of a query, or the error that stopped it.
type Row struct {
	vals []driver.Value
	err  error
}

// Scan copies the row's columns into dest, as sql.Row.Scan does for the
// destinations *int64, *int, *string, *[]byte and any sql.Scanner such as
// sql.NullInt64; it is sql.ErrNoRows when there was no row. Any other
// conversion is an error, never a silent zero: stricter than sql.Row.Scan,
// which would also turn an integer into a string or NULL into "".
func (r *Row) Scan(dest ...any) error {
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
