package drivertx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/fairrelay/fairrelay/drivertx"
)

// A store opens its file as usual, takes one connection for its writes with
// the statements they run, and runs each write as one transaction of
// prepared statements. An error from the function rolls everything back.
func Example() {
	dir, _ := os.MkdirTemp("", "drivertx")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "kv.db")+
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	defer db.Close()
	db.Exec(`CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL) STRICT`)

	const (
		add = `INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = v + excluded.v`
		get = `SELECT v FROM kv WHERE k = ?`
	)
	ctx := context.Background()
	w, err := drivertx.Open(ctx, db, []string{add, get})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	var total int64
	err = w.Tx(ctx, func(tx *drivertx.Tx) error {
		if _, err := tx.Exec(ctx, add, "apples", 3); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, add, "apples", 4); err != nil {
			return err
		}
		return tx.QueryRow(ctx, get, "apples").Scan(&total)
	})
	fmt.Println(total, err)

	errTooMany := errors.New("too many apples")
	err = w.Tx(ctx, func(tx *drivertx.Tx) error {
		if _, err := tx.Exec(ctx, add, "apples", 100); err != nil {
			return err
		}
		return errTooMany // rolls the addition back
	})
	var after int64
	db.QueryRow(get, "apples").Scan(&after)
	fmt.Println(errors.Is(err, errTooMany), after)
	// Output:
	// 7 <nil>
	// true 7
}
