package writerlock_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fairrelay/fairrelay/writerlock"
)

// Take a turn around each write transaction of the database at path.
func Example() {
	dir, _ := os.MkdirTemp("", "writerlock")
	defer os.RemoveAll(dir)
	l, err := writerlock.Open(filepath.Join(dir, "queue.db"), 10*time.Second)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	if err := l.Lock(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("BEGIN IMMEDIATE … COMMIT runs here, in this writer's turn")
	l.Unlock()
	// Output: BEGIN IMMEDIATE … COMMIT runs here, in this writer's turn
}
