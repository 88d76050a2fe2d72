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

// A program that needs short waits more than throughput hands the turn over
// after every write.
func ExampleOpenKeep() {
	dir, _ := os.MkdirTemp("", "writerlock")
	defer os.RemoveAll(dir)
	l, err := writerlock.OpenKeep(filepath.Join(dir, "queue.db"), 10*time.Second, writerlock.Keep{})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for i := range 2 {
		if err := l.Lock(context.Background()); err != nil {
			panic(err)
		}
		fmt.Println("write", i+1) // the turn is handed over after each
		l.Unlock()
	}
	// Output:
	// write 1
	// write 2
}
