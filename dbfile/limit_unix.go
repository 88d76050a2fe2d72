//go:build unix

package dbfile

import "syscall"

// fileSizeLimit returns the process's RLIMIT_FSIZE, if it has one
// (RLIM_INFINITY is all ones).
func fileSizeLimit() (int64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &l); err != nil || l.Cur >= 1<<62 {
		return 0, false
	}
	return int64(l.Cur), true
}
