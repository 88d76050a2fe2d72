//go:build !unix

package dbfile

import "os"

// ShareSidecars does nothing where files have no Unix group.
func ShareSidecars(path string) {}

// MatchFile does nothing where files have no Unix group.
func MatchFile(name string, perm os.FileMode, gid int) {}

// folderWritable is left to the open where access(2) does not exist.
func folderWritable(dir string) error { return nil }
