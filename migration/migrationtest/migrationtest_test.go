package migrationtest

import (
	"strings"
	"testing"
)

func TestNormalizeSQL(t *testing.T) {
	a := `CREATE TABLE "flows" (
    flow     TEXT PRIMARY KEY, -- the flow's ID
    ready    INTEGER NOT NULL CHECK ( ready = 0 OR ready = 1 ) ,
    weight   INTEGER NOT NULL DEFAULT 1
) STRICT`
	b := `CREATE TABLE flows (flow TEXT PRIMARY KEY, ready INTEGER NOT NULL CHECK (ready = 0 OR ready = 1), weight INTEGER NOT NULL DEFAULT 1) STRICT`
	if NormalizeSQL(a) != NormalizeSQL(b) || NormalizeSQL(b) != b {
		t.Fatalf("NormalizeSQL:\n%s\n%s", NormalizeSQL(a), NormalizeSQL(b))
	}
	if NormalizeSQL(b) == NormalizeSQL(strings.Replace(b, "DEFAULT 1", "DEFAULT 2", 1)) {
		t.Fatal("NormalizeSQL made two different defaults equal")
	}
}

func TestLost(t *testing.T) {
	before := map[string][]map[string]string{"t": {{"id": "1", "v": "a"}, {"id": "2", "v": "b"}}}
	for _, c := range []struct {
		after map[string][]map[string]string
		want  string
	}{
		{map[string][]map[string]string{"t": {{"id": "1", "v": "a", "new": "x"}, {"id": "2", "v": "b", "new": "y"}}}, ""},
		{map[string][]map[string]string{"t": {{"id": "1", "v": "a"}}}, "1 rows after the migration, 2 before"},
		{map[string][]map[string]string{}, "0 rows after the migration, 2 before"},
		{map[string][]map[string]string{"t": {{"id": "1", "v": "a"}, {"id": "2", "v": "c"}}}, `row 1 column v: "c" after the migration, "b" before`},
		{map[string][]map[string]string{"t": {{"id": "1", "v": "a"}, {"id": "2"}}}, `row 1 column v: "" after`},
	} {
		err := lost(before, c.after)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("lost(%v) = %v, want %q", c.after, err, c.want)
		}
	}
}

func TestCatalogDiff(t *testing.T) {
	if d := catalogDiff("a", []string{"x", "y"}, "b", []string{"y", "x"}); d != "" {
		t.Fatalf("the same lines in another order: %q", d)
	}
	if d := catalogDiff("a", []string{"x", "y"}, "b", []string{"x", "z"}); d != "  only in a: y\n  only in b: z\n" {
		t.Fatalf("different lines: %q", d)
	}
	if d := catalogDiff("a", []string{"x", "x"}, "b", []string{"x"}); !strings.Contains(d, "repeated") {
		t.Fatalf("a repeated line: %q", d)
	}
}
