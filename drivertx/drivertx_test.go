package drivertx

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

const (
	qInsert = `INSERT INTO kv (k, v) VALUES (?, ?)`
	qGet    = `SELECT v FROM kv WHERE k = ?`
)

// openTest opens a WAL file with the stores' pragmas and a Conn with qInsert
// and qGet prepared.
func openTest(t *testing.T) (*sql.DB, *Conn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	c, err := Open(context.Background(), db, []string{qInsert, qGet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return db, c
}

func count(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM kv`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTxCommitsWhatFnWrote(t *testing.T) {
	t.Parallel()
	db, c := openTest(t)
	ctx := context.Background()
	err := c.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(ctx, qInsert, "a", 1); err != nil { // prepared
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO kv (k, v) VALUES (?, ?)`+" ", "b", int32(2)); err != nil { // not prepared
			return err
		}
		var v int64
		if err := tx.QueryRow(ctx, qGet, "b").Scan(&v); err != nil || v != 2 {
			t.Errorf("QueryRow inside the transaction: v = %d, err = %v; want 2, nil", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Tx: %v", err)
	}
	if n := count(t, db); n != 2 {
		t.Fatalf("rows after commit = %d, want 2", n)
	}
}

func TestTxRollsBackOnError(t *testing.T) {
	t.Parallel()
	db, c := openTest(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := c.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(ctx, qInsert, "a", 1); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Tx error = %v, want boom", err)
	}
	// An SQL error rolls back too, and is returned as the driver gave it.
	err = c.Tx(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(ctx, qInsert, "b", 1); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, qInsert, "b", 2) // duplicate key
		return err
	})
	if err == nil {
		t.Fatal("Tx with a duplicate key: error = nil, want the constraint error")
	}
	if n := count(t, db); n != 0 {
		t.Fatalf("rows after two rolled-back transactions = %d, want 0", n)
	}
}

func TestTxWithCanceledContextWritesNothing(t *testing.T) {
	t.Parallel()
	db, c := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.Tx(ctx, func(tx *Tx) error {
		_, err := tx.Exec(ctx, qInsert, "a", 1)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Tx with a canceled context: error = %v, want one wrapping context.Canceled", err)
	}
	if n := count(t, db); n != 0 {
		t.Fatalf("rows = %d, want 0", n)
	}
	// The connection is still usable.
	if err := c.Tx(context.Background(), func(tx *Tx) error {
		_, err := tx.Exec(context.Background(), qInsert, "a", 1)
		return err
	}); err != nil {
		t.Fatalf("Tx after a canceled one: %v", err)
	}
}

func TestQueryRowNoRowsAndBadArgs(t *testing.T) {
	t.Parallel()
	_, c := openTest(t)
	ctx := context.Background()
	err := c.Tx(ctx, func(tx *Tx) error {
		var v int64
		if err := tx.QueryRow(ctx, qGet, "missing").Scan(&v); !errors.Is(err, sql.ErrNoRows) {
			t.Errorf("QueryRow of a missing key: error = %v, want sql.ErrNoRows", err)
		}
		if err := tx.QueryRow(ctx, qGet, struct{}{}).Scan(&v); err == nil {
			t.Error("QueryRow with an argument no driver value fits: error = nil, want one")
		}
		if _, err := tx.Exec(ctx, qInsert, "a", make(chan int)); err == nil {
			t.Error("Exec with a channel argument: error = nil, want one")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCloseTwiceAndTxAfterClose(t *testing.T) {
	t.Parallel()
	_, c := openTest(t)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	err := c.Tx(context.Background(), func(*Tx) error { t.Error("fn ran after Close"); return nil })
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Tx after Close: error = %v, want ErrClosed", err)
	}
}

func TestOpenRefusesBadQuery(t *testing.T) {
	t.Parallel()
	db, _ := openTest(t)
	if c, err := Open(context.Background(), db, []string{`SELECT nope FROM nowhere`}); err == nil {
		c.Close()
		t.Fatal("Open with a query that cannot prepare: error = nil, want one")
	}
}

// Row.Scan stands in for sql.Row.Scan: database/sql's conversions for the
// destinations it supports, sql.ErrNoRows for no row, and an error (never a
// silent zero) for a NULL or any other conversion.
func TestRowScanConvertsAsDatabaseSQL(t *testing.T) {
	t.Parallel()
	var (
		i64  int64
		n    int
		str  string
		blob []byte
		ni   sql.NullInt64
		ns   sql.NullString
	)
	r := &Row{vals: []driver.Value{int64(7), int64(3), "flow", []byte("body"), nil, "x"}}
	if err := r.Scan(&i64, &n, &str, &blob, &ni, &ns); err != nil {
		t.Fatalf("Scan() error = %v", err)
	}
	if i64 != 7 || n != 3 || str != "flow" || string(blob) != "body" || ni.Valid || !ns.Valid || ns.String != "x" {
		t.Fatalf("Scan() got %d, %d, %q, %q, %+v, %+v; want 7, 3, \"flow\", \"body\", invalid, \"x\"", i64, n, str, blob, ni, ns)
	}

	src := []byte("shared")
	if err := (&Row{vals: []driver.Value{src}}).Scan(&blob); err != nil {
		t.Fatalf("Scan([]byte) error = %v", err)
	}
	src[0] = 'X'
	if string(blob) != "shared" {
		t.Fatalf("Scan([]byte) = %q after the source changed, want a copy \"shared\"", blob)
	}

	if err := (&Row{err: sql.ErrNoRows}).Scan(&i64); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("Scan() of no row: error = %v, want sql.ErrNoRows", err)
	}
	for _, tc := range []struct {
		name string
		v    driver.Value
		dest any
	}{
		{"NULL into int64", nil, &i64},
		{"NULL into string", nil, &str},
		{"text into int64", "7", &i64},
		{"integer into string", int64(7), &str},
		{"float into int", 1.5, &n},
	} {
		if err := (&Row{vals: []driver.Value{tc.v}}).Scan(tc.dest); err == nil {
			t.Errorf("Scan(%s) error = nil, want a conversion error", tc.name)
		}
	}
	if err := (&Row{vals: []driver.Value{int64(1), int64(2)}}).Scan(&i64); err == nil {
		t.Errorf("Scan() of 2 columns into 1 destination: error = nil, want one")
	}
}

// Prepare adds statements after Open, for tables a first transaction
// creates; preparing a query again keeps the statement it has.
func TestPrepareAfterOpen(t *testing.T) {
	t.Parallel()
	_, c := openTest(t)
	ctx := context.Background()
	const qLater = `INSERT INTO later (x) VALUES (?)`
	if err := c.Prepare(ctx, []string{qLater}); err == nil {
		t.Fatal("Prepare of a query on a missing table: error = nil, want one")
	}
	if err := c.Tx(ctx, func(tx *Tx) error {
		_, err := tx.Exec(ctx, `CREATE TABLE later (x INTEGER) STRICT`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	first := c.stmts[qInsert]
	if err := c.Prepare(ctx, []string{qLater, qInsert}); err != nil {
		t.Fatalf("Prepare after the table exists: %v", err)
	}
	if _, ok := c.stmts[qLater]; !ok {
		t.Fatal("Prepare did not keep the new statement")
	}
	if c.stmts[qInsert] != first {
		t.Fatal("Prepare replaced a statement it already had")
	}
	if err := c.Tx(ctx, func(tx *Tx) error {
		_, err := tx.Exec(ctx, qLater, 1)
		return err
	}); err != nil {
		t.Fatalf("Exec of the statement prepared later: %v", err)
	}
	c.Close()
	if err := c.Prepare(ctx, []string{qGet}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Prepare after Close: error = %v, want ErrClosed", err)
	}
}
