//go:build !unix

package dbfile

import "os"

// ShareSidecars does nothing where files have no Unix group.
func ShareSidecars(path string) {}

// MatchFile does nothing where files have no Unix group.
func MatchFile(name string, perm os.FileMode, gid int) {}
