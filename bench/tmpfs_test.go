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

// TestOnTmpfs: the case runs in a fresh directory under TmpfsDir, is named
// TmpfsName of its name, and its directory is gone once the workload
// closes; a case that times its own steps is refused, its directory
// removed all the same.
func TestOnTmpfs(t *testing.T) {
	for _, timed := range []bool{false, true} {
		var dir string
		c := Case{Name: "x", Unit: "events/s", Setup: func(_ context.Context, d string) (Workload, error) {
			dir = d
			if err := os.WriteFile(filepath.Join(d, "queue.db"), []byte("x"), 0o600); err != nil {
				return nil, err
			}
			if timed {
				return &timedDirWorkload{dirWorkload{d}}, nil
			}
			return &dirWorkload{d}, nil
		}}
		tc, ok := OnTmpfs(c)
		if !ok {
			t.Skipf("%s is not a directory here", TmpfsDir)
		}
		if tc.Name != "x/tmpfs" || tc.Name != TmpfsName(c.Name) || tc.Unit != "events/s" {
			t.Errorf("OnTmpfs = %q, %q", tc.Name, tc.Unit)
		}
		w, err := tc.Setup(context.Background(), t.TempDir())
		if filepath.Dir(dir) != TmpfsDir {
			t.Errorf("timed %v: set up in %q, want a directory of %s", timed, dir, TmpfsDir)
		}
		if timed {
			if err == nil || w != nil {
				t.Errorf("a timed case: Setup = %v, %v; want it refused", w, err)
			}
		} else {
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("timed %v: %s after Close: %v, want it removed", timed, dir, err)
		}
	}
}
