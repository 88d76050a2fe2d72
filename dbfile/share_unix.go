//go:build unix

package dbfile

import (
	"os"
	"syscall"
)

// ShareSidecars gives the files SQLite made beside the database at path, its
// -wal and -shm, the database file's group and permission bits, so that a
// service user and an operator in the database's group can both use them.
// SQLite itself copies the permission bits (and, when run as root, the
// owner), but a file takes the creating process's group, so an operator in
// the group who opens the database first would otherwise leave files its
// service cannot open.
//
// It is best effort and silent: a file that does not exist or that this
// process does not own is left alone, and the group is changed only where
// the system allows it (the process's user is in that group, or is root).
// Putting the database in a folder with the set-group-ID bit (chmod g+s)
// gives every new file the folder's group from the start.
func ShareSidecars(path string) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	for _, name := range []string{path + "-wal", path + "-shm"} {
		MatchFile(name, fi.Mode().Perm(), int(st.Gid))
	}
}

// MatchFile gives the file name the permission bits perm and the group gid
// when this process owns it (or is root) and they differ; best effort, as
// [ShareSidecars].
func MatchFile(name string, perm os.FileMode, gid int) {
	fi, err := os.Stat(name)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	uid := os.Geteuid()
	if uid != 0 && int(st.Uid) != uid {
		return
	}
	if fi.Mode().Perm() != perm {
		_ = os.Chmod(name, perm)
	}
	if int(st.Gid) != gid {
		_ = os.Chown(name, -1, gid)
	}
}

// folderWritable reports, through access(2), whether this process may
// create files in dir (a read-write open of a database in WAL mode creates
// its -wal and -shm there); the cause when it may not.
func folderWritable(dir string) error {
	return syscall.Access(dir, 0x2) // W_OK
}
