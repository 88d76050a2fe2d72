package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// TmpfsDir is where OnTmpfs puts a case's files: /dev/shm, a tmpfs on
// Linux, where a write is a copy into memory and fsync costs nothing.
const TmpfsDir = "/dev/shm"

// TmpfsName is the name OnTmpfs gives the case called name.
func TmpfsName(name string) string { return name + "/tmpfs" }

// OnTmpfs returns c, named TmpfsName(c.Name), with its files in a fresh
// directory under TmpfsDir, removed when the workload closes: the same
// work without the cost of durable writes, so its rate is what the case's
// CPU alone allows on this machine. ok is false when TmpfsDir is not a
// directory here (the case is then not measured). c's workload must not
// be a TimedWorkload (Setup fails): the wrapper would hide its timing.
func OnTmpfs(c Case) (Case, bool) {
	if fi, err := os.Stat(TmpfsDir); err != nil || !fi.IsDir() {
		return Case{}, false
	}
	return Case{
		Name: TmpfsName(c.Name),
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
			tw := &tmpfsWorkload{w, dir}
			if _, timed := w.(TimedWorkload); timed {
				return nil, errors.Join(fmt.Errorf("bench: %s times its own steps; OnTmpfs takes untimed cases", c.Name), tw.Close())
			}
			return tw, nil
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
