package relay_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/relay"
)

// NewLocal maps every receiver answer to the settle reason an HTTP delivery to
// inbox.NewServer gets (relay.NewHTTP's status mapping), on a real receiver.db.
func TestLocal_Mapping(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := receiverstore.Open(filepath.Join(dir, "r.db"), receiverstore.WithMaxDelta(10))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	failing, err := receiverstore.Open(filepath.Join(dir, "e.db"), receiverstore.WithEffect(
		func(context.Context, receiverstore.Tx, receiverstore.Message) error { return errors.New("down") }))
	if err != nil {
		t.Fatal(err)
	}
	defer failing.Close()
	closed, err := receiverstore.Open(filepath.Join(dir, "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()

	ev := func(id string, seq int64, body string) relay.Event {
		return relay.Event{ID: id, Flow: "f", Seq: seq, Body: []byte(body), Attempt: 1, Generation: 1}
	}
	for _, c := range []struct {
		name   string
		r      relay.LocalReceiver
		e      relay.Event
		reason string // "" = success
		kind   string // "permanent", "destination" or "" (an event failure, transient)
	}{
		{"accepted", st, ev("e1", 1, `{"delta": 5}`), "", ""},
		{"duplicate", st, ev("e1", 1, `{"delta": 5}`), "", ""},
		{"conflict", st, ev("e1", 1, `{"delta": 6}`), relay.ReasonConflict, ""},
		{"gap", st, ev("e3", 3, `{"delta": 1}`), relay.ReasonGap, ""},
		{"unsupported_delta", st, ev("e2", 2, `{"delta": 50}`), relay.ReasonUnsupportedDelta, ""},
		{"invalid body", st, ev("e2", 2, `{"delta": 0}`), relay.ReasonInvalidBody, "permanent"},
		{"invalid message", st, ev("", 2, `{"delta": 1}`), relay.ReasonInvalidBody, "permanent"},
		{"effect failure", failing, ev("e1", 1, `anything`), relay.ReasonUnavailable, "destination"},
		{"store error", closed, ev("e1", 1, `{"delta": 1}`), relay.ReasonUnavailable, "destination"},
	} {
		err := relay.NewLocal(c.r).Handle(context.Background(), c.e)
		var f *relay.Failure
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("%s: Handle() = %v, want nil", c.name, err)
		case c.reason != "" && (!errors.As(err, &f) || f.Reason != c.reason):
			t.Errorf("%s: Handle() = %v, want a failure with reason %s", c.name, err, c.reason)
		case f != nil && (f.Permanent != (c.kind == "permanent") || f.Destination != (c.kind == "destination")):
			t.Errorf("%s: Handle() = %+v, want kind %q", c.name, f, c.kind)
		}
	}
	if tot, err := st.Total(context.Background(), "f"); err != nil || tot != 5 {
		t.Errorf("Total(f) = %d, %v; want 5", tot, err)
	}
}

// receiverAnswering is a LocalReceiver that gives one outcome to every message.
type receiverAnswering receiver.Outcome

func (a receiverAnswering) Receive(context.Context, receiver.Message) (receiver.Outcome, error) {
	return receiver.Outcome(a), nil
}

// A message at or below its flow's pruned mark is answered Pruned
// (docs/contract.md §7.9): it was applied once and its receipt deleted since,
// so the relay settles it as delivered, not as a failure to retry forever.
func TestLocal_PrunedIsDelivered(t *testing.T) {
	t.Parallel()
	e := relay.Event{ID: "e1", Flow: "f", Seq: 1, Body: []byte(`{"delta": 1}`), Attempt: 2, Generation: 2}
	if err := relay.NewLocal(receiverAnswering(receiver.Pruned)).Handle(context.Background(), e); err != nil {
		t.Errorf("Handle() on a Pruned answer = %v, want nil (delivered)", err)
	}
	err := relay.NewLocal(receiverAnswering("no-such-outcome")).Handle(context.Background(), e)
	if f := (*relay.Failure)(nil); !errors.As(err, &f) || f.Reason != relay.ReasonUnavailable {
		t.Errorf("Handle() on an unknown outcome = %v, want an unavailable failure", err)
	}
}
