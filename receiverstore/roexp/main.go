package main

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"modernc.org/sqlite"
)

func main() {
	signal.Ignore(syscall.SIGXFSZ)
	os.RemoveAll("/tmp/fs1")
	os.Mkdir("/tmp/fs1", 0o755)
	db, _ := sql.Open("sqlite", "file:/tmp/fs1/a.db?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t(x BLOB)"); err != nil {
		panic(err)
	}
	lim := syscall.Rlimit{Cur: 200 << 10, Max: ^uint64(0)}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		panic(err)
	}
	blob := make([]byte, 3000)
	for i := 0; ; i++ {
		_, err := db.Exec("INSERT INTO t VALUES (?)", blob)
		if err != nil {
			var se *sqlite.Error
			errors.As(err, &se)
			fmt.Println(i, err, se.Code())
			if i > 200 {
				break
			}
			if i%10 == 0 {
			}
			continue
		}
	}
}
