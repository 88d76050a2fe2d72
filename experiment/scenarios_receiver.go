package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairrelay/fairrelay/receiver"
)

// receiverScenarios are the receiver's clauses, driven directly.
func receiverScenarios() []Scenario {
	return []Scenario{{
		Name:   "receiver-duplicate-conflict-gap",
		Clause: "§3 (duplicate, conflict recorded once, gap, invalid body)",
		Shows:  "the same message twice is a duplicate; a reused ID or a taken (flow, seq) is a conflict recorded once per distinct message; a message ahead of the flow is a gap that changes nothing until the missing one arrives; bad bodies are refused",
		Run:    receiverDuplicateConflictGap,
	}}
}

func receiverDuplicateConflictGap(ctx context.Context, lab *Lab) error {
	r, err := lab.Receiver()
	if err != nil {
		return err
	}
	msg := func(id string, seq int64, delta int) receiver.Message {
		return receiver.Message{ID: id, Flow: "r", Seq: seq, Body: Body(delta)}
	}
	steps := []struct {
		m    receiver.Message
		want receiver.Outcome
	}{
		{msg("r-1", 1, 5), receiver.Accepted},
		{msg("r-1", 1, 5), receiver.Duplicate},
		{msg("r-1", 1, 6), receiver.Conflict},  // same ID, other body
		{msg("r-1", 2, 5), receiver.Conflict},  // same ID, other seq
		{msg("x-1", 1, 5), receiver.Conflict},  // (r, 1) taken by r-1
		{msg("r-3", 3, 9), receiver.Gap},       // next expected is 2
		{msg("r-2", 2, 7), receiver.Accepted},  // fills the gap
		{msg("r-3", 3, 9), receiver.Accepted},  // now in order
		{msg("r-1", 1, 6), receiver.Conflict},  // the same conflicting message again
		{msg("r-3", 3, 9), receiver.Duplicate}, // a late redelivery
	}
	var got, want []receiver.Outcome
	for _, s := range steps {
		out, err := lab.receive(ctx, r, s.m)
		if err != nil {
			return err
		}
		got = append(got, out)
		want = append(want, s.want)
	}
	lab.Equal("outcomes in order", got, want)
	cs, err := r.Conflicts(ctx)
	if err != nil {
		return err
	}
	var rules []string
	for _, c := range cs {
		rules = append(rules, fmt.Sprintf("%s/%d %s with %s", c.ID, c.Seq, c.Rule, c.WithID))
	}
	lab.Equal("each distinct conflicting message recorded once", rules, []string{
		"r-1/1 id_reused with r-1", "x-1/1 seq_taken with r-1", "r-1/2 id_reused with r-1"})
	before, err := receiverJSON(ctx, r)
	if err != nil {
		return err
	}
	for _, body := range []string{`{"delta":0}`, `{"delta":1001}`, `{"delta":1.5}`, `not json`, `{"delta":4}x`} {
		_, err := r.Receive(ctx, receiver.Message{ID: "r-4", Flow: "r", Seq: 4, Body: []byte(body)})
		lab.expectErr("body "+body+" is invalid", err, receiver.ErrInvalidBody)
	}
	after, err := receiverJSON(ctx, r)
	if err != nil {
		return err
	}
	lab.Check("invalid bodies change nothing", bytes.Equal(before, after), "receiver snapshot byte-identical: %v", bytes.Equal(before, after))
	return lab.expectTotal(ctx, r, "r", 21)
}

// receiverJSON marshals the receiver's snapshot as it is.
func receiverJSON(ctx context.Context, r ReceiverStore) ([]byte, error) {
	s, err := r.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}
