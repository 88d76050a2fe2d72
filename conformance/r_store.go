package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fairrelay/fairrelay/receiver"
	"math"
	"reflect"
	"strings"
	"testing"
)

func rbody(delta int) []byte { return fmt.Appendf(nil, `{"delta": %d}`, delta) }

func rmsg(id, flow string, seq int64, delta int) receiver.Message {
	return receiver.Message{ID: id, Flow: flow, Seq: seq, Body: rbody(delta)}
}

func rsnap(t testing.TB, s Receiver) receiver.Snapshot {
	t.Helper()
	sn, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() error = %v", err)
	}
	return sn
}

func rmustReceive(t testing.TB, s Receiver, m receiver.Message, want receiver.Outcome) {
	t.Helper()
	got, err := s.Receive(context.Background(), m)
	if err != nil {
		t.Fatalf("Receive(%s/%s/%d %s) error = %v", m.ID, m.Flow, m.Seq, m.Body, err)
	}
	if got != want {
		t.Fatalf("Receive(%s/%s/%d %s) = %q, want %q", m.ID, m.Flow, m.Seq, m.Body, got, want)
	}
}

// rassertUnchanged fails when the snapshot differs from before.
func rassertUnchanged(t testing.TB, s Receiver, before receiver.Snapshot, what string) {
	t.Helper()
	if after := rsnap(t, s); !reflect.DeepEqual(after, before) {
		t.Fatalf("%s changed the store:\n got %s\nwant %s", what, rjs(after), rjs(before))
	}
}

func rjs(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

func rtotal(t testing.TB, s Receiver, flow string) int64 {
	t.Helper()
	n, err := s.Total(context.Background(), flow)
	if err != nil {
		t.Fatalf("Total(%q) error = %v", flow, err)
	}
	return n
}

// docs/contract.md §3 rule 6: accepted = receipt + total += delta + next-expected += 1.
func receiverReceive_Accepted_AppliesEffectInOneStep(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, _ := rk.open(t)
	rmustReceive(t, s, rmsg("e1", "f", 1, 5), receiver.Accepted)
	rmustReceive(t, s, rmsg("e2", "f", 2, 7), receiver.Accepted)
	rmustReceive(t, s, rmsg("e3", "g", 1, 1000), receiver.Accepted)

	if got, want := rtotal(t, s, "f"), int64(12); got != want {
		t.Errorf("Total(f) = %d, want %d", got, want)
	}
	if got, want := rtotal(t, s, "unknown"), int64(0); got != want {
		t.Errorf("Total(unknown) = %d, want %d", got, want)
	}
	next, err := s.NextExpected(context.Background(), "f")
	if err != nil || next != 3 {
		t.Errorf("NextExpected(f) = %d, %v; want 3, nil", next, err)
	}
	got := rsnap(t, s)
	want := receiver.Snapshot{
		SchemaVersion: 1,
		Flows:         []receiver.FlowState{{Flow: "f", NextExpected: 3, Total: 12}, {Flow: "g", NextExpected: 2, Total: 1000}},
		Receipts: []receiver.Receipt{
			{ID: "e1", Flow: "f", Seq: 1, Body: `{"delta": 5}`, Delta: 5},
			{ID: "e2", Flow: "f", Seq: 2, Body: `{"delta": 7}`, Delta: 7},
			{ID: "e3", Flow: "g", Seq: 1, Body: `{"delta": 1000}`, Delta: 1000},
		},
		Conflicts: []receiver.ConflictRecord{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Snapshot() =\n %s\nwant\n %s", rjs(got), rjs(want))
	}
}

// docs/contract.md §3 rule 1: same ID, flow, seq and body bytes → duplicate, no change.
func receiverReceive_Rule1_DuplicateChangesNothing(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, _ := rk.open(t)
	m := rmsg("e1", "f", 1, 5)
	rmustReceive(t, s, m, receiver.Accepted)
	before := rsnap(t, s)
	for range 3 {
		rmustReceive(t, s, m, receiver.Duplicate)
	}
	rassertUnchanged(t, s, before, "a duplicate")
	if got := rtotal(t, s, "f"); got != 5 {
		t.Fatalf("Total(f) = %d, want 5 (the delta applied once)", got)
	}
}

// docs/contract.md §3 rule 1: same ID with another flow, seq or body → conflict, recorded
// with the receipt it clashed with; the total does not move.
func receiverReceive_Rule1_SameIDOtherwiseDifferentIsConflict(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	cases := []struct {
		name string
		m    receiver.Message
	}{
		{"other body", rmsg("e1", "f", 1, 6)},
		{"same delta, other body bytes", receiver.Message{ID: "e1", Flow: "f", Seq: 1, Body: []byte(`{"delta":5}`)}},
		{"other flow", rmsg("e1", "g", 1, 5)},
		{"other seq", rmsg("e1", "f", 2, 5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, _ := rk.open(t)
			rmustReceive(t, s, rmsg("e1", "f", 1, 5), receiver.Accepted)
			rmustReceive(t, s, c.m, receiver.Conflict)
			sn := rsnap(t, s)
			want := []receiver.ConflictRecord{{
				ID: c.m.ID, Flow: c.m.Flow, Seq: c.m.Seq, Body: string(c.m.Body),
				Rule: receiver.RuleIDReused, WithID: "e1", WithFlow: "f", WithSeq: 1,
			}}
			if !reflect.DeepEqual(sn.Conflicts, want) {
				t.Fatalf("Conflicts = %s, want %s", rjs(sn.Conflicts), rjs(want))
			}
			if len(sn.Receipts) != 1 || sn.Flows[0].Total != 5 || sn.Flows[0].NextExpected != 2 {
				t.Fatalf("a conflict moved the flow or receipts: %s", rjs(sn))
			}
		})
	}
}

// docs/contract.md §3 rule 2: a receipt for (flow, seq) under another ID → conflict.
func receiverReceive_Rule2_SeqTakenByOtherIDIsConflict(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, _ := rk.open(t)
	rmustReceive(t, s, rmsg("e1", "f", 1, 5), receiver.Accepted)
	rmustReceive(t, s, rmsg("x1", "f", 1, 5), receiver.Conflict)
	got, err := s.Conflicts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []receiver.ConflictRecord{{ID: "x1", Flow: "f", Seq: 1, Body: `{"delta": 5}`,
		Rule: receiver.RuleSeqTaken, WithID: "e1", WithFlow: "f", WithSeq: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Conflicts() = %s, want %s", rjs(got), rjs(want))
	}
	if got := rtotal(t, s, "f"); got != 5 {
		t.Fatalf("Total(f) = %d, want 5", got)
	}
}

// docs/contract.md §3 rule 3: seq above next-expected → gap; nothing skipped, nothing
// changes, and the flow still accepts the missing seq next.
func receiverReceive_Rule3_GapChangesNothingAndSkipsNothing(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, _ := rk.open(t)
	before := rsnap(t, s)
	rmustReceive(t, s, rmsg("e2", "f", 2, 5), receiver.Gap)
	rassertUnchanged(t, s, before, "a gap on a new flow")

	rmustReceive(t, s, rmsg("e1", "f", 1, 1), receiver.Accepted)
	before = rsnap(t, s)
	rmustReceive(t, s, rmsg("e3", "f", 3, 5), receiver.Gap)
	rassertUnchanged(t, s, before, "a gap")
	rmustReceive(t, s, rmsg("e2", "f", 2, 5), receiver.Accepted)
	rmustReceive(t, s, rmsg("e3", "f", 3, 5), receiver.Accepted)
	if got := rtotal(t, s, "f"); got != 11 {
		t.Fatalf("Total(f) = %d, want 11", got)
	}

	// The largest seq is a gap like any other, alone and in a batch beside
	// a message that is accepted.
	before = rsnap(t, s)
	rmustReceive(t, s, rmsg("big", "g", math.MaxInt64, 5), receiver.Gap)
	rassertUnchanged(t, s, before, "a gap at the largest seq")
	rs, err := s.ReceiveBatch(context.Background(), []receiver.Message{rmsg("g1", "g", 1, 1), rmsg("big", "h", math.MaxInt64, 1)})
	if err != nil || len(rs) != 2 || rs[0].Outcome != receiver.Accepted || rs[1].Outcome != receiver.Gap {
		t.Fatalf("ReceiveBatch(g1, a gap at the largest seq) = %+v, %v; want accepted, gap", rs, err)
	}
}

// docs/contract.md §3 rule 4: seq below next-expected with no receipt → conflict. The
// public API never makes that state (every seq below next-expected has a
// receipt, so rule 2 answers first); the test makes it by deleting a receipt
// behind the store's back, to prove the defensive branch.
func receiverReceive_Rule4_BehindWithoutReceiptIsConflict(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, loc := rk.open(t)
	rmustReceive(t, s, rmsg("e1", "f", 1, 5), receiver.Accepted)
	rmustReceive(t, s, rmsg("e2", "f", 2, 5), receiver.Accepted)
	rk.exec(t, loc, `DELETE FROM receipts WHERE id = 'e1'`)
	rmustReceive(t, s, rmsg("y1", "f", 1, 9), receiver.Conflict)
	got, err := s.Conflicts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []receiver.ConflictRecord{{ID: "y1", Flow: "f", Seq: 1, Body: `{"delta": 9}`,
		Rule: receiver.RuleSeqBehind, NextExpected: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Conflicts() = %s, want %s", rjs(got), rjs(want))
	}
	if got := rtotal(t, s, "f"); got != 10 {
		t.Fatalf("Total(f) = %d, want 10", got)
	}
}

// docs/contract.md §3 rule 5: delta above MaxDelta → unsupported_delta, no change.
func receiverReceive_Rule5_UnsupportedDeltaChangesNothing(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, _ := rk.open(t, withMaxDelta(10))
	rmustReceive(t, s, rmsg("e1", "f", 1, 10), receiver.Accepted)
	before := rsnap(t, s)
	rmustReceive(t, s, rmsg("e2", "f", 2, 11), receiver.UnsupportedDelta)
	rmustReceive(t, s, rmsg("e2", "f", 2, 11), receiver.UnsupportedDelta)
	rassertUnchanged(t, s, before, "an unsupported delta")
}

// docs/contract.md §3: raising MaxDelta and replaying the byte-identical message that was
// refused gives accepted.
func receiverReceive_RaisedMaxDeltaAcceptsTheSameMessage(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, path := rk.open(t, withMaxDelta(10))
	m := rmsg("e1", "f", 1, 50)
	rmustReceive(t, s, m, receiver.UnsupportedDelta)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := rk.reopen(t, path, withMaxDelta(100))
	rmustReceive(t, s2, m, receiver.Accepted)
	rmustReceive(t, s2, m, receiver.Duplicate)
	if got := rtotal(t, s2, "f"); got != 50 {
		t.Fatalf("Total(f) = %d, want 50", got)
	}
}

// docs/contract.md §3 order: every case is a message that two rules match; the earlier
// rule must win.
func receiverReceive_RuleOrder(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	type step struct {
		m    receiver.Message
		want receiver.Outcome
	}
	cases := []struct {
		name     string
		maxDelta int
		setup    []receiver.Message // all accepted
		probe    step
		rule     string // the conflict rule recorded, "" for none
	}{
		{
			name:  "rule 1 before rule 3: ID reused with another body AND a gap is conflict",
			setup: []receiver.Message{rmsg("e1", "f", 1, 5)},
			probe: step{rmsg("e1", "f", 9, 6), receiver.Conflict}, rule: receiver.RuleIDReused,
		},
		{
			name:  "rule 1 before rule 2: ID reused on a seq taken by another ID is id_reused",
			setup: []receiver.Message{rmsg("e1", "f", 1, 5), rmsg("e2", "f", 2, 5)},
			probe: step{rmsg("e1", "f", 2, 5), receiver.Conflict}, rule: receiver.RuleIDReused,
		},
		{
			name:     "rule 1 before rule 5: a duplicate above today's cap is duplicate",
			maxDelta: 100, // the setup message is accepted with the default cap first
			setup:    []receiver.Message{rmsg("e1", "f", 1, 500)},
			probe:    step{rmsg("e1", "f", 1, 500), receiver.Duplicate},
		},
		{
			name:     "rule 1 before rule 5: ID reused with a delta above the cap is conflict",
			maxDelta: 100,
			setup:    []receiver.Message{rmsg("e1", "f", 1, 5)},
			probe:    step{rmsg("e1", "f", 2, 500), receiver.Conflict}, rule: receiver.RuleIDReused,
		},
		{
			name:  "rule 2 before rule 3: taken seq is conflict even for an unknown ID",
			setup: []receiver.Message{rmsg("e1", "f", 1, 5)},
			probe: step{rmsg("x", "f", 1, 5), receiver.Conflict}, rule: receiver.RuleSeqTaken,
		},
		{
			name:     "rule 2 before rule 5: taken seq with a delta above the cap is conflict",
			maxDelta: 100,
			setup:    []receiver.Message{rmsg("e1", "f", 1, 5)},
			probe:    step{rmsg("x", "f", 1, 500), receiver.Conflict}, rule: receiver.RuleSeqTaken,
		},
		{
			name:     "rule 3 before rule 5: a gap with a delta above the cap is gap",
			maxDelta: 100,
			setup:    []receiver.Message{rmsg("e1", "f", 1, 5)},
			probe:    step{rmsg("e3", "f", 3, 500), receiver.Gap},
		},
		{
			name:     "rule 3 before rule 5 on a new flow",
			maxDelta: 100,
			probe:    step{rmsg("e2", "new", 2, 500), receiver.Gap},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, path := rk.open(t)
			for _, m := range c.setup {
				rmustReceive(t, s, m, receiver.Accepted)
			}
			if c.maxDelta != 0 {
				_ = s.Close()
				s = rk.reopen(t, path, withMaxDelta(c.maxDelta))
			}
			before := rsnap(t, s)
			rmustReceive(t, s, c.probe.m, c.probe.want)
			after := rsnap(t, s)
			if !reflect.DeepEqual(after.Flows, before.Flows) || !reflect.DeepEqual(after.Receipts, before.Receipts) {
				t.Fatalf("probe changed flows or receipts: %s", rjs(after))
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
func receiverReceive_RuleOrder_Rule4BeforeRule5(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, loc := rk.open(t, withMaxDelta(10))
	rmustReceive(t, s, rmsg("e1", "f", 1, 5), receiver.Accepted)
	rk.exec(t, loc, `DELETE FROM receipts WHERE id = 'e1'`)
	rmustReceive(t, s, rmsg("y1", "f", 1, 500), receiver.Conflict)
}

// docs/contract.md §3: conflicts are kept, each distinct conflicting message once, and
// never move a total.
func receiverConflicts_EachDistinctMessageRecordedOnce(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, _ := rk.open(t)
	rmustReceive(t, s, rmsg("e1", "f", 1, 5), receiver.Accepted)
	a := rmsg("e1", "f", 1, 6) // rule 1
	b := rmsg("x", "f", 1, 5)  // rule 2
	for range 3 {
		rmustReceive(t, s, a, receiver.Conflict)
		rmustReceive(t, s, b, receiver.Conflict)
	}
	got, err := s.Conflicts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("len(Conflicts()) = %d, want 2 (one per distinct message): %s", len(got), rjs(got))
	}
	c := rmsg("e1", "f", 1, 7) // another body: another distinct message
	rmustReceive(t, s, c, receiver.Conflict)
	got, _ = s.Conflicts(context.Background())
	if len(got) != 3 {
		t.Fatalf("len(Conflicts()) = %d, want 3: %s", len(got), rjs(got))
	}
	if tot := rtotal(t, s, "f"); tot != 5 {
		t.Fatalf("Total(f) = %d, want 5", tot)
	}
}

// docs/contract.md §3: a bad body is receiver.ErrInvalidBody, checked first, and changes nothing;
// the error names the rule the body broke (receiver.BodyRuleOf), the same on every backend.
func receiverReceive_InvalidBody(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	bad := map[string]struct {
		body string
		rule receiver.BodyRule
	}{
		"empty":                 {``, receiver.BodyNotJSON},
		"not json":              {`delta=5`, receiver.BodyNotJSON},
		"truncated":             {`{"delta": 5`, receiver.BodyNotJSON},
		"array":                 {`[5]`, receiver.BodyNotAnObject},
		"bare number":           {`5`, receiver.BodyNotAnObject},
		"null":                  {`null`, receiver.BodyNotAnObject},
		"empty object":          {`{}`, receiver.BodyMissingDelta},
		"missing delta":         {`{"d": 5}`, receiver.BodyUnknownField},
		"string delta":          {`{"delta": "5"}`, receiver.BodyNotAnInteger},
		"bool delta":            {`{"delta": true}`, receiver.BodyNotAnInteger},
		"null delta":            {`{"delta": null}`, receiver.BodyNotAnInteger},
		"object delta":          {`{"delta": {"n": 5}}`, receiver.BodyNotAnInteger},
		"fraction":              {`{"delta": 1.5}`, receiver.BodyNotAnInteger},
		"integral fraction 1.0": {`{"delta": 1.0}`, receiver.BodyNotAnInteger},
		"exponent 1e2":          {`{"delta": 1e2}`, receiver.BodyNotAnInteger},
		"exponent 1E2":          {`{"delta": 1E2}`, receiver.BodyNotAnInteger},
		"leading zero":          {`{"delta": 05}`, receiver.BodyNotJSON},
		"plus sign":             {`{"delta": +5}`, receiver.BodyNotJSON},
		"zero":                  {`{"delta": 0}`, receiver.BodyDeltaOutOfRange},
		"negative":              {`{"delta": -5}`, receiver.BodyDeltaOutOfRange},
		"negative zero":         {`{"delta": -0}`, receiver.BodyDeltaOutOfRange},
		"1001":                  {`{"delta": 1001}`, receiver.BodyDeltaOutOfRange},
		"huge":                  {`{"delta": 99999999999999999999999999}`, receiver.BodyDeltaOutOfRange},
		"extra field after":     {`{"delta": 5, "x": 1}`, receiver.BodyUnknownField},
		"extra field before":    {`{"x": 1, "delta": 5}`, receiver.BodyUnknownField},
		"duplicate key":         {`{"delta": 5, "delta": 5}`, receiver.BodyDuplicateField},
		"escaped key":           {`{"\u0064elta": 5}`, receiver.BodyEscapedName},
		"key case":              {`{"Delta": 5}`, receiver.BodyUnknownField},
		"trailing garbage":      {`{"delta": 5}x`, receiver.BodyTrailingData},
		"two objects":           {`{"delta": 5}{"delta": 5}`, receiver.BodyTrailingData},
		"trailing comma":        {`{"delta": 5,}`, receiver.BodyNotJSON},
		"single quotes":         {`{'delta': 5}`, receiver.BodyNotJSON},
		"nul byte":              {"{\"delta\": 5}\x00", receiver.BodyTrailingData},
		"bom":                   {"\ufeff{\"delta\": 5}", receiver.BodyNotJSON},
		"too long":              {`{"delta": 5}` + strings.Repeat(" ", receiver.MaxBodyLen), receiver.BodyTooLarge},
	}
	s, _ := rk.open(t)
	rmustReceive(t, s, rmsg("e1", "f", 1, 5), receiver.Accepted)
	before := rsnap(t, s)
	for name, c := range bad {
		b := c.body
		for _, m := range []receiver.Message{
			{ID: "n1", Flow: "f", Seq: 2, Body: []byte(b)}, // would be accepted
			{ID: "e1", Flow: "f", Seq: 1, Body: []byte(b)}, // would be rule 1: body is checked first
			{ID: "", Flow: "", Seq: 0, Body: []byte(b)},    // body is checked before ID, flow, seq
		} {
			out, err := s.Receive(context.Background(), m)
			if !errors.Is(err, receiver.ErrInvalidBody) {
				t.Errorf("%s: Receive(%q, body %q) = %q, %v; want receiver.ErrInvalidBody", name, m.ID, b, out, err)
			}
			if rule, ok := receiver.BodyRuleOf(err); !ok || rule != c.rule {
				t.Errorf("%s: Receive(%q) names rule %q (%v), want %q", name, m.ID, rule, ok, c.rule)
			}
		}
	}
	rassertUnchanged(t, s, before, "invalid bodies")
}

// The body grammar accepts exactly {"delta": N} with JSON whitespace.
func receiverParseDelta_Accepts(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	ok := map[string]int64{
		`{"delta":1}`:                   1,
		`{"delta": 1000}`:               1000,
		" \t\r\n{ \"delta\" :\n42 } \n": 42,
		`{"delta":999}`:                 999,
		strings.Repeat(" ", receiver.MaxBodyLen-len(`{"delta":7}`)) + `{"delta":7}`: 7,
	}
	// The backend reads bodies with its own parser: each accepted body is
	// Accepted by Receive and adds its delta to a flow of its own.
	s, _ := rk.open(t, withMaxDelta(1000))
	i := 0
	for b, want := range ok {
		got, err := receiver.ParseDelta([]byte(b))
		if err != nil || got != want {
			t.Errorf("receiver.ParseDelta(%q) = %d, %v; want %d, nil", b, got, err, want)
		}
		i++
		flow := fmt.Sprintf("f%d", i)
		rmustReceive(t, s, receiver.Message{ID: flow, Flow: flow, Seq: 1, Body: []byte(b)}, receiver.Accepted)
		if got := rtotal(t, s, flow); got != want {
			t.Errorf("Receive(%q) total = %d, want %d", b, got, want)
		}
	}
}

// Bad ID, Flow or Seq: receiver.ErrInvalid, nothing changes.
func receiverReceive_InvalidMessage(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	long := strings.Repeat("a", receiver.MaxNameLen+1)
	cases := map[string]receiver.Message{
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
	s, _ := rk.open(t)
	before := rsnap(t, s)
	for name, m := range cases {
		m.Body = rbody(5)
		out, err := s.Receive(context.Background(), m)
		if !errors.Is(err, receiver.ErrInvalid) {
			t.Errorf("%s: Receive() = %q, %v; want receiver.ErrInvalid", name, out, err)
		}
	}
	rassertUnchanged(t, s, before, "invalid messages")
	// The bounds themselves are fine.
	edge := strings.Repeat("é", receiver.MaxNameLen/2) // 200 bytes
	rmustReceive(t, s, receiver.Message{ID: edge, Flow: "a flow with spaces ✓", Seq: 1, Body: rbody(1)}, receiver.Accepted)
	if _, err := s.Total(context.Background(), ""); !errors.Is(err, receiver.ErrInvalid) {
		t.Errorf("Total(\"\") error = %v, want receiver.ErrInvalid", err)
	}
}
