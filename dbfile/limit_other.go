//go:build !unix

package dbfile

// fileSizeLimit reports no limit where RLIMIT_FSIZE does not exist.
func fileSizeLimit() (int64, bool) { return 0, false }
