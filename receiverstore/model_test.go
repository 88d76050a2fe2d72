package receiverstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/fairrelay/fairrelay/receiver"
)

// model is docs/contract.md §3 written as plainly as possible, in memory, to check the
// store against.
type model struct {
	maxDelta  int64
	receipts  map[string]Message // by ID
	bySeq     map[string]string  // flow+"\x00"+seq → ID
	next      map[string]int64
	total     map[string]int64
	conflicts map[string]bool // distinct conflicting messages
}

func newModel(maxDelta int64) *model {
	return &model{
		maxDelta:  maxDelta,
		receipts:  map[string]Message{},
		bySeq:     map[string]string{},
		next:      map[string]int64{},
		total:     map[string]int64{},
		conflicts: map[string]bool{},
	}
}

func seqKey(flow string, seq int64) string { return fmt.Sprintf("%s\x00%d", flow, seq) }

// receive returns the outcome, or an error for invalid input (using the
// store's own validation, which the body tests pin down separately).
func (m *model) receive(msg Message) (Outcome, error) {
	delta, err := receiver.Validate(msg)
	if err != nil {
		return "", err
	}
	conflict := func() (Outcome, error) {
		m.conflicts[fmt.Sprintf("%q %q %d %q", msg.ID, msg.Flow, msg.Seq, msg.Body)] = true
		return Conflict, nil
	}
	if r, ok := m.receipts[msg.ID]; ok {
		if r.Flow == msg.Flow && r.Seq == msg.Seq && bytes.Equal(r.Body, msg.Body) {
			return Duplicate, nil
		}
		return conflict()
	}
	if _, ok := m.bySeq[seqKey(msg.Flow, msg.Seq)]; ok {
		return conflict()
	}
	next := m.next[msg.Flow]
	if next == 0 {
		next = 1
	}
	switch {
	case msg.Seq > next:
		return Gap, nil
	case msg.Seq < next:
		return conflict()
	case delta > m.maxDelta:
		return UnsupportedDelta, nil
	}
	m.receipts[msg.ID] = msg
	m.bySeq[seqKey(msg.Flow, msg.Seq)] = msg.ID
	m.next[msg.Flow] = next + 1
	m.total[msg.Flow] += delta
	return Accepted, nil
}

// check compares the model with a snapshot of the store.
func (m *model) check(sn Snapshot) error {
	if len(sn.Receipts) != len(m.receipts) {
		return fmt.Errorf("store has %d receipts, model %d", len(sn.Receipts), len(m.receipts))
	}
	for _, r := range sn.Receipts {
		want, ok := m.receipts[r.ID]
		if !ok || want.Flow != r.Flow || want.Seq != r.Seq || string(want.Body) != r.Body {
			return fmt.Errorf("store receipt %+v, model %+v (found %v)", r, want, ok)
		}
	}
	if len(sn.Flows) != len(m.next) {
		return fmt.Errorf("store has %d flows, model %d", len(sn.Flows), len(m.next))
	}
	for _, f := range sn.Flows {
		if f.NextExpected != m.next[f.Flow] || f.Total != m.total[f.Flow] {
			return fmt.Errorf("store flow %+v, model next %d total %d", f, m.next[f.Flow], m.total[f.Flow])
		}
	}
	if len(sn.Conflicts) != len(m.conflicts) {
		return fmt.Errorf("store has %d conflicts, model %d", len(sn.Conflicts), len(m.conflicts))
	}
	return nil
}

// msgGen makes messages over a few IDs, flows and seqs, so that every
// outcome and every invalid input turns up. Messages are built from small
// pools and often repeat an earlier message, so the same bytes recur
// (duplicates) and clash (conflicts).
type msgGen struct {
	r    *rand.Rand
	n    int
	past []Message
}

func (g *msgGen) messages(n int) []Message {
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	flows := []string{"x", "y", "z"}
	bodies := [][]byte{
		body(1), body(2), body(7), body(999), body(1000),
		[]byte(`{"delta":7}`),  // same delta as body(7), other bytes
		[]byte(`{"delta": 0}`), // invalid
		[]byte(`nope`),         // invalid
	}
	out := make([]Message, n)
	for i := range out {
		g.n++
		switch r := g.r; {
		case len(g.past) > 0 && r.IntN(4) == 0: // a redelivery
			out[i] = g.past[r.IntN(len(g.past))]
		case r.IntN(3) == 0: // a fresh ID, a plausible next step
			out[i] = Message{
				ID:   fmt.Sprintf("n%d", g.n),
				Flow: flows[r.IntN(len(flows))],
				Seq:  1 + int64(r.IntN(4)),
				Body: bodies[r.IntN(len(bodies))],
			}
		default:
			out[i] = Message{
				ID:   ids[r.IntN(len(ids))],
				Flow: flows[r.IntN(len(flows))],
				Seq:  int64(r.IntN(5)), // 0 is invalid
				Body: bodies[r.IntN(len(bodies))],
			}
		}
		g.past = append(g.past, out[i])
	}
	return out
}

// errClass reduces an error to the sentinel it wraps, for comparisons.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrInvalidBody):
		return "ErrInvalidBody"
	case errors.Is(err, ErrInvalid):
		return "ErrInvalid"
	}
	return "other: " + err.Error()
}
