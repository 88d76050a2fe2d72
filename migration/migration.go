// Package migration reads a store's schema migrations, the one shape every
// store of this project uses on both engines (docs/decisions/migrations.md):
// numbered SQL files embedded from the store package's migrations folder,
// migrations/0001_initial.sql, migrations/0002_<what>.sql, … File n brings a
// schema from version n-1 to version n; a released file never changes.
//
// A store records the version its schema reached (SQLite: PRAGMA
// user_version; PostgreSQL: the schema_migrations table) and, when opened,
// applies the files past it in order, each file recording the version it
// reaches, all in one transaction: a new store runs every file from 1, an
// older one the files past its version, and a store newer than the files is
// refused. The engines' runners live in the stores (SQLite's writer lock and
// foreign-key check, PostgreSQL's advisory lock and schema name); this
// package only reads and checks the files, and the schema name a
// PostgreSQL store puts into them (CheckSchemaName).
package migration

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Dir is the folder, in a store's embedded files, that holds its
// migrations.
const Dir = "migrations"

// A Step is one migration file.
type Step struct {
	// Version is the schema version the file brings a schema to: the
	// number its name starts with.
	Version int
	// Name is the file's name, for errors ("0002_policy.sql").
	Name string
	// SQL is the file's text, run as it is (a PostgreSQL store first puts
	// its schema name in).
	SQL string
}

// fileName is a migration's name: four digits, an underscore, words.
var fileName = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.sql$`)

// Load reads every .sql file in fsys's migrations folder, in version order.
// Each name must be NNNN_words.sql, and the versions must run 1, 2, … without
// a gap or a repeat.
func Load(fsys fs.FS) ([]Step, error) {
	names, err := fs.Glob(fsys, path.Join(Dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("migrations: no %s/*.sql file", Dir)
	}
	steps := make([]Step, 0, len(names))
	for i, p := range names { // fs.Glob returns them sorted
		name := path.Base(p)
		m := fileName.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("migrations: %s: want a name like 0001_initial.sql", name)
		}
		v, _ := strconv.Atoi(m[1])
		if v != i+1 {
			return nil, fmt.Errorf("migrations: %s: version %d where %d comes next", name, v, i+1)
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		steps = append(steps, Step{Version: v, Name: name, SQL: string(b)})
	}
	return steps, nil
}

// MustLoad is Load for a store's package variable: it panics when the
// files are wrong or when there are not exactly version of them (the
// store's SchemaVersion), both mistakes of the build that any test of the
// package shows.
func MustLoad(fsys fs.FS, version int) []Step {
	steps, err := Load(fsys)
	if err == nil && len(steps) != version {
		err = fmt.Errorf("migrations: %d files, but the schema version is %d", len(steps), version)
	}
	if err != nil {
		panic(err)
	}
	return steps
}

// Pending returns the steps a store at version have still needs, or an
// error when have is beyond the last step (a newer build's store) or
// negative. The caller wraps the error in its own sentinel.
func Pending(steps []Step, have int) ([]Step, error) {
	switch {
	case have < 0:
		return nil, fmt.Errorf("version %d is negative", have)
	case have > len(steps):
		return nil, fmt.Errorf("version %d is newer than this build's %d", have, len(steps))
	}
	return steps[have:], nil
}

// CheckSchemaName refuses a PostgreSQL schema name a store cannot take:
// empty, longer than max bytes, or holding a control character. A store
// puts the quoted name into its migrations' text, comments included, and
// a line break there would end a comment and run what follows as SQL. The
// store wraps the error in its own kind of refusal.
func CheckSchemaName(name string, max int) error {
	switch {
	case name == "":
		return fmt.Errorf("empty schema name")
	case len(name) > max:
		return fmt.Errorf("schema name %q is %d bytes, at most %d", name, len(name), max)
	case strings.ContainsFunc(name, unicode.IsControl):
		return fmt.Errorf("schema name %q holds a control character", name)
	}
	return nil
}
