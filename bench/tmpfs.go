package bench

import (
	"context"
	"errors"
	"os"
)

// TmpfsDir is where OnTmpfs puts a case's files: /dev/shm, a tmpfs on
// Linux, where a write is a copy into memory and fsync costs nothing.
const TmpfsDir = "/dev/shm"

// OnTmpfs returns c with its files in a fresh directory under TmpfsDir,
// removed when the workload closes, and its name suffixed "/tmpfs": the
// same work without the cost of durable writes, so its rate is what the
// case's CPU alone allows on this machine. ok is false when TmpfsDir is
// not a directory here (the case is then not measured).
func OnTmpfs(c Case) (Case, bool) {
	if fi, err := os.Stat(TmpfsDir); err != nil || !fi.IsDir() {
		return Case{}, false
	}
	return Case{
		Name: c.Name + "/tmpfs",
		Unit: c.Unit,
		Setup: func(ctx context.Context, _ string) (Workload, error) {
			dir, err := os.MkdirTemp(TmpfsDir, "fairrelay-bench-")
			if err != nil {
				return nil, err
			}
			w, err := c.Setup(ctx, dir)
			if err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			if t, ok := w.(TimedWorkload); ok {
				return &timedTmpfs{t, dir}, nil
			}
			return &tmpfsWorkload{w, dir}, nil
		},
	}, true
}

// tmpfsWorkload is a Workload whose files are in dir, removed on Close.
type tmpfsWorkload struct {
	Workload
	dir string
}

// Close closes the workload and removes its directory.
func (w *tmpfsWorkload) Close() error {
	return errors.Join(w.Workload.Close(), os.RemoveAll(w.dir))
}

// timedTmpfs is tmpfsWorkload for a TimedWorkload.
type timedTmpfs struct {
	TimedWorkload
	dir string
}

// Close closes the workload and removes its directory.
func (w *timedTmpfs) Close() error {
	return errors.Join(w.TimedWorkload.Close(), os.RemoveAll(w.dir))
}
