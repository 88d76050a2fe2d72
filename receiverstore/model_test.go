package receiverstore

import (
	"bytes"
	"errors"
	"fmt"

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
