package queuestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/writerlock"
)

// WithWriterKeep decides how long a Store keeps the file's write turn after
// a write: a Store that keeps it for an hour holds off another Store's write
// until it closes; a Store with writerlock.Keep{} hands it over at once.
func TestWithWriterKeep_TurnKeptOrHandedOver(t *testing.T) {
	t.Parallel()
	hour := writerlock.Keep{MaxRun: 8, MaxHold: time.Hour, Linger: time.Hour}
	// other opens first: its Open writes (the schema) and hands the turn
	// over at once; keeper's Open then keeps the turn after its own.
	other, path := openTest(t, WithWriterKeep(writerlock.Keep{}))
	keeper, err := Open(path, WithWriterKeep(hour))
	if err != nil {
		t.Fatal(err)
	}
	defer keeper.Close()

	enqueue(t, keeper, "a1", "a", "x", 1)
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := other.Enqueue(short, Event{ID: "b1", Flow: "b", Body: []byte("y")}, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Enqueue while another Store keeps the turn: error = %v, want context.DeadlineExceeded", err)
	}
	if err := keeper.Close(); err != nil { // hands the kept turn over
		t.Fatal(err)
	}
	enqueue(t, other, "b1", "b", "y", 2)
	// other hands over after every write: a third Store writes at once.
	third, err := Open(path, WithWriterKeep(hour))
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if _, err := third.Enqueue(ctx, Event{ID: "c1", Flow: "c", Body: []byte("z")}, 3); err != nil {
		t.Fatalf("Enqueue after a Store with Keep{} wrote: %v", err)
	}
}

// A Keep that writerlock refuses makes Open fail, creating nothing.
func TestWithWriterKeep_BadKeepRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	if s, err := Open(path, WithWriterKeep(writerlock.Keep{MaxRun: -1})); err == nil {
		s.Close()
		t.Fatal("Open with a negative MaxRun: error = nil, want one")
	}
	for _, name := range []string{path, path + "-writer", path + "-writer-gate"} {
		if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after a refused Open: %v, want it not to exist", filepath.Base(name), err)
		}
	}
}
