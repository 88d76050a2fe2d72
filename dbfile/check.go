package dbfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

var (
	// ErrNotDatabase reports a file that is not an SQLite database: its
	// first bytes are not SQLite's header, or the header is damaged.
	ErrNotDatabase = errors.New("dbfile: not an SQLite database")
	// ErrTruncated reports an SQLite file shorter than its own header says:
	// a copy cut short, or a file damaged at its end.
	ErrTruncated = errors.New("dbfile: truncated SQLite database")
	// ErrPath reports a path that cannot be opened the way asked: a
	// directory, a missing folder or file, a file or folder without the
	// permission needed. It comes with the operating system's cause, so
	// errors.Is(err, fs.ErrNotExist) or errors.Is(err, fs.ErrPermission)
	// tell which.
	ErrPath = errors.New("dbfile: cannot open the path")
	// ErrNeedsWriter reports a database that cannot be read without
	// writing beside it: it has a write-ahead log (-wal) but no -shm file,
	// which a writer creates when it opens the file. Open it read-write
	// once (as the user that owns it), or wait for its writer to start.
	ErrNeedsWriter = errors.New("dbfile: the database needs a read-write open first")
)

// Error is what [Check] and [OpenReadOnly] return: Kind is one of the
// package's sentinels, Detail says what was found in plain words, and Err,
// when set, is the operating system's cause. errors.Is matches both Kind
// and Err.
type Error struct {
	Kind   error
	Detail string
	Err    error
}

// Error gives Detail, then the operating system's cause when there is one.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Detail + ": " + e.Err.Error()
	}
	return e.Detail
}

// Unwrap returns Kind and, when set, Err.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Info is what [Check] read from the file.
type Info struct {
	// Size is the file's size in bytes; 0 for a file that does not exist
	// yet or is empty (SQLite treats both as a new database).
	Size int64
	// PageSize is the page size in the header; 0 when Size is 0.
	PageSize int
	// UserVersion is PRAGMA user_version as the header in the file has it.
	// A write-ahead log can hold a newer one: only a query tells for sure.
	UserVersion int
	// WAL reports that the header puts the file in WAL mode.
	WAL bool
}

// headerLen is the length of SQLite's database header.
const headerLen = 100

// magic starts every SQLite 3 database file.
const magic = "SQLite format 3\x00"

// Check looks at path before a store opens it, and reads its header. write
// says the store will write, and may create, the file: then a file that does
// not exist yet is fine (Info is zero) and the file must be writable, and
// its folder too when the -wal or -shm that SQLite creates beside it is
// missing; otherwise it must exist and be readable. It creates and changes
// nothing.
//
// It returns an [*Error] whose Kind is [ErrPath] for a missing folder, a
// missing file (read-only), a directory, something that is not a regular
// file, or a permission refused; [ErrNotDatabase] for a file that does not
// start with SQLite's header or whose page size is not one SQLite writes;
// [ErrTruncated] for a file that is shorter than a header, not a whole
// number of pages, or shorter than the page count its header gives, when no
// -wal file lies beside it (with one, a checkpoint may be writing the file
// while Check reads it, and only SQLite can tell).
//
// Check reads the header only: damage inside the file is SQLite's to find.
func Check(path string, write bool) (Info, error) {
	dir := filepath.Dir(path)
	switch st, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return Info{}, &Error{ErrPath, fmt.Sprintf("folder %s", dir), syscall.ENOENT}
	case err != nil:
		return Info{}, &Error{ErrPath, fmt.Sprintf("folder %s", dir), cause(err)}
	case !st.IsDir():
		return Info{}, &Error{ErrPath, dir, syscall.ENOTDIR}
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if write {
			return Info{}, nil
		}
		return Info{}, &Error{ErrPath, "cannot open the file", syscall.ENOENT}
	case err != nil:
		return Info{}, &Error{ErrPath, "cannot look at the file", cause(err)}
	case fi.IsDir():
		return Info{}, &Error{ErrPath, "not a database file", syscall.EISDIR}
	case !fi.Mode().IsRegular():
		return Info{}, &Error{ErrPath, fmt.Sprintf("it is not a regular file (%s)", fi.Mode().Type()), nil}
	}
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		err = permission(cause(err))
		if write && errors.Is(err, fs.ErrPermission) {
			return Info{}, &Error{ErrPath, "no permission to write the file (a read-only open may still read it)", err}
		}
		return Info{}, &Error{ErrPath, "cannot open the file", err}
	}
	defer f.Close()
	if write {
		// SQLite creates the -wal and -shm beside the file when they are
		// missing: a folder it cannot write fails the open later, untyped.
		_, werr := os.Stat(path + "-wal")
		_, serr := os.Stat(path + "-shm")
		if werr != nil || serr != nil {
			if err := folderWritable(dir); err != nil {
				err = permission(err)
				return Info{}, &Error{ErrPath, fmt.Sprintf("cannot create files in the folder %s (a read-only open may still read it)", dir), err}
			}
		}
	}
	var h [headerLen]byte
	n, err := io.ReadFull(f, h[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Info{}, &Error{ErrPath, "cannot read the file", cause(err)}
	}
	// A -wal beside the file means a writer has it open (or crashed with it
	// open): a checkpoint then writes pages into the file while we look, and
	// the file can be briefly shorter than the header it already holds. Its
	// size says nothing then; SQLite's own recovery and checks do.
	wal, err := os.Stat(path + "-wal")
	live := err == nil && wal.Size() > 0
	return parseHeader(h[:n], fi.Size(), live)
}

// parseHeader checks the first bytes of a file of the given size; live says
// a -wal file lies beside it, so the size checks are skipped.
func parseHeader(h []byte, size int64, live bool) (Info, error) {
	if size == 0 {
		return Info{}, nil
	}
	k := min(len(h), len(magic))
	if string(h[:k]) != magic[:k] {
		return Info{}, &Error{ErrNotDatabase, fmt.Sprintf("the file does not start with SQLite's header (it starts with %q)", h[:k]), nil}
	}
	if len(h) < headerLen {
		return Info{}, &Error{ErrTruncated, fmt.Sprintf("the file has %d bytes, fewer than SQLite's %d-byte header", size, headerLen), nil}
	}
	ps := int(binary.BigEndian.Uint16(h[16:18]))
	if ps == 1 {
		ps = 65536
	}
	if ps < 512 || ps&(ps-1) != 0 {
		return Info{}, &Error{ErrNotDatabase, fmt.Sprintf("the header's page size %d is not one SQLite writes", ps), nil}
	}
	if !live && size%int64(ps) != 0 {
		return Info{}, &Error{ErrTruncated, fmt.Sprintf("the file has %d bytes, not a whole number of %d-byte pages", size, ps), nil}
	}
	pages := int64(binary.BigEndian.Uint32(h[28:32]))
	counter, validFor := binary.BigEndian.Uint32(h[24:28]), binary.BigEndian.Uint32(h[92:96])
	if !live && pages > 0 && counter == validFor && size < pages*int64(ps) {
		return Info{}, &Error{ErrTruncated, fmt.Sprintf("the file has %d bytes, its header says %d pages of %d bytes", size, pages, ps), nil}
	}
	return Info{
		Size:        size,
		PageSize:    ps,
		UserVersion: int(int32(binary.BigEndian.Uint32(h[60:64]))),
		WAL:         h[18] == 2 && h[19] == 2,
	}, nil
}

// cause strips the *fs.PathError around an operating-system error: the
// store's message names the path once, as the caller gave it.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// permission makes a read-only file system a refused permission too, so
// errors.Is(err, fs.ErrPermission) holds for it.
func permission(err error) error {
	if errors.Is(err, syscall.EROFS) {
		return errors.Join(err, fs.ErrPermission)
	}
	return err
}
