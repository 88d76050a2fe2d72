package receiverstore

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
// a write: a Store that keeps it for an hour holds off another Store's
// Receive until it closes; a Store with writerlock.Keep{} hands it over at
// once.
func TestWithWriterKeep_TurnKeptOrHandedOver(t *testing.T) {
	t.Parallel()
	hour := writerlock.Keep{MaxRun: 8, MaxHold: time.Hour, Linger: time.Hour}
	other, path := open(t, WithWriterKeep(writerlock.Keep{}))
	keeper, err := Open(path, WithWriterKeep(hour))
	if err != nil {
		t.Fatal(err)
	}
	defer keeper.Close()
	ctx := context.Background()

	if out, err := keeper.Receive(ctx, msg("a1", "a", 1, 1)); err != nil || out != Accepted {
		t.Fatalf("keeper.Receive = %v, %v; want accepted", out, err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := other.Receive(short, msg("b1", "b", 1, 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive while another Store keeps the turn: error = %v, want context.DeadlineExceeded", err)
	}
	if err := keeper.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := other.Receive(ctx, msg("b1", "b", 1, 1)); err != nil || out != Accepted {
		t.Fatalf("other.Receive after keeper closed = %v, %v; want accepted (nothing was written by the refused one)", out, err)
	}
	third, err := Open(path, WithWriterKeep(hour))
	if err != nil {
		t.Fatalf("Open after a Store with Keep{} wrote: %v", err)
	}
	defer third.Close()
	if out, err := third.Receive(ctx, msg("c1", "c", 1, 1)); err != nil || out != Accepted {
		t.Fatalf("third.Receive = %v, %v; want accepted", out, err)
	}
}

// A Keep that writerlock refuses makes Open fail, creating nothing.
func TestWithWriterKeep_BadKeepRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "receiver.db")
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
