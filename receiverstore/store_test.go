package receiverstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/receiver"
)

// open opens a fresh store in the test's own temporary directory.
func open(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "receiver.db")
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%q) error = %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
	})
	return s, path
}

// reopen opens another Store on path.
func reopen(t testing.TB, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%q) error = %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func body(delta int) []byte { return fmt.Appendf(nil, `{"delta": %d}`, delta) }

func msg(id, flow string, seq int64, delta int) Message {
	return Message{ID: id, Flow: flow, Seq: seq, Body: body(delta)}
}

func snap(t testing.TB, s *Store) Snapshot {
	t.Helper()
	sn, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() error = %v", err)
	}
	return sn
}

func mustReceive(t testing.TB, s *Store, m Message, want Outcome) {
	t.Helper()
	got, err := s.Receive(context.Background(), m)
	if err != nil {
		t.Fatalf("Receive(%s/%s/%d %s) error = %v", m.ID, m.Flow, m.Seq, m.Body, err)
	}
	if got != want {
		t.Fatalf("Receive(%s/%s/%d %s) = %q, want %q", m.ID, m.Flow, m.Seq, m.Body, got, want)
	}
}

// assertUnchanged fails when the snapshot differs from before.
func assertUnchanged(t testing.TB, s *Store, before Snapshot, what string) {
	t.Helper()
	if after := snap(t, s); !reflect.DeepEqual(after, before) {
		t.Fatalf("%s changed the store:\n got %s\nwant %s", what, js(after), js(before))
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

func total(t testing.TB, s *Store, flow string) int64 {
	t.Helper()
	n, err := s.Total(context.Background(), flow)
	if err != nil {
		t.Fatalf("Total(%q) error = %v", flow, err)
	}
	return n
}

// docs/contract.md §3 rule 6: accepted = receipt + total += delta + next-expected += 1.
func TestReceive_Accepted_AppliesEffectInOneStep(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	mustReceive(t, s, msg("e2", "f", 2, 7), Accepted)
	mustReceive(t, s, msg("e3", "g", 1, 1000), Accepted)

	if got, want := total(t, s, "f"), int64(12); got != want {
		t.Errorf("Total(f) = %d, want %d", got, want)
	}
	if got, want := total(t, s, "unknown"), int64(0); got != want {
		t.Errorf("Total(unknown) = %d, want %d", got, want)
	}
	next, err := s.NextExpected(context.Background(), "f")
	if err != nil || next != 3 {
		t.Errorf("NextExpected(f) = %d, %v; want 3, nil", next, err)
	}
	got := snap(t, s)
	want := Snapshot{
		SchemaVersion: 1,
		Flows:         []FlowState{{Flow: "f", NextExpected: 3, Total: 12}, {Flow: "g", NextExpected: 2, Total: 1000}},
		Receipts: []Receipt{
			{ID: "e1", Flow: "f", Seq: 1, Body: `{"delta": 5}`, Delta: 5},
			{ID: "e2", Flow: "f", Seq: 2, Body: `{"delta": 7}`, Delta: 7},
			{ID: "e3", Flow: "g", Seq: 1, Body: `{"delta": 1000}`, Delta: 1000},
		},
		Conflicts: []ConflictRecord{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Snapshot() =\n %s\nwant\n %s", js(got), js(want))
	}
}

// docs/contract.md §3 rule 1: same ID, flow, seq and body bytes → duplicate, no change.
func TestReceive_Rule1_DuplicateChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	m := msg("e1", "f", 1, 5)
	mustReceive(t, s, m, Accepted)
	before := snap(t, s)
	for range 3 {
		mustReceive(t, s, m, Duplicate)
	}
	assertUnchanged(t, s, before, "a duplicate")
	if got := total(t, s, "f"); got != 5 {
		t.Fatalf("Total(f) = %d, want 5 (the delta applied once)", got)
	}
}

// docs/contract.md §3 rule 1: same ID with another flow, seq or body → conflict, recorded
// with the receipt it clashed with; the total does not move.
func TestReceive_Rule1_SameIDOtherwiseDifferentIsConflict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		m    Message
	}{
		{"other body", msg("e1", "f", 1, 6)},
		{"same delta, other body bytes", Message{ID: "e1", Flow: "f", Seq: 1, Body: []byte(`{"delta":5}`)}},
		{"other flow", msg("e1", "g", 1, 5)},
		{"other seq", msg("e1", "f", 2, 5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, _ := open(t)
			mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
			mustReceive(t, s, c.m, Conflict)
			sn := snap(t, s)
			want := []ConflictRecord{{
				ID: c.m.ID, Flow: c.m.Flow, Seq: c.m.Seq, Body: string(c.m.Body),
				Rule: RuleIDReused, WithID: "e1", WithFlow: "f", WithSeq: 1,
			}}
			if !reflect.DeepEqual(sn.Conflicts, want) {
				t.Fatalf("Conflicts = %s, want %s", js(sn.Conflicts), js(want))
			}
			if len(sn.Receipts) != 1 || sn.Flows[0].Total != 5 || sn.Flows[0].NextExpected != 2 {
				t.Fatalf("a conflict moved the flow or receipts: %s", js(sn))
			}
		})
	}
}

// docs/contract.md §3 rule 2: a receipt for (flow, seq) under another ID → conflict.
func TestReceive_Rule2_SeqTakenByOtherIDIsConflict(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	mustReceive(t, s, msg("x1", "f", 1, 5), Conflict)
	got, err := s.Conflicts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []ConflictRecord{{ID: "x1", Flow: "f", Seq: 1, Body: `{"delta": 5}`,
		Rule: RuleSeqTaken, WithID: "e1", WithFlow: "f", WithSeq: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Conflicts() = %s, want %s", js(got), js(want))
	}
	if got := total(t, s, "f"); got != 5 {
		t.Fatalf("Total(f) = %d, want 5", got)
	}
}

// docs/contract.md §3 rule 3: seq above next-expected → gap; nothing skipped, nothing
// changes, and the flow still accepts the missing seq next.
func TestReceive_Rule3_GapChangesNothingAndSkipsNothing(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	before := snap(t, s)
	mustReceive(t, s, msg("e2", "f", 2, 5), Gap)
	assertUnchanged(t, s, before, "a gap on a new flow")

	mustReceive(t, s, msg("e1", "f", 1, 1), Accepted)
	before = snap(t, s)
	mustReceive(t, s, msg("e3", "f", 3, 5), Gap)
	assertUnchanged(t, s, before, "a gap")
	mustReceive(t, s, msg("e2", "f", 2, 5), Accepted)
	mustReceive(t, s, msg("e3", "f", 3, 5), Accepted)
	if got := total(t, s, "f"); got != 11 {
		t.Fatalf("Total(f) = %d, want 11", got)
	}
}

// docs/contract.md §3 rule 4: seq below next-expected with no receipt → conflict. The
// public API never makes that state (every seq below next-expected has a
// receipt, so rule 2 answers first); the test makes it by deleting a receipt
// behind the store's back, to prove the defensive branch.
func TestReceive_Rule4_BehindWithoutReceiptIsConflict(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	mustReceive(t, s, msg("e2", "f", 2, 5), Accepted)
	if _, err := s.db.Exec(`DELETE FROM receipts WHERE id = 'e1'`); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, s, msg("y1", "f", 1, 9), Conflict)
	got, err := s.Conflicts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []ConflictRecord{{ID: "y1", Flow: "f", Seq: 1, Body: `{"delta": 9}`,
		Rule: RuleSeqBehind, NextExpected: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Conflicts() = %s, want %s", js(got), js(want))
	}
	if got := total(t, s, "f"); got != 10 {
		t.Fatalf("Total(f) = %d, want 10", got)
	}
}

// docs/contract.md §3 rule 5: delta above MaxDelta → unsupported_delta, no change.
func TestReceive_Rule5_UnsupportedDeltaChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := open(t, WithMaxDelta(10))
	mustReceive(t, s, msg("e1", "f", 1, 10), Accepted)
	before := snap(t, s)
	mustReceive(t, s, msg("e2", "f", 2, 11), UnsupportedDelta)
	mustReceive(t, s, msg("e2", "f", 2, 11), UnsupportedDelta)
	assertUnchanged(t, s, before, "an unsupported delta")
}

// docs/contract.md §3: raising MaxDelta and replaying the byte-identical message that was
// refused gives accepted.
func TestReceive_RaisedMaxDeltaAcceptsTheSameMessage(t *testing.T) {
	t.Parallel()
	s, path := open(t, WithMaxDelta(10))
	m := msg("e1", "f", 1, 50)
	mustReceive(t, s, m, UnsupportedDelta)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, path, WithMaxDelta(100))
	mustReceive(t, s2, m, Accepted)
	mustReceive(t, s2, m, Duplicate)
	if got := total(t, s2, "f"); got != 50 {
		t.Fatalf("Total(f) = %d, want 50", got)
	}
}

// docs/contract.md §3 order: every case is a message that two rules match; the earlier
// rule must win.
func TestReceive_RuleOrder(t *testing.T) {
	t.Parallel()
	type step struct {
		m    Message
		want Outcome
	}
	cases := []struct {
		name     string
		maxDelta int
		setup    []Message // all accepted
		probe    step
		rule     string // the conflict rule recorded, "" for none
	}{
		{
			name:  "rule 1 before rule 3: ID reused with another body AND a gap is conflict",
			setup: []Message{msg("e1", "f", 1, 5)},
			probe: step{msg("e1", "f", 9, 6), Conflict}, rule: RuleIDReused,
		},
		{
			name:  "rule 1 before rule 2: ID reused on a seq taken by another ID is id_reused",
			setup: []Message{msg("e1", "f", 1, 5), msg("e2", "f", 2, 5)},
			probe: step{msg("e1", "f", 2, 5), Conflict}, rule: RuleIDReused,
		},
		{
			name:     "rule 1 before rule 5: a duplicate above today's cap is duplicate",
			maxDelta: 100, // the setup message is accepted with the default cap first
			setup:    []Message{msg("e1", "f", 1, 500)},
			probe:    step{msg("e1", "f", 1, 500), Duplicate},
		},
		{
			name:     "rule 1 before rule 5: ID reused with a delta above the cap is conflict",
			maxDelta: 100,
			setup:    []Message{msg("e1", "f", 1, 5)},
			probe:    step{msg("e1", "f", 2, 500), Conflict}, rule: RuleIDReused,
		},
		{
			name:  "rule 2 before rule 3: taken seq is conflict even for an unknown ID",
			setup: []Message{msg("e1", "f", 1, 5)},
			probe: step{msg("x", "f", 1, 5), Conflict}, rule: RuleSeqTaken,
		},
		{
			name:     "rule 2 before rule 5: taken seq with a delta above the cap is conflict",
			maxDelta: 100,
			setup:    []Message{msg("e1", "f", 1, 5)},
			probe:    step{msg("x", "f", 1, 500), Conflict}, rule: RuleSeqTaken,
		},
		{
			name:     "rule 3 before rule 5: a gap with a delta above the cap is gap",
			maxDelta: 100,
			setup:    []Message{msg("e1", "f", 1, 5)},
			probe:    step{msg("e3", "f", 3, 500), Gap},
		},
		{
			name:     "rule 3 before rule 5 on a new flow",
			maxDelta: 100,
			probe:    step{msg("e2", "new", 2, 500), Gap},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, path := open(t)
			for _, m := range c.setup {
				mustReceive(t, s, m, Accepted)
			}
			if c.maxDelta != 0 {
				_ = s.Close()
				s = reopen(t, path, WithMaxDelta(c.maxDelta))
			}
			before := snap(t, s)
			mustReceive(t, s, c.probe.m, c.probe.want)
			after := snap(t, s)
			if !reflect.DeepEqual(after.Flows, before.Flows) || !reflect.DeepEqual(after.Receipts, before.Receipts) {
				t.Fatalf("probe changed flows or receipts: %s", js(after))
			}
			var rules []string
			for _, cr := range after.Conflicts {
				rules = append(rules, cr.Rule)
			}
			var want []string
			if c.rule != "" {
				want = []string{c.rule}
			}
			if !reflect.DeepEqual(rules, want) {
				t.Fatalf("conflict rules recorded = %v, want %v", rules, want)
			}
		})
	}
}

// docs/contract.md §3 rule 4 before rule 5 (a state only reachable behind the store's
// back, as in TestReceive_Rule4_BehindWithoutReceiptIsConflict).
func TestReceive_RuleOrder_Rule4BeforeRule5(t *testing.T) {
	t.Parallel()
	s, _ := open(t, WithMaxDelta(10))
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	if _, err := s.db.Exec(`DELETE FROM receipts WHERE id = 'e1'`); err != nil {
		t.Fatal(err)
	}
	mustReceive(t, s, msg("y1", "f", 1, 500), Conflict)
}

// docs/contract.md §3: conflicts are kept, each distinct conflicting message once, and
// never move a total.
func TestConflicts_EachDistinctMessageRecordedOnce(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	a := msg("e1", "f", 1, 6) // rule 1
	b := msg("x", "f", 1, 5)  // rule 2
	for range 3 {
		mustReceive(t, s, a, Conflict)
		mustReceive(t, s, b, Conflict)
	}
	got, err := s.Conflicts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("len(Conflicts()) = %d, want 2 (one per distinct message): %s", len(got), js(got))
	}
	c := msg("e1", "f", 1, 7) // another body: another distinct message
	mustReceive(t, s, c, Conflict)
	got, _ = s.Conflicts(context.Background())
	if len(got) != 3 {
		t.Fatalf("len(Conflicts()) = %d, want 3: %s", len(got), js(got))
	}
	if tot := total(t, s, "f"); tot != 5 {
		t.Fatalf("Total(f) = %d, want 5", tot)
	}
}

// docs/contract.md §3: a bad body is ErrInvalidBody, checked first, and changes nothing.
func TestReceive_InvalidBody(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"empty":                 ``,
		"not json":              `delta=5`,
		"truncated":             `{"delta": 5`,
		"array":                 `[5]`,
		"bare number":           `5`,
		"null":                  `null`,
		"empty object":          `{}`,
		"missing delta":         `{"d": 5}`,
		"string delta":          `{"delta": "5"}`,
		"bool delta":            `{"delta": true}`,
		"null delta":            `{"delta": null}`,
		"object delta":          `{"delta": {"n": 5}}`,
		"fraction":              `{"delta": 1.5}`,
		"integral fraction 1.0": `{"delta": 1.0}`,
		"exponent 1e2":          `{"delta": 1e2}`,
		"exponent 1E2":          `{"delta": 1E2}`,
		"leading zero":          `{"delta": 05}`,
		"plus sign":             `{"delta": +5}`,
		"zero":                  `{"delta": 0}`,
		"negative":              `{"delta": -5}`,
		"negative zero":         `{"delta": -0}`,
		"1001":                  `{"delta": 1001}`,
		"huge":                  `{"delta": 99999999999999999999999999}`,
		"extra field after":     `{"delta": 5, "x": 1}`,
		"extra field before":    `{"x": 1, "delta": 5}`,
		"duplicate key":         `{"delta": 5, "delta": 5}`,
		"escaped key":           `{"\u0064elta": 5}`,
		"key case":              `{"Delta": 5}`,
		"trailing garbage":      `{"delta": 5}x`,
		"two objects":           `{"delta": 5}{"delta": 5}`,
		"trailing comma":        `{"delta": 5,}`,
		"single quotes":         `{'delta': 5}`,
		"nul byte":              "{\"delta\": 5}\x00",
		"bom":                   "\ufeff{\"delta\": 5}",
		"too long":              `{"delta": 5}` + strings.Repeat(" ", MaxBodyLen),
	}
	s, _ := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	before := snap(t, s)
	for name, b := range bad {
		for _, m := range []Message{
			{ID: "n1", Flow: "f", Seq: 2, Body: []byte(b)}, // would be accepted
			{ID: "e1", Flow: "f", Seq: 1, Body: []byte(b)}, // would be rule 1: body is checked first
			{ID: "", Flow: "", Seq: 0, Body: []byte(b)},    // body is checked before ID, flow, seq
		} {
			out, err := s.Receive(context.Background(), m)
			if !errors.Is(err, ErrInvalidBody) {
				t.Errorf("%s: Receive(%q, body %q) = %q, %v; want ErrInvalidBody", name, m.ID, b, out, err)
			}
		}
	}
	assertUnchanged(t, s, before, "invalid bodies")
}

// The body grammar accepts exactly {"delta": N} with JSON whitespace.
func TestParseDelta_Accepts(t *testing.T) {
	t.Parallel()
	ok := map[string]int64{
		`{"delta":1}`:                   1,
		`{"delta": 1000}`:               1000,
		" \t\r\n{ \"delta\" :\n42 } \n": 42,
		`{"delta":999}`:                 999,
		strings.Repeat(" ", MaxBodyLen-len(`{"delta":7}`)) + `{"delta":7}`: 7,
	}
	for b, want := range ok {
		got, err := receiver.ParseDelta([]byte(b))
		if err != nil || got != want {
			t.Errorf("receiver.ParseDelta(%q) = %d, %v; want %d, nil", b, got, err, want)
		}
	}
}

// Bad ID, Flow or Seq: ErrInvalid, nothing changes.
func TestReceive_InvalidMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", MaxNameLen+1)
	cases := map[string]Message{
		"empty ID":            {ID: "", Flow: "f", Seq: 1},
		"long ID":             {ID: long, Flow: "f", Seq: 1},
		"control char in ID":  {ID: "a\nb", Flow: "f", Seq: 1},
		"invalid UTF-8 in ID": {ID: "a\xffb", Flow: "f", Seq: 1},
		"empty flow":          {ID: "e", Flow: "", Seq: 1},
		"long flow":           {ID: "e", Flow: long, Seq: 1},
		"tab in flow":         {ID: "e", Flow: "a\tb", Seq: 1},
		"zero-width in flow":  {ID: "e", Flow: "a\u200bb", Seq: 1},
		"seq 0":               {ID: "e", Flow: "f", Seq: 0},
		"negative seq":        {ID: "e", Flow: "f", Seq: -1},
	}
	s, _ := open(t)
	before := snap(t, s)
	for name, m := range cases {
		m.Body = body(5)
		out, err := s.Receive(context.Background(), m)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Receive() = %q, %v; want ErrInvalid", name, out, err)
		}
	}
	assertUnchanged(t, s, before, "invalid messages")
	// The bounds themselves are fine.
	edge := strings.Repeat("é", MaxNameLen/2) // 200 bytes
	mustReceive(t, s, Message{ID: edge, Flow: "a flow with spaces ✓", Seq: 1, Body: body(1)}, Accepted)
	if _, err := s.Total(context.Background(), ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Total(\"\") error = %v, want ErrInvalid", err)
	}
}
