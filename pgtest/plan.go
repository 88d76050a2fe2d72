package pgtest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PlanNodes returns every node of the JSON plan of sql, depth first, as
// "Node Type", with " on RELATION" and " using INDEX" where the node has
// them. It runs EXPLAIN inside tx, so that the transaction's data and
// ANALYZE statistics apply: the stores' plan tests assert with it that a
// statement reads through an index, never a sequential scan.
func PlanNodes(t testing.TB, tx pgx.Tx, sql string, args ...any) []string {
	t.Helper()
	return nodes(explain(t, tx, sql, args...).Plan)
}

// plan is EXPLAIN (FORMAT JSON)'s one element: the plan tree, and the JIT
// section when the plan would be compiled.
type plan struct {
	Plan map[string]any
	JIT  any
}

// explain runs EXPLAIN (FORMAT JSON) of sql inside tx.
func explain(t testing.TB, tx pgx.Tx, sql string, args ...any) plan {
	t.Helper()
	var js []byte
	if err := tx.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&js); err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	var plans []plan
	if err := json.Unmarshal(js, &plans); err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 {
		t.Fatalf("EXPLAIN %s: %d plans, want 1", sql, len(plans))
	}
	return plans[0]
}

// nodes lists the plan tree's nodes, depth first, as PlanNodes says.
func nodes(root map[string]any) []string {
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
	walk(root)
	return out
}

// GenericPlanNodes is PlanNodes of the generic plan of sql, the plan a
// connection makes once for a prepared statement and reuses for every
// argument: it runs settings (a statement that sets the transaction's plan
// settings, as a store's write transactions begin with) inside tx, then
// PREPARE, EXPLAIN EXECUTE with args written as SQL literals, and
// DEALLOCATE. Under plan_cache_mode force_generic_plan the plan shown is
// the generic one, made from the tables as they are now: on an empty store
// never analyzed it is the plan a new store's connections would keep. It
// fails t when that plan would be JIT-compiled, as a plan whose cost
// passes jit_above_cost is on every run, or when it would start parallel
// workers (Gather).
func GenericPlanNodes(t testing.TB, tx pgx.Tx, settings, sql string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := tx.Exec(ctx, settings); err != nil {
		t.Fatalf("%s: %v", settings, err)
	}
	if _, err := tx.Exec(ctx, "PREPARE fairrelay_generic_plan AS "+sql); err != nil {
		t.Fatalf("PREPARE %s: %v", sql, err)
	}
	defer func() {
		if _, err := tx.Exec(ctx, "DEALLOCATE fairrelay_generic_plan"); err != nil {
			t.Fatalf("DEALLOCATE: %v", err)
		}
	}()
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = literal(t, a)
	}
	exec := "EXECUTE fairrelay_generic_plan"
	if len(lits) > 0 {
		exec += "(" + strings.Join(lits, ", ") + ")"
	}
	p := explain(t, tx, exec)
	// A plan whose cost passes jit_above_cost (a disabled scan's cost
	// does) is compiled on every run: a key lookup never should be.
	if p.JIT != nil {
		t.Errorf("the generic plan of %s would be JIT-compiled: %v", sql, p.JIT)
	}
	ns := nodes(p.Plan)
	// A disabled scan's cost also makes a parallel plan look cheap, and
	// starting its workers costs tens of milliseconds on every run.
	for _, n := range ns {
		if strings.HasPrefix(n, "Gather") {
			t.Errorf("the generic plan of %s starts parallel workers (%s): %v", sql, n, ns)
		}
	}
	return ns
}

// literal writes v as an SQL literal of unknown type, which EXECUTE casts
// to the prepared statement's parameter type: arrays in the array text
// form, bytea in hex.
func literal(t testing.TB, v any) string {
	t.Helper()
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	elem := func(s string) string {
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
	}
	array := func(es []string) string { return quote("{" + strings.Join(es, ",") + "}") }
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return quote(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case []byte:
		return quote(`\x` + hex.EncodeToString(x))
	case time.Time:
		return quote(x.Format(time.RFC3339Nano))
	case []string:
		es := make([]string, len(x))
		for i, s := range x {
			es[i] = elem(s)
		}
		return array(es)
	case []int64:
		es := make([]string, len(x))
		for i, n := range x {
			es[i] = strconv.FormatInt(n, 10)
		}
		return array(es)
	case []int:
		es := make([]string, len(x))
		for i, n := range x {
			es[i] = strconv.Itoa(n)
		}
		return array(es)
	case []*int64:
		es := make([]string, len(x))
		for i, n := range x {
			es[i] = "NULL"
			if n != nil {
				es[i] = strconv.FormatInt(*n, 10)
			}
		}
		return array(es)
	case []bool:
		es := make([]string, len(x))
		for i, b := range x {
			es[i] = strconv.FormatBool(b)
		}
		return array(es)
	case [][]byte:
		es := make([]string, len(x))
		for i, b := range x {
			es[i] = elem(`\x` + hex.EncodeToString(b))
		}
		return array(es)
	}
	t.Fatalf("GenericPlanNodes: no literal for %T", v)
	return ""
}

// NestedPlans is a pool of one connection whose server session sends the
// plan of every statement it runs, those inside a function too, to the
// client as it runs (auto_explain: a superuser's LOAD; t is ended with
// Missing without it). A store opened on Pool runs its functions there,
// and Plans returns the plans sent so far, each as auto_explain's text:
// "Query Text: …" and the plan. The pool is closed when t ends.
type NestedPlans struct {
	Pool  *pgxpool.Pool
	mu    sync.Mutex
	plans []string
}

// ExplainNested returns a NestedPlans on the server at url, its
// connection traced by tracer unless it is nil (a CallCounter, say).
func ExplainNested(t testing.TB, url string, tracer pgx.QueryTracer) *NestedPlans {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	n := &NestedPlans{}
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = tracer
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, m *pgconn.Notice) {
		n.mu.Lock()
		n.plans = append(n.plans, m.Message)
		n.mu.Unlock()
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, `LOAD 'auto_explain'`); err != nil {
			return fmt.Errorf("%w: %w", errNoAutoExplain, err)
		}
		_, err := c.Exec(ctx, `SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
SET auto_explain.log_level = notice`)
		return err
	}
	if n.Pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Pool.Close)
	if err := n.Pool.Ping(ctx); errors.Is(err, errNoAutoExplain) {
		Missing(t, fmt.Sprintf("no auto_explain (%v); %s=1 makes this a failure", err, EnvRequire))
	} else if err != nil {
		t.Fatal(err)
	}
	return n
}

// errNoAutoExplain marks a connection that could not load auto_explain.
var errNoAutoExplain = errors.New("auto_explain")

// Plans returns the plans sent so far and forgets them.
func (n *NestedPlans) Plans() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.plans
	n.plans = nil
	return p
}

// CheckPlans fails t unless every statement of stmts, named by the first
// words of its text, has a plan among plans (NestedPlans.Plans) that
// holds each of the strings its entry lists, separated by "|", and unless
// no plan holds any of bad. It logs every plan.
func CheckPlans(t testing.TB, plans []string, stmts map[string]string, bad ...string) {
	t.Helper()
	left := make(map[string]string, len(stmts))
	for first, wants := range stmts {
		left[first] = wants
	}
	for _, p := range plans {
		t.Logf("%s", p)
		for _, b := range bad {
			if strings.Contains(p, b) {
				t.Errorf("a plan holds %q:\n%s", b, p)
			}
		}
		for first, wants := range left {
			if !strings.Contains(p, "Query Text: "+first) {
				continue
			}
			delete(left, first)
			for _, w := range strings.Split(wants, "|") {
				if !strings.Contains(p, w) {
					t.Errorf("the plan of %s… lacks %q:\n%s", first, w, p)
				}
			}
		}
	}
	for first := range left {
		t.Errorf("no plan of %s…", first)
	}
}
