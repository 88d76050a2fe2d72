package receiverstore

import (
	"context"
	"errors"
	"testing"
)

// Receive runs on the driver (drivertx), where database/sql's Tx used to
// watch the context. docs/contract.md §3: the accept is atomic, so a Receive whose
// context is already canceled must fail with an error that wraps
// context.Canceled and change nothing, whatever the message would have been
// (accept, conflict record).
func TestReceive_CanceledContextChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	before := snap(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, m := range []Message{
		msg("e2", "f", 2, 3),   // would be accepted
		msg("x1", "f", 1, 5),   // would be a seq_taken conflict
		msg("e1", "f", 1, 9),   // would be an id_reused conflict
		msg("g1", "new", 1, 1), // would create a flow
	} {
		if _, err := s.Receive(ctx, m); !errors.Is(err, context.Canceled) {
			t.Errorf("Receive(%s/%s/%d) with a canceled context: error = %v, want one wrapping context.Canceled", m.ID, m.Flow, m.Seq, err)
		}
		assertUnchanged(t, s, before, "Receive with a canceled context")
	}
	if _, err := s.ReceiveBatch(ctx, []Message{msg("e2", "f", 2, 3), msg("g1", "new", 1, 1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("ReceiveBatch with a canceled context: error = %v, want one wrapping context.Canceled", err)
	}
	assertUnchanged(t, s, before, "ReceiveBatch with a canceled context")

	// The write connection is still usable afterwards.
	mustReceive(t, s, msg("e2", "f", 2, 3), Accepted)
}
