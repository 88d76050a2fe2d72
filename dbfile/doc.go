// Package dbfile looks at an SQLite database file before a store opens it,
// so that a wrong file is refused before anything is written or created
// beside it, and opens a database read-only without creating a file.
//
// [Check] reads the file's 100-byte header and the file system's answer
// about the path: a directory, a missing folder, a file (or, for a
// writer, a folder) without write permission, a file that is not SQLite and
// a truncated copy are told apart with typed errors ([ErrNotDatabase],
// [ErrTruncated], [ErrPath]) that wrap the operating system's cause, so
// errors.Is(err, fs.ErrPermission) works; [Info] gives the schema version
// for the store to judge.
//
// [OpenReadOnly] gives the SQLite URI of a read-only connection that creates
// no -wal, -shm or lock file (see its documentation for how, and for the one
// limit). [ShareSidecars] gives the -wal and -shm files that SQLite made the
// database file's group and permission bits. [IsFull] recognises a write
// that failed for want of space. [FreePagesSQL] and [IncrementalVacuum] are
// how a store's Prune gives the pages its deletes freed back to the file
// system.
//
// fairrelay's queuestore and receiverstore use it, so that neither carries a
// copy and neither imports the other. It imports only modernc.org/sqlite
// (for the error codes of [IsFull]).
package dbfile
