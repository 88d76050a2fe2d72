package queuestore

import (
	"context"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// docs/contract.md §2.1: one transaction allocates the flow's next sequence number (1 for
// a new flow) and inserts the event pending, available at now.
func TestEnqueue_2_1_AllocatesSequencePerFlow(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	steps := []struct {
		id, flow string
		now      clock.Tick
		wantSeq  int64
	}{
		{"a1", "a", 0, 1}, {"a2", "a", 1, 2}, {"b1", "b", 1, 1}, {"a3", "a", 3, 3}, {"b2", "b", 7, 2},
	}
	for _, st := range steps {
		got := enqueue(t, s, st.id, st.flow, "body-"+st.id, st.now)
		if got != (Enqueued{Seq: st.wantSeq}) {
			t.Fatalf("Enqueue(%q) = %+v, want seq %d, not duplicate", st.id, got, st.wantSeq)
		}
		e := event(t, s, st.id)
		if e.State != statePending || e.AvailableAt != st.now || e.Seq != st.wantSeq || e.Flow != st.flow ||
			string(e.Body) != "body-"+st.id || e.Generation != 0 || e.Attempts != 0 || e.LifetimeAttempts != 0 || e.LeaseUntil != 0 {
			t.Fatalf("Event(%q) = %+v, want pending seq %d available at %d, generation/attempts 0", st.id, e, st.wantSeq, st.now)
		}
	}
}

// docs/contract.md §2.1: the same ID with the same flow and byte-identical body returns
// the stored sequence number with Duplicate and changes only the clock mark.
func TestEnqueue_2_1_DuplicateReturnsStoredSeqAndChangesOnlyMark(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", `{"delta": 1}`, 0)
	enqueue(t, s, "a2", "a", `{"delta": 2}`, 1)
	before := snap(t, s)
	got := enqueue(t, s, "a1", "a", `{"delta": 1}`, 9)
	if got != (Enqueued{Seq: 1, Duplicate: true}) {
		t.Fatalf("Enqueue(duplicate) = %+v, want {Seq:1 Duplicate:true}", got)
	}
	assertOnlyMark(t, "duplicate enqueue", before, snap(t, s), 9)
}

// docs/contract.md §2.1: the same ID with another flow or body is ErrConflict and
// changes nothing at all (not even the clock mark).
func TestEnqueue_2_1_ConflictChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", `{"delta": 1}`, 2)
	for _, e := range []Event{
		{ID: "a1", Flow: "b", Body: []byte(`{"delta": 1}`)},
		{ID: "a1", Flow: "a", Body: []byte(`{"delta":1}`)},
		{ID: "a1", Flow: "a", Body: []byte(`{"delta": 1} `)},
	} {
		before := snap(t, s)
		_, err := s.Enqueue(context.Background(), e, 5)
		wantErr(t, "Enqueue(conflict)", err, ErrConflict)
		assertUnchanged(t, "conflicting enqueue", before, snap(t, s))
	}
}

// docs/contract.md §2.1: bad input gets a typed error (ErrInvalid) and changes nothing;
// the documented limits themselves are accepted.
func TestEnqueue_2_1_InvalidInputChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "x", "x", "x", 1)
	long := strings.Repeat("i", MaxNameLen+1)
	cases := []struct {
		name string
		e    Event
	}{
		{"empty id", Event{ID: "", Flow: "a", Body: []byte("b")}},
		{"long id", Event{ID: long, Flow: "a", Body: []byte("b")}},
		{"control char in id", Event{ID: "a\n", Flow: "a", Body: []byte("b")}},
		{"NUL in id", Event{ID: "a\x00", Flow: "a", Body: []byte("b")}},
		{"invalid utf-8 id", Event{ID: "a\xff", Flow: "a", Body: []byte("b")}},
		{"empty flow", Event{ID: "i", Flow: "", Body: []byte("b")}},
		{"long flow", Event{ID: "i", Flow: long, Body: []byte("b")}},
		{"format char in flow", Event{ID: "i", Flow: "a\u200b", Body: []byte("b")}},
		{"nil body", Event{ID: "i", Flow: "a"}},
		{"empty body", Event{ID: "i", Flow: "a", Body: []byte{}}},
		{"large body", Event{ID: "i", Flow: "a", Body: make([]byte, MaxBodyLen+1)}},
	}
	for _, c := range cases {
		before := snap(t, s)
		_, err := s.Enqueue(context.Background(), c.e, 2)
		wantErr(t, "Enqueue("+c.name+")", err, ErrInvalid)
		assertUnchanged(t, "Enqueue("+c.name+")", before, snap(t, s))
		_, err = s.EnqueueBatch(context.Background(), []Event{{ID: "ok", Flow: "a", Body: []byte("b")}, c.e}, 2)
		wantErr(t, "EnqueueBatch("+c.name+")", err, ErrInvalid)
		assertUnchanged(t, "EnqueueBatch("+c.name+")", before, snap(t, s))
	}
	// The limits themselves are fine.
	edge := Event{ID: strings.Repeat("é", MaxNameLen/2), Flow: strings.Repeat("f", MaxNameLen) + "", Body: make([]byte, MaxBodyLen)}
	if _, err := s.Enqueue(context.Background(), edge, 2); err != nil {
		t.Fatalf("Enqueue(at the limits) error = %v, want nil", err)
	}
	if got := event(t, s, edge.ID); len(got.Body) != MaxBodyLen {
		t.Fatalf("stored body length = %d, want %d", len(got.Body), MaxBodyLen)
	}
}

// docs/contract.md §2.1: EnqueueBatch is one transaction, all or nothing;
// inside the batch an ID repeats as a duplicate or a conflict.
func TestEnqueueBatch_2_1_AllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "1", 0)

	got, err := s.EnqueueBatch(ctx, []Event{
		{ID: "a2", Flow: "a", Body: []byte("2")},
		{ID: "b1", Flow: "b", Body: []byte("1")},
		{ID: "a1", Flow: "a", Body: []byte("1")},
		{ID: "a2", Flow: "a", Body: []byte("2")},
		{ID: "a3", Flow: "a", Body: []byte("3")},
	}, 1)
	if err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	want := []Enqueued{{Seq: 2}, {Seq: 1}, {Seq: 1, Duplicate: true}, {Seq: 2, Duplicate: true}, {Seq: 3}}
	if jsonOf(got) != jsonOf(want) {
		t.Fatalf("EnqueueBatch() = %v, want %v", got, want)
	}

	before := snap(t, s)
	_, err = s.EnqueueBatch(ctx, []Event{
		{ID: "c1", Flow: "c", Body: []byte("1")},
		{ID: "a4", Flow: "a", Body: []byte("4")},
		{ID: "b1", Flow: "b", Body: []byte("other")},
	}, 3)
	wantErr(t, "EnqueueBatch(with a conflict)", err, ErrConflict)
	assertUnchanged(t, "EnqueueBatch(with a conflict)", before, snap(t, s))

	_, err = s.EnqueueBatch(ctx, []Event{
		{ID: "c1", Flow: "c", Body: []byte("1")},
		{ID: "c1", Flow: "c", Body: []byte("2")},
	}, 3)
	wantErr(t, "EnqueueBatch(conflict inside the batch)", err, ErrConflict)
	assertUnchanged(t, "EnqueueBatch(conflict inside the batch)", before, snap(t, s))

	got, err = s.EnqueueBatch(ctx, nil, 4)
	if err != nil || len(got) != 0 {
		t.Fatalf("EnqueueBatch(empty) = %v, %v; want empty, nil", got, err)
	}
	assertOnlyMark(t, "EnqueueBatch(empty)", before, snap(t, s), 4)
}
