package bench

import (
	"context"
	"path/filepath"
	"testing"
)

func TestIsBusyOnARealLockConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	holder, err := OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()

	other, err := OpenDBNoWait(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.BeginTx(ctx, nil)
	if err == nil {
		t.Fatal("BEGIN IMMEDIATE beside another writer succeeded, want SQLITE_BUSY")
	}
	if !IsBusy(err) {
		t.Fatalf("IsBusy(%v) = false, want true", err)
	}
	if IsBusy(context.Canceled) {
		t.Fatal("IsBusy(context.Canceled) = true, want false")
	}
}

func TestOpenDBSetsThePragmas(t *testing.T) {
	t.Parallel()
	db, err := OpenDB(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var timeout int
	if err := db.QueryRow("PRAGMA busy_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != 10000 {
		t.Errorf("busy_timeout = %d, want 10000", timeout)
	}
}
