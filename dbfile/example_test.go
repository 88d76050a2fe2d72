package dbfile_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/fairrelay/fairrelay/dbfile"
)

// A file that is not a database is refused before anything is opened, and
// a database is read without a file created beside it.
func Example() {
	dir, _ := os.MkdirTemp("", "dbfile")
	defer os.RemoveAll(dir)

	notes := filepath.Join(dir, "notes.db")
	os.WriteFile(notes, []byte("shopping list\n"), 0o644)
	_, err := dbfile.Check(notes, true)
	fmt.Println(errors.Is(err, dbfile.ErrNotDatabase), err)

	path := filepath.Join(dir, "app.db")
	db, _ := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	db.Exec("CREATE TABLE t (x); INSERT INTO t VALUES (42)")
	db.Close()

	ro, err := dbfile.OpenReadOnly(path, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	rdb, _ := sql.Open("sqlite", ro.URI)
	var x int
	rdb.QueryRow("SELECT x FROM t").Scan(&x)
	rdb.Close()
	ro.Close()
	entries, _ := os.ReadDir(dir)
	fmt.Println(x, len(entries), "files")
	// Output:
	// true the file does not start with SQLite's header (it starts with "shopping list\n")
	// 42 2 files
}
