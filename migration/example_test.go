package migration_test

import (
	"fmt"
	"testing/fstest"

	"github.com/fairrelay/fairrelay/migration"
)

// A store embeds its migrations folder (here a map of files stands in for
// an embed.FS), loads it once, and at Open runs the steps past the version
// its schema recorded.
func Example() {
	files := fstest.MapFS{
		"migrations/0001_initial.sql": {Data: []byte("CREATE TABLE events (id TEXT PRIMARY KEY);")},
		"migrations/0002_flows.sql":   {Data: []byte("ALTER TABLE events ADD COLUMN flow TEXT;")},
		"migrations/0003_bodies.sql":  {Data: []byte("ALTER TABLE events ADD COLUMN body BLOB;")},
	}
	steps := migration.MustLoad(files, 3)

	for _, have := range []int{0, 2, 3, 4} {
		todo, err := migration.Pending(steps, have)
		if err != nil {
			fmt.Printf("at version %d: %v\n", have, err)
			continue
		}
		var names []string
		for _, s := range todo {
			names = append(names, s.Name)
		}
		fmt.Printf("at version %d: run %v\n", have, names)
	}

	// A gap in the numbers is a mistake of the build, refused at Load.
	delete(files, "migrations/0002_flows.sql")
	_, err := migration.Load(files)
	fmt.Println(err)
	// Output:
	// at version 0: run [0001_initial.sql 0002_flows.sql 0003_bodies.sql]
	// at version 2: run [0003_bodies.sql]
	// at version 3: run []
	// at version 4: version 4 is newer than this build's 3
	// migrations: 0003_bodies.sql: version 3 where 2 comes next
}
