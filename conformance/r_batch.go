package conformance

import (
	"context"
	"errors"
	"github.com/fairrelay/fairrelay/receiver"
	"math/rand/v2"
	"reflect"
	"testing"
)

// ReceiveBatch: later messages see earlier ones of the same batch.
func receiverReceiveBatch_SeesEarlierItemsOfTheBatch(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, _ := rk.open(t)
	res, err := s.ReceiveBatch(context.Background(), []receiver.Message{
		rmsg("e2", "f", 2, 2), // gap: seq 1 is not there yet
		rmsg("e1", "f", 1, 1),
		rmsg("e2", "f", 2, 2), // now it follows
		rmsg("e2", "f", 2, 2), // and is a duplicate
		rmsg("x", "f", 1, 1),  // seq 1 taken within the batch
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []receiver.Outcome{receiver.Gap, receiver.Accepted, receiver.Accepted, receiver.Duplicate, receiver.Conflict}
	for i, r := range res {
		if r.Err != nil || r.Outcome != want[i] {
			t.Errorf("item %d = %q, %v; want %q, nil", i, r.Outcome, r.Err, want[i])
		}
	}
	if got := rtotal(t, s, "f"); got != 3 {
		t.Errorf("Total(f) = %d, want 3", got)
	}
}

// A bad message gets its own error without failing the others.
func receiverReceiveBatch_BadItemGetsItsOwnError(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, _ := rk.open(t)
	res, err := s.ReceiveBatch(context.Background(), []receiver.Message{
		rmsg("e1", "f", 1, 1),
		{ID: "e2", Flow: "f", Seq: 2, Body: []byte(`{"delta": 1.5}`)},
		{ID: "", Flow: "f", Seq: 2, Body: rbody(2)},
		rmsg("e2", "f", 2, 2),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(res))
	for i, r := range res {
		got[i] = string(r.Outcome) + rerrClass(r.Err)
	}
	want := []string{"accepted", "ErrInvalidBody", "ErrInvalid", "accepted"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ReceiveBatch() = %v, want %v", got, want)
	}
	// An all-invalid batch opens no transaction and changes nothing.
	before := rsnap(t, s)
	res, err = s.ReceiveBatch(context.Background(), []receiver.Message{{ID: "z"}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, receiver.ErrInvalidBody) {
		t.Fatalf("ReceiveBatch(invalid) = %+v, %v; want one receiver.ErrInvalidBody", res, err)
	}
	rassertUnchanged(t, s, before, "an all-invalid batch")
	if res, err := s.ReceiveBatch(context.Background(), nil); err != nil || len(res) != 0 {
		t.Fatalf("ReceiveBatch(nil) = %v, %v; want empty, nil", res, err)
	}
}

// ReceiveBatch gives exactly the outcomes of successive Receive calls on a
// twin store, and leaves the same snapshot; both agree with the model.
func receiverReceiveBatch_MatchesSuccessiveReceiveOnATwin(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	rounds, batches := 6, 6
	if testing.Short() {
		rounds = 2
	}
	seen := map[string]int{}
	for round := range rounds {
		r := rand.New(rand.NewPCG(uint64(round), 42))
		maxDelta := []int{1000, 7, 999}[round%3]
		batchStore, _ := rk.open(t, withMaxDelta(maxDelta))
		twin, _ := rk.open(t, withMaxDelta(maxDelta))
		m := rnewModel(int64(maxDelta))
		g := &rmsgGen{r: r}
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
				if res[i].Outcome != out || rerrClass(res[i].Err) != rerrClass(err) {
					t.Fatalf("round %d batch %d item %d %+v: batch = %q, %v; Receive = %q, %v",
						round, b, i, msg, res[i].Outcome, res[i].Err, out, err)
				}
				seen[string(out)+rerrClass(err)]++
				if out != mout || rerrClass(err) != rerrClass(merr) {
					t.Fatalf("round %d batch %d item %d %+v: Receive = %q, %v; model = %q, %v",
						round, b, i, msg, out, err, mout, merr)
				}
			}
			bs, ts := rsnap(t, batchStore), rsnap(t, twin)
			if !reflect.DeepEqual(bs, ts) {
				t.Fatalf("round %d batch %d: snapshots differ:\nbatch %s\ntwin  %s", round, b, rjs(bs), rjs(ts))
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
