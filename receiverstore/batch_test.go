package receiverstore

import (
	"context"
	"strings"
	"testing"
)

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
