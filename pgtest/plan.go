package pgtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PlanNodes returns every node of the JSON plan of sql, depth first, as
// "Node Type", with " on RELATION" and " using INDEX" where the node has
// them. It runs EXPLAIN inside tx, so that the transaction's data and
// ANALYZE statistics apply: the stores' plan tests assert with it that a
// statement reads through an index, never a sequential scan.
func PlanNodes(t testing.TB, tx pgx.Tx, sql string, args ...any) []string {
	t.Helper()
	var js []byte
	if err := tx.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&js); err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	var plans []struct{ Plan map[string]any }
	if err := json.Unmarshal(js, &plans); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		s := fmt.Sprint(n["Node Type"])
		if r, ok := n["Relation Name"]; ok {
			s += " on " + fmt.Sprint(r)
		}
		if i, ok := n["Index Name"]; ok {
			s += " using " + fmt.Sprint(i)
		}
		out = append(out, s)
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	walk(plans[0].Plan)
	return out
}
