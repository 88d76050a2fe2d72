package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// dirWorkload records the directory it was set up in.
type dirWorkload struct{ dir string }

func (w *dirWorkload) Step(context.Context) (int, error) { return 1, nil }
func (w *dirWorkload) Close() error                      { return nil }

type timedDirWorkload struct{ dirWorkload }

func (w *timedDirWorkload) TimedStep(context.Context) (int, time.Duration, error) {
	return 1, time.Millisecond, nil
}

// TestOnTmpfs: the case runs in a fresh directory under TmpfsDir, named
// with "/tmpfs", keeps being a TimedWorkload when it was one, and its
// directory is gone once the workload closes.
func TestOnTmpfs(t *testing.T) {
	for _, timed := range []bool{false, true} {
		c := Case{Name: "x", Unit: "events/s", Setup: func(_ context.Context, dir string) (Workload, error) {
			if err := os.WriteFile(filepath.Join(dir, "queue.db"), []byte("x"), 0o600); err != nil {
				return nil, err
			}
			if timed {
				return &timedDirWorkload{dirWorkload{dir}}, nil
			}
			return &dirWorkload{dir}, nil
		}}
		tc, ok := OnTmpfs(c)
		if !ok {
			t.Skipf("%s is not a directory here", TmpfsDir)
		}
		if tc.Name != "x/tmpfs" || tc.Unit != "events/s" {
			t.Errorf("OnTmpfs = %q, %q", tc.Name, tc.Unit)
		}
		w, err := tc.Setup(context.Background(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var dir string
		switch w := w.(type) {
		case *timedTmpfs:
			dir = w.TimedWorkload.(*timedDirWorkload).dir
		case *tmpfsWorkload:
			dir = w.Workload.(*dirWorkload).dir
		}
		if _, isTimed := w.(TimedWorkload); isTimed != timed {
			t.Errorf("timed %v: the workload is a TimedWorkload: %v", timed, isTimed)
		}
		if filepath.Dir(dir) != TmpfsDir {
			t.Errorf("timed %v: set up in %q, want a directory of %s", timed, dir, TmpfsDir)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("timed %v: %s after Close: %v, want it removed", timed, dir, err)
		}
	}
}
