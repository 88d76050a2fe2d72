package migration

import (
	"strings"
	"testing"
	"testing/fstest"
)

func files(names ...string) fstest.MapFS {
	m := fstest.MapFS{}
	for _, n := range names {
		m[n] = &fstest.MapFile{Data: []byte("-- " + n)}
	}
	return m
}

func TestLoadInOrder(t *testing.T) {
	steps, err := Load(files("migrations/0002_more.sql", "migrations/0001_initial.sql", "migrations/README.md", "other/0009_x.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0] != (Step{1, "0001_initial.sql", "-- migrations/0001_initial.sql"}) || steps[1].Version != 2 || steps[1].Name != "0002_more.sql" {
		t.Fatalf("Load = %+v", steps)
	}
}

func TestLoadRefusesWrongFiles(t *testing.T) {
	for _, c := range []struct {
		fs   fstest.MapFS
		want string
	}{
		{files(), "no migrations/*.sql"},
		{files("migrations/0002_b.sql"), "version 2 where 1 comes next"},
		{files("migrations/0001_a.sql", "migrations/0003_c.sql"), "version 3 where 2 comes next"},
		{files("migrations/0001_a.sql", "migrations/0001_b.sql"), "version 1 where 2 comes next"},
		{files("migrations/1_a.sql"), "want a name like"},
		{files("migrations/0001-a.sql"), "want a name like"},
	} {
		if _, err := Load(c.fs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%v) error = %v, want %q", c.fs, err, c.want)
		}
	}
}

func TestMustLoadChecksTheCount(t *testing.T) {
	if got := MustLoad(files("migrations/0001_a.sql"), 1); len(got) != 1 {
		t.Fatalf("MustLoad = %+v", got)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "1 files, but the schema version is 2") {
			t.Fatalf("MustLoad with a missing file: recover() = %v", r)
		}
	}()
	MustLoad(files("migrations/0001_a.sql"), 2)
}

func TestPending(t *testing.T) {
	steps, _ := Load(files("migrations/0001_a.sql", "migrations/0002_b.sql", "migrations/0003_c.sql"))
	for have, want := range []int{3, 2, 1, 0} {
		got, err := Pending(steps, have)
		if err != nil || len(got) != want || (want > 0 && got[0].Version != have+1) {
			t.Fatalf("Pending(%d) = %+v, %v", have, got, err)
		}
	}
	for _, have := range []int{-1, 4} {
		if _, err := Pending(steps, have); err == nil {
			t.Fatalf("Pending(%d) error = nil", have)
		}
	}
}
