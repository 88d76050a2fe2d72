//go:build !unix

package main

import (
	"io"
	"os"
)

// flockFile has no flock(2) to take where it does not exist (Windows): it
// only creates the file, and a reshard there relies on the operator having
// stopped every writer, as docs/scale.md says.
func flockFile(path string, exclusive bool) (io.Closer, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}
