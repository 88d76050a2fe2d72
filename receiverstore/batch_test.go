package receiverstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// ReceiveBatch: later messages see earlier ones of the same batch.
func TestReceiveBatch_SeesEarlierItemsOfTheBatch(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	res, err := s.ReceiveBatch(context.Background(), []Message{
		msg("e2", "f", 2, 2), // gap: seq 1 is not there yet
		msg("e1", "f", 1, 1),
		msg("e2", "f", 2, 2), // now it follows
		msg("e2", "f", 2, 2), // and is a duplicate
		msg("x", "f", 1, 1),  // seq 1 taken within the batch
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Outcome{Gap, Accepted, Accepted, Duplicate, Conflict}
	for i, r := range res {
		if r.Err != nil || r.Outcome != want[i] {
			t.Errorf("item %d = %q, %v; want %q, nil", i, r.Outcome, r.Err, want[i])
		}
	}
	if got := total(t, s, "f"); got != 3 {
		t.Errorf("Total(f) = %d, want 3", got)
	}
}

// A bad message gets its own error without failing the others.
func TestReceiveBatch_BadItemGetsItsOwnError(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	res, err := s.ReceiveBatch(context.Background(), []Message{
		msg("e1", "f", 1, 1),
		{ID: "e2", Flow: "f", Seq: 2, Body: []byte(`{"delta": 1.5}`)},
		{ID: "", Flow: "f", Seq: 2, Body: body(2)},
		msg("e2", "f", 2, 2),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(res))
	for i, r := range res {
		got[i] = string(r.Outcome) + errClass(r.Err)
	}
	want := []string{"accepted", "ErrInvalidBody", "ErrInvalid", "accepted"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ReceiveBatch() = %v, want %v", got, want)
	}
	// An all-invalid batch opens no transaction and changes nothing.
	before := snap(t, s)
	res, err = s.ReceiveBatch(context.Background(), []Message{{ID: "z"}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, ErrInvalidBody) {
		t.Fatalf("ReceiveBatch(invalid) = %+v, %v; want one ErrInvalidBody", res, err)
	}
	assertUnchanged(t, s, before, "an all-invalid batch")
	if res, err := s.ReceiveBatch(context.Background(), nil); err != nil || len(res) != 0 {
		t.Fatalf("ReceiveBatch(nil) = %v, %v; want empty, nil", res, err)
	}
}

// An SQL error fails the whole batch: one transaction, all undone.
func TestReceiveBatch_SQLErrorUndoesTheWholeBatch(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	mustReceive(t, s, msg("e1", "g", 1, 1), Accepted)
	if _, err := s.db.Exec(`CREATE TRIGGER boom BEFORE UPDATE OF total ON flows WHEN NEW.flow = 'g'
		BEGIN SELECT RAISE(ABORT, 'injected'); END`); err != nil {
		t.Fatal(err)
	}
	before := snap(t, s)
	res, err := s.ReceiveBatch(context.Background(), []Message{
		msg("a1", "f", 1, 1), // accepted (new flow: an INSERT, no trigger)
		msg("a2", "f", 2, 1), // accepted (UPDATE of f)
		msg("e2", "g", 2, 1), // the trigger fires
	})
	if err == nil || !strings.Contains(err.Error(), "injected") || res != nil {
		t.Fatalf("ReceiveBatch() = %v, %v; want nil, the trigger's error", res, err)
	}
	assertUnchanged(t, s, before, "a failed batch")
}

// ReceiveBatch gives exactly the outcomes of successive Receive calls on a
// twin store, and leaves the same snapshot; both agree with the model.
func TestReceiveBatch_MatchesSuccessiveReceiveOnATwin(t *testing.T) {
	t.Parallel()
	rounds, batches := 6, 6
	if testing.Short() {
		rounds = 2
	}
	seen := map[string]int{}
	for round := range rounds {
		r := rand.New(rand.NewPCG(uint64(round), 42))
		maxDelta := []int{1000, 7, 999}[round%3]
		batchStore, _ := open(t, WithMaxDelta(maxDelta))
		twin, _ := open(t, WithMaxDelta(maxDelta))
		m := newModel(int64(maxDelta))
		g := &msgGen{r: r}
		ctx := context.Background()
		for b := range batches {
			ms := g.messages(1 + r.IntN(40))
			res, err := batchStore.ReceiveBatch(ctx, ms)
			if err != nil {
				t.Fatalf("round %d batch %d: ReceiveBatch() error = %v", round, b, err)
			}
			for i, msg := range ms {
				out, err := twin.Receive(ctx, msg)
				mout, merr := m.receive(msg)
				if res[i].Outcome != out || errClass(res[i].Err) != errClass(err) {
					t.Fatalf("round %d batch %d item %d %+v: batch = %q, %v; Receive = %q, %v",
						round, b, i, msg, res[i].Outcome, res[i].Err, out, err)
				}
				seen[string(out)+errClass(err)]++
				if out != mout || errClass(err) != errClass(merr) {
					t.Fatalf("round %d batch %d item %d %+v: Receive = %q, %v; model = %q, %v",
						round, b, i, msg, out, err, mout, merr)
				}
			}
			bs, ts := snap(t, batchStore), snap(t, twin)
			if !reflect.DeepEqual(bs, ts) {
				t.Fatalf("round %d batch %d: snapshots differ:\nbatch %s\ntwin  %s", round, b, js(bs), js(ts))
			}
			if err := m.check(ts); err != nil {
				t.Fatalf("round %d batch %d: %v", round, b, err)
			}
		}
	}
	// The generator must reach every outcome and both input errors, or the
	// comparison above proves little.
	for _, k := range []string{"accepted", "duplicate", "conflict", "gap", "unsupported_delta", "ErrInvalidBody", "ErrInvalid"} {
		if seen[k] == 0 {
			t.Errorf("no %s among the generated messages (seen %v)", k, seen)
		}
	}
	t.Logf("outcomes compared: %v", seen)
}
