package dbfile

import "fmt"

// FreePagesSQL reads the number of pages on a database's free list: pages
// that deleted rows left and that the file keeps until it reuses them or
// gives them back.
const FreePagesSQL = `PRAGMA freelist_count`

// IncrementalVacuum is the statement that gives the pages a batch of
// deletes freed back to the file system, and up to limit pages more:
// PRAGMA incremental_vacuum(N) with N = (after - before, never below 0) +
// limit, where before and after are the free list's lengths read with
// [FreePagesSQL] before and after the batch's deletes. The more is for a
// free list that an older build or a failed vacuum left: it drains batch by
// batch, while one batch's vacuum stays about as long as its deletes.
// N is at least 1 (SQLite reads 0 as "the whole free list").
//
// It works on a file created with auto_vacuum=INCREMENTAL; on any other
// file it does nothing. fairrelay's queuestore and receiverstore run it in
// Prune (docs/contract.md §7.9).
func IncrementalVacuum(before, after int64, limit int) string {
	return fmt.Sprintf("PRAGMA incremental_vacuum(%d)", max(after-before, 0)+int64(max(limit, 1)))
}
