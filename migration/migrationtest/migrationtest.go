// Package migrationtest is the migration tests every store of this project
// runs, the same clauses on SQLite and on PostgreSQL (the migration
// module, docs/decisions/migrations.md). A store's test gives a Backend:
// how to make a location, open it with this build, read its catalog and
// rows without the store's package, and stores as older builds left them;
// Run then checks that
//
//   - a new store runs every migration and reaches the newest version, and
//     opening it again changes nothing;
//   - each older store reaches the newest version with every row it had
//     (every column it had keeps its value) and the catalog of a new store;
//   - a store newer than the build is refused with the store's error and
//     left as it was;
//   - a migration that fails after any file leaves the store as it was,
//     and a later open migrates it.
//
// It is a test helper: only _test.go files import it.
package migrationtest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// Backend is one store under the migration tests.
type Backend struct {
	// Version is the store's newest schema version (its number of
	// migration files).
	Version int
	// NewLoc returns a new location for a store (a file path, a schema
	// name), removed when t ends. Nothing exists there yet.
	NewLoc func(t *testing.T) string
	// Open opens the store at loc with this build, as the store's Open
	// does, closes it again and returns Open's error.
	Open func(t *testing.T, loc string) error
	// Olds are stores as older builds left them, at least one per older
	// version when the store has any.
	Olds []Old
	// ReadVersion returns the version recorded at loc (0 when there is
	// none), read without the store's package.
	ReadVersion func(t *testing.T, loc string) int
	// WriteVersion records version v at loc, as a newer build would.
	WriteVersion func(t *testing.T, loc string, v int)
	// Catalog returns the schema at loc, one line per table, column,
	// constraint, index or trigger, normalized (no names of the location,
	// no layout), in any order.
	Catalog func(t *testing.T, loc string) []string
	// Rows returns every row of every table at loc (not the version's
	// bookkeeping), by table, in primary key order, each row as its
	// columns' values in text.
	Rows func(t *testing.T, loc string) map[string][]map[string]string
	// FailAfter makes every later Open fail inside its migration, after
	// migration v ran and recorded its version, until the returned
	// function is called.
	FailAfter func(v int) (undo func())
	// ErrNewer is the error Open returns for a store newer than this
	// build (errors.Is).
	ErrNewer error
}

// Old is a store as an older build left it.
type Old struct {
	// Name says which build made it, for the subtests' names.
	Name string
	// Version is the schema version it records.
	Version int
	// Make builds it at a new location, removed when t ends, and returns
	// the location. It holds rows in every table of its version.
	Make func(t *testing.T) string
}

// Run runs the migration clauses on b. Call it from a test that is not
// parallel: FailAfter changes the store package's state, so that clause
// runs before every other test of the package resumes; the other clauses
// run in parallel.
func Run(t *testing.T, b Backend) {
	t.Run("FailureLeavesTheStoreAsItWas", func(t *testing.T) { failure(t, b) })
	t.Run("NewStoreRunsEveryMigration", func(t *testing.T) {
		t.Parallel()
		loc := b.NewLoc(t)
		if got := b.ReadVersion(t, loc); got != 0 {
			t.Fatalf("a new location records version %d", got)
		}
		mustOpen(t, b, loc)
		if got := b.ReadVersion(t, loc); got != b.Version {
			t.Fatalf("a new store records version %d, want %d", got, b.Version)
		}
		if len(b.Catalog(t, loc)) == 0 {
			t.Fatal("a new store's catalog is empty")
		}
		reopenChangesNothing(t, b, loc)
	})
	for _, old := range b.Olds {
		t.Run("From"+old.Name, func(t *testing.T) {
			t.Parallel()
			fromOld(t, b, old)
		})
	}
	t.Run("NewerStoreRefused", func(t *testing.T) {
		t.Parallel()
		loc := b.NewLoc(t)
		mustOpen(t, b, loc)
		b.WriteVersion(t, loc, b.Version+1)
		cat, rows := b.Catalog(t, loc), b.Rows(t, loc)
		if err := b.Open(t, loc); !errors.Is(err, b.ErrNewer) {
			t.Fatalf("Open(version %d) error = %v, want %v", b.Version+1, err, b.ErrNewer)
		}
		if got := b.ReadVersion(t, loc); got != b.Version+1 {
			t.Fatalf("the refused store records version %d, want %d", got, b.Version+1)
		}
		sameCatalog(t, "the refused store", b.Catalog(t, loc), "before", cat)
		sameRows(t, "the refused store", b.Rows(t, loc), rows)
	})
}

// fromOld opens an older store with this build: it reaches the newest
// version, keeps every row and value it had, and has a new store's catalog.
func fromOld(t *testing.T, b Backend, old Old) {
	loc := old.Make(t)
	if got := b.ReadVersion(t, loc); got != old.Version {
		t.Fatalf("the %s store records version %d, want %d", old.Name, got, old.Version)
	}
	before := b.Rows(t, loc)
	if len(before) == 0 {
		t.Fatalf("the %s store has no tables", old.Name)
	}
	for tab, rows := range before {
		if len(rows) == 0 {
			t.Fatalf("the %s store has no rows in %s: nothing would show that they survive", old.Name, tab)
		}
	}
	mustOpen(t, b, loc)
	if got := b.ReadVersion(t, loc); got != b.Version {
		t.Fatalf("the migrated store records version %d, want %d", got, b.Version)
	}
	kept(t, before, b.Rows(t, loc))
	fresh := b.NewLoc(t)
	mustOpen(t, b, fresh)
	sameCatalog(t, "the migrated store", b.Catalog(t, loc), "a new store", b.Catalog(t, fresh))
	reopenChangesNothing(t, b, loc)
}

// failure makes the migration fail after each file in turn, from a new
// location and from every older store: each Open fails and leaves the
// version, the catalog and the rows as they were; then Open succeeds.
func failure(t *testing.T, b Backend) {
	starts := []Old{{Name: "a new location", Make: b.NewLoc}}
	starts = append(starts, b.Olds...)
	for _, start := range starts {
		loc := start.Make(t)
		cat, rows := b.Catalog(t, loc), b.Rows(t, loc)
		for v := start.Version + 1; v <= b.Version; v++ {
			undo := b.FailAfter(v)
			err := b.Open(t, loc)
			undo()
			if err == nil {
				t.Fatalf("%s: Open with a failure after migration %d: error = nil", start.Name, v)
			}
			if got := b.ReadVersion(t, loc); got != start.Version {
				t.Fatalf("%s: a failure after migration %d left version %d, want %d (%v)", start.Name, v, got, start.Version, err)
			}
			sameCatalog(t, fmt.Sprintf("%s after a failure after migration %d", start.Name, v), b.Catalog(t, loc), "before", cat)
			sameRows(t, fmt.Sprintf("%s after a failure after migration %d", start.Name, v), b.Rows(t, loc), rows)
		}
		mustOpen(t, b, loc)
		if got := b.ReadVersion(t, loc); got != b.Version {
			t.Fatalf("%s: after the failures Open left version %d, want %d", start.Name, got, b.Version)
		}
	}
}

func mustOpen(t *testing.T, b Backend, loc string) {
	t.Helper()
	if err := b.Open(t, loc); err != nil {
		t.Fatalf("Open(%s) error = %v", loc, err)
	}
}

// reopenChangesNothing opens loc again and wants its version, catalog and
// rows unchanged.
func reopenChangesNothing(t *testing.T, b Backend, loc string) {
	t.Helper()
	cat, rows := b.Catalog(t, loc), b.Rows(t, loc)
	mustOpen(t, b, loc)
	if got := b.ReadVersion(t, loc); got != b.Version {
		t.Fatalf("after a reopen the store records version %d, want %d", got, b.Version)
	}
	sameCatalog(t, "after a reopen", b.Catalog(t, loc), "before", cat)
	sameRows(t, "after a reopen", b.Rows(t, loc), rows)
}

// kept fails t unless every table of before is in after with as many rows,
// and every row's columns in before have the same values in after's row at
// the same place (a migration may add columns, never change a value).
func kept(t *testing.T, before, after map[string][]map[string]string) {
	t.Helper()
	if err := lost(before, after); err != nil {
		t.Fatal(err)
	}
}

// lost says what kept finds missing or changed, or returns nil.
func lost(before, after map[string][]map[string]string) error {
	for _, tab := range slices.Sorted(maps.Keys(before)) {
		b, a := before[tab], after[tab]
		if len(a) != len(b) {
			return fmt.Errorf("table %s: %d rows after the migration, %d before", tab, len(a), len(b))
		}
		for i := range b {
			for _, col := range slices.Sorted(maps.Keys(b[i])) {
				if got, ok := a[i][col]; !ok || got != b[i][col] {
					return fmt.Errorf("table %s row %d column %s: %q after the migration, %q before\nbefore: %v\nafter:  %v", tab, i, col, got, b[i][col], b[i], a[i])
				}
			}
		}
	}
	return nil
}

func sameRows(t *testing.T, what string, got, want map[string][]map[string]string) {
	t.Helper()
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Fatalf("%s: rows\n%s\nwant\n%s", what, g, w)
	}
}

// sameCatalog fails t unless the two catalogs hold the same lines.
func sameCatalog(t *testing.T, gotName string, got []string, wantName string, want []string) {
	t.Helper()
	if d := catalogDiff(gotName, got, wantName, want); d != "" {
		t.Fatalf("the catalog of %s differs from %s's:\n%s", gotName, wantName, d)
	}
}

// catalogDiff says which lines only one of two catalogs has, or returns ""
// when they hold the same lines the same number of times.
func catalogDiff(gotName string, got []string, wantName string, want []string) string {
	g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if slices.Equal(g, w) {
		return ""
	}
	var b strings.Builder
	for _, l := range g {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "  only in %s: %s\n", gotName, l)
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			fmt.Fprintf(&b, "  only in %s: %s\n", wantName, l)
		}
	}
	if b.Len() == 0 {
		b.WriteString("  the same lines, repeated a different number of times\n")
	}
	return b.String()
}

// NormalizeSQL collapses a statement's layout for a catalog line: no
// comments, one space between words, none inside parentheses or before a
// comma, no double quotes around names. Two statements that differ only in
// layout or quoting normalize to the same text.
func NormalizeSQL(sql string) string {
	var lines []string
	for _, l := range strings.Split(sql, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	s := strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
	s = strings.ReplaceAll(s, `"`, "")
	for _, r := range [][2]string{{"( ", "("}, {" )", ")"}, {" ,", ","}} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}
