package pgreceiverstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/jackc/pgx/v5"
)

// withGeneralPath keeps a store's every receive on the general path: the
// statements sent from Go, never receive_accepted (onecall.go).
func withGeneralPath() Option { return func(o *options) { o.general = true } }

// TestOneCall_SameAsTheGeneralPath: random sequences of Receive and
// ReceiveBatch run on a store that takes the one-call path and on one that
// never does, both with WithMaxDelta(5) and one clock. The messages are
// accepts of new and known flows (several of one flow in a batch),
// duplicates, IDs reused, one ID twice in a batch, gaps, seqs taken,
// seqs behind (a receipt deleted by hand), seqs pruned, deltas above the
// maximum and invalid bodies, with Prune between steps, and now and then
// a flow's pruned mark raised, or its next expected seq lowered, by hand
// (no store does that; the checks of receive_accepted that only such rows
// reach must still send the batch to the general path). Both answer every
// call the same and hold the same snapshot and receipt times after every
// step. Over the sequences every answer and conflict rule occurs, and
// receive_accepted both takes batches and sends some to the general path.
func TestOneCall_SameAsTheGeneralPath(t *testing.T) {
	c := pgtest.NewCallCounter("receive_accepted")
	seen := map[string]int{}
	for seed := uint64(1); seed <= 8; seed++ {
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := func() time.Time { return at }
		opts := []Option{WithMaxDelta(5), WithNow(clock)}
		one := openTraced(t, c, 0, opts...)
		general, _, _ := open(t, append([]Option{withGeneralPath()}, opts...)...)
		runTwin(t, seed, one, general, func() { at = at.Add(time.Second) }, seen)
	}
	if c.Taken() == 0 || c.Taken() == c.Calls() {
		t.Fatalf("receive_accepted called %d times, %d without falling back: want both paths", c.Calls(), c.Taken())
	}
	t.Logf("receive_accepted called %d times, %d without falling back; answers %v", c.Calls(), c.Taken(), seen)
	for _, k := range []string{string(receiver.Accepted), string(receiver.Duplicate), string(receiver.Gap), string(receiver.Pruned),
		string(receiver.UnsupportedDelta), "invalid", receiver.RuleIDReused, receiver.RuleSeqTaken, receiver.RuleSeqBehind} {
		if seen[k] == 0 {
			t.Errorf("no %s in any sequence: %v", k, seen)
		}
	}
}

// runTwin runs one random sequence on a and b, comparing as it goes; tick
// moves their clock on by a second. seen counts the answers (a conflict by
// its rule, a message that fails validation as "invalid").
func runTwin(t *testing.T, seed uint64, a, b *Store, tick func(), seen map[string]int) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 3))
	var (
		log   []string
		past  []receiver.Message // every message accepted
		n     int                // messages made
		flows = 4                // f0 … f(flows-1)
	)
	next := map[string]int64{} // each flow's next expected seq, read before each step
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format+"\nsteps:\n  %s", append(append([]any{seed}, args...), strings.Join(log, "\n  "))...)
	}
	// At most 24 flows, so that a Prune never meets maxPruneFlows: past
	// it, which flows' receipts of one second a Prune takes first would
	// depend on where the rows lie in each store's table.
	newFlow := func() string {
		if flows < 24 {
			flows++
		}
		return fmt.Sprintf("f%d", flows-1)
	}
	flow := func() string {
		if r.IntN(8) == 0 {
			return newFlow()
		}
		return fmt.Sprintf("f%d", r.IntN(flows))
	}
	delta := func() int {
		if r.IntN(15) == 0 {
			return 6 + r.IntN(3) // above WithMaxDelta(5)
		}
		return 1 + r.IntN(5)
	}
	// message makes one message of a batch; batchNext is what the batch
	// before it would move each flow to if every message were accepted.
	message := func(batchNext map[string]int64, batch []receiver.Message) receiver.Message {
		n++
		id := fmt.Sprintf("e%d", n)
		k := r.IntN(40)
		switch {
		case k < 24: // the next seq of its flow: accepted, unless something before it in the batch was not
			f := flow()
			s := max(batchNext[f], next[f], 1)
			batchNext[f] = s + 1
			return msg(id, f, s, delta())
		case k < 27 && len(past) > 0: // a duplicate
			return past[r.IntN(len(past))]
		case k < 29 && len(past) > 0: // the ID of a receipt, another message
			p := past[r.IntN(len(past))]
			return msg(p.ID, p.Flow, p.Seq+1, delta())
		case k < 31 && len(batch) > 0: // one ID twice in a batch: the same message, another body, or the next of a flow
			p := batch[r.IntN(len(batch))]
			switch r.IntN(3) {
			case 0:
				return p
			case 1:
				return msg(p.ID, p.Flow, p.Seq, 5)
			}
			f := flow()
			s := max(batchNext[f], next[f], 1)
			batchNext[f] = s + 1
			return msg(p.ID, f, s, delta())
		case k < 33: // a gap
			f := flow()
			return msg(id, f, max(next[f], 1)+1+int64(r.IntN(3)), delta())
		case k < 35 && len(past) > 0: // a seq taken (or pruned)
			p := past[r.IntN(len(past))]
			return msg(id, p.Flow, p.Seq, delta())
		case k < 36: // an invalid body
			return receiver.Message{ID: id, Flow: flow(), Seq: 1, Body: []byte(`{"delta": 0}`)}
		default: // a new flow's first message (or the next of the last flow)
			f := newFlow()
			s := max(batchNext[f], next[f], 1)
			batchNext[f] = s + 1
			return msg(id, f, s, delta())
		}
	}
	same := func(what string, x, y any, ex, ey error) {
		t.Helper()
		if fmt.Sprint(ex) != fmt.Sprint(ey) || !reflect.DeepEqual(x, y) {
			fail("%s: one call %+v, %v; general path %+v, %v", what, x, ex, y, ey)
		}
	}
	// note records what both stores answered for ms.
	note := func(ms []receiver.Message, outs []receiver.Outcome) {
		for i, o := range outs {
			switch o {
			case receiver.Conflict: // counted by rule below
			case "":
				seen["invalid"]++
			default:
				seen[string(o)]++
			}
			if o == receiver.Accepted {
				past = append(past, ms[i])
			}
		}
	}
	for step := range 50 {
		tick()
		fs, err := a.Flows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			next[f.Flow] = f.NextExpected
		}
		switch op := r.IntN(10); {
		case op < 3:
			m := message(map[string]int64{}, nil)
			log = append(log, fmt.Sprintf("%d: Receive %s %s %d %s", step, m.ID, m.Flow, m.Seq, m.Body))
			oa, ea := a.Receive(ctx, m)
			ob, eb := b.Receive(ctx, m)
			same(log[len(log)-1], oa, ob, ea, eb)
			note([]receiver.Message{m}, []receiver.Outcome{oa})
		case op < 8:
			var ms []receiver.Message
			bn := map[string]int64{}
			clean := r.IntN(3) == 0 // every message the next of its flow
			for range 1 + r.IntN(8) {
				if clean {
					f := flow()
					s := max(bn[f], next[f], 1)
					bn[f] = s + 1
					n++
					ms = append(ms, msg(fmt.Sprintf("e%d", n), f, s, 1+r.IntN(5)))
					continue
				}
				ms = append(ms, message(bn, ms))
			}
			var desc []string
			for _, m := range ms {
				desc = append(desc, fmt.Sprintf("%s %s %d %s", m.ID, m.Flow, m.Seq, m.Body))
			}
			log = append(log, fmt.Sprintf("%d: ReceiveBatch [%s]", step, strings.Join(desc, ", ")))
			ra, ea := a.ReceiveBatch(ctx, ms)
			rb, eb := b.ReceiveBatch(ctx, ms)
			same(log[len(log)-1], ra, rb, ea, eb)
			outs := make([]receiver.Outcome, len(ra))
			for i, res := range ra {
				outs[i] = res.Outcome
			}
			note(ms, outs)
		case op < 9:
			// Every receipt older than a step: receipts of one step share
			// a time, and which of them a smaller limit takes is not the
			// contract's.
			back := time.Duration(r.IntN(20)) * time.Second
			log = append(log, fmt.Sprintf("%d: Prune %v back", step, back))
			before := a.now().Add(-back)
			pa, ea := a.Prune(ctx, before, receiver.MaxPruneBatch)
			pb, eb := b.Prune(ctx, before, receiver.MaxPruneBatch)
			same(log[len(log)-1], pa, pb, ea, eb)
		default: // rows changed by hand, in both stores
			if len(past) == 0 {
				continue
			}
			// Then a message that meets the change, received by both.
			p := past[r.IntN(len(past))]
			var sql string
			n++
			m := msg(fmt.Sprintf("e%d", n), p.Flow, next[p.Flow], 1)
			switch r.IntN(4) {
			case 0, 1: // its seq is behind, with no receipt
				sql, m = `DELETE FROM {s}.receipts WHERE flow = $1 AND id = $2`, p
			case 2: // the next message of its flow is pruned
				sql = `UPDATE {s}.flows SET pruned_through = next_expected WHERE flow = $1`
			default: // the next message of its flow has a receipt for its seq
				sql = `UPDATE {s}.flows SET next_expected = next_expected - 1 WHERE flow = $1 AND next_expected > 2`
				m.Seq = max(m.Seq-1, 2)
			}
			args := []any{p.Flow}
			if strings.HasPrefix(sql, "DELETE") {
				args = append(args, p.ID)
			}
			log = append(log, fmt.Sprintf("%d: %s with %v; Receive %s %s %d %s", step, sql, args, m.ID, m.Flow, m.Seq, m.Body))
			for _, s := range []*Store{a, b} {
				if _, err := s.pool.Exec(ctx, s.q(sql), args...); err != nil {
					t.Fatal(err)
				}
			}
			oa, ea := a.Receive(ctx, m)
			ob, eb := b.Receive(ctx, m)
			same(log[len(log)-1], oa, ob, ea, eb)
			note([]receiver.Message{m}, []receiver.Outcome{oa})
		}
		if d := stateDiff(t, a, b); d != "" {
			fail("after step %d (a: one call, b: general path) %s", step, d)
		}
	}
	cs, err := a.Conflicts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		seen[c.Rule]++
	}
}

// stateDiff compares what two stores hold (Snapshot, and each receipt's
// accepted_at, which Snapshot leaves out): "" when both are the same, else
// which differs, with both sides.
func stateDiff(t *testing.T, a, b *Store) string {
	t.Helper()
	ctx := context.Background()
	sa, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa, sb) {
		return fmt.Sprintf("snapshots differ:\na %+v\nb %+v", sa, sb)
	}
	times := func(s *Store) string {
		rows, err := s.pool.Query(ctx, s.q(`SELECT id, accepted_at FROM {s}.receipts ORDER BY id`))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		var id string
		var at time.Time
		if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error {
			out = append(out, id+" "+at.UTC().Format(time.RFC3339Nano))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, ", ")
	}
	if ta, tb := times(a), times(b); ta != tb {
		return fmt.Sprintf("receipt times differ:\na %s\nb %s", ta, tb)
	}
	return ""
}

// A flow's row that the writes do not move (here a trigger skips its
// update; the locks make it impossible otherwise) fails the receive on
// either path, with nothing written: the batch was decided on what its
// read saw. On the one-call path that is receive_accepted's own error,
// returned as it is, not a fallback to the general path.
func TestOneCall_AFlowThatDidNotMove(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		opts  []Option
		from  string // where the error comes from
		calls int64  // of receive_accepted
	}{
		{"one call", nil, "receive_accepted: ", 1},
		{"general path", []Option{withGeneralPath()}, "update totals: ", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := pgtest.NewCallCounter("receive_accepted")
			s := openTraced(t, calls, 0, c.opts...)
			if o, err := s.Receive(ctx, msg("a", "f", 1, 3)); err != nil || o != receiver.Accepted {
				t.Fatalf("Receive = %s, %v", o, err)
			}
			if _, err := s.pool.Exec(ctx, s.q(`CREATE FUNCTION {s}.skip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER skip BEFORE UPDATE ON {s}.flows FOR EACH ROW EXECUTE FUNCTION {s}.skip()`)); err != nil {
				t.Fatal(err)
			}
			before, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			calls.Reset()
			_, err = s.ReceiveBatch(ctx, []receiver.Message{msg("b", "f", 2, 1), msg("c", "g", 1, 1)})
			if err == nil || !strings.Contains(err.Error(), c.from) || !strings.Contains(err.Error(), "0 rows changed, want 1") {
				t.Fatalf("ReceiveBatch: error %v, want %q… 0 rows changed, want 1", err, c.from)
			}
			after, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after, before) {
				t.Fatalf("the failed receive changed the store:\n%+v\nwant\n%+v", after, before)
			}
			if calls.Calls() != c.calls {
				t.Fatalf("receive_accepted called %d times, want %d", calls.Calls(), c.calls)
			}
		})
	}
}

// A store with a hook, which runs inside the transaction before its
// commit, never calls receive_accepted: the hook runs once per accepted
// message, as the contract says.
func TestOneCall_NotWithAHook(t *testing.T) {
	ctx := context.Background()
	calls := pgtest.NewCallCounter("receive_accepted")
	var hooks int
	s := openTraced(t, calls, 0, WithHook(func(receiver.HookPoint) { hooks++ }))
	res, err := s.ReceiveBatch(ctx, []receiver.Message{msg("a", "f", 1, 1), msg("b", "f", 2, 1), msg("c", "g", 1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Outcome != receiver.Accepted {
			t.Fatalf("ReceiveBatch = %+v", res)
		}
	}
	if hooks != 3 || calls.Calls() != 0 {
		t.Fatalf("hook called %d times, receive_accepted %d; want 3 and 0", hooks, calls.Calls())
	}
}
