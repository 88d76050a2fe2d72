package bench

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// pgRows reads what a claim or an ack writes in schema, as text, in a
// fixed order: every flow's row, every event's transition columns, the
// acked rows and the meta row's clock mark and ticket.
func pgRows(t *testing.T, url, schema string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	var out []string
	for _, q := range []string{
		`SELECT string_agg(concat_ws(',', flow, last_seq, served, head_seq, ready_at, ready, head_enqueued_at, paused), ';' ORDER BY flow) FROM ` + s + `.flows`,
		`SELECT string_agg(concat_ws(',', id, state, generation, attempts, lifetime_attempts, lease_until, ticket, acked_at, available_at), ';' ORDER BY id) FROM ` + s + `.events`,
		`SELECT coalesce(string_agg(concat_ws(',', at, event_id), ';' ORDER BY at, event_id), '') FROM ` + s + `.acked`,
		`SELECT concat_ws(',', clock_mark, ticket) FROM ` + s + `.meta`,
	} {
		var v string
		if err := c.QueryRow(ctx, q).Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return strings.Join(out, "\n")
}

// The control's functions claim and ack as the store does: on twin
// backlogs they hand out the same events with the same generations, leave
// the same rows, and the store goes on from where they stopped; they
// refuse what they were not written for.
func TestPGFunctionClaimSettleMatchesTheStore(t *testing.T) {
	url := pgtest.Require(t)
	ctx := context.Background()
	const flows, perFlow, steps = 4, 3, 7
	store, err := openPGQueue(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := LoadBacklog(ctx, store, "e", flows, perFlow); err != nil {
		t.Fatal(err)
	}
	f, err := openPGFunctions(ctx, url, flows, perFlow)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if before := pgRows(t, url, f.p.schema); before != pgRows(t, url, store.schema) {
		t.Fatalf("the twin backlogs differ before the first step:\n%s", before)
	}
	for i := range steps {
		c, ok, err := store.Claim(ctx, now)
		if err != nil || !ok {
			t.Fatalf("step %d: store Claim = %v, %v", i, ok, err)
		}
		if o, err := store.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, now); err != nil || o != queue.Acked {
			t.Fatalf("step %d: store Settle = %v, %v", i, o, err)
		}
		id, gen, err := f.claimAck(ctx)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if id != c.EventID || gen != c.Generation {
			t.Fatalf("step %d: the functions claimed %s at generation %d, the store %s at %d", i, id, gen, c.EventID, c.Generation)
		}
	}
	if got, want := pgRows(t, url, f.p.schema), pgRows(t, url, store.schema); got != want {
		t.Fatalf("after %d steps the functions left\n%s\nwhere the store left\n%s", steps, got, want)
	}
	// The store drains the rest of the functions' queue.
	for i := steps; i < flows*perFlow; i++ {
		c, ok, err := f.p.Claim(ctx, now)
		if err != nil || !ok {
			t.Fatalf("event %d: store Claim after the functions = %v, %v", i, ok, err)
		}
		if o, err := f.p.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, now); err != nil || o != queue.Acked {
			t.Fatalf("event %d: store Settle after the functions = %v, %v", i, o, err)
		}
	}
	if _, _, err := f.claimAck(ctx); !errors.Is(err, ErrBacklogEmpty) {
		t.Fatalf("claimAck on an empty queue = %v, want ErrBacklogEmpty", err)
	}
	// A tick below the clock mark is not this workload: refused, not
	// claimed.
	s := pgx.Identifier{f.p.schema}.Sanitize()
	var id *string
	var gen *int64
	if err := f.c.QueryRow(ctx, "SELECT claimed_id, claimed_gen FROM "+s+".bench_claim($1)", int64(now)-1).Scan(&id, &gen); err == nil || !strings.Contains(err.Error(), "not this workload") {
		t.Fatalf("bench_claim below the clock mark = %v, %v, want refused", id, err)
	}
}
