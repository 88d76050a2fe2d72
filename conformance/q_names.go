package conformance

import (
	"context"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
)

// IDs, flows and reasons must hold a non-space character and must not
// begin or end with whitespace: "tenant-a" and "tenant-a " are not two
// flows, "   " is neither an ID nor an audit reason. queue.ErrInvalid (a blank
// reason is queue.ErrEmptyReason too); nothing changes.
func queueNames_NoBlankOrEdgeSpaces(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "tenant-a", "x", 0)
	q, now := quarantineHead(t, s, 0)
	before := snap(t, s)
	for name, e := range map[string]queue.Event{
		"flow with a trailing space": {ID: "a2", Flow: "tenant-a ", Body: []byte("x")},
		"flow with a leading space":  {ID: "a2", Flow: " tenant-a", Body: []byte("x")},
		"blank flow":                 {ID: "a2", Flow: "   ", Body: []byte("x")},
		"blank ID":                   {ID: "   ", Flow: "tenant-a", Body: []byte("x")},
		"one-space ID":               {ID: " ", Flow: "tenant-a", Body: []byte("x")},
		"ID with a trailing space":   {ID: "a2 ", Flow: "tenant-a", Body: []byte("x")},
		// A destination name (docs/contract.md §7.11) is [a-z0-9][a-z0-9._-]*:
		// no space anywhere.
		"destination with a trailing space": {ID: "a2", Flow: "tenant-a", Body: []byte("x"), Destination: "alpha "},
		"destination with a leading space":  {ID: "a2", Flow: "tenant-a", Body: []byte("x"), Destination: " alpha"},
		"blank destination":                 {ID: "a2", Flow: "tenant-a", Body: []byte("x"), Destination: "   "},
	} {
		_, err := s.Enqueue(ctx, e, now)
		wantErr(t, "Enqueue("+name+")", err, queue.ErrInvalid)
		_, err = s.EnqueueBatch(ctx, []queue.Event{e}, now)
		wantErr(t, "EnqueueBatch("+name+")", err, queue.ErrInvalid)
	}
	for _, reason := range []string{" ", "   ", " unavailable", "unavailable "} {
		err := s.Redrive(ctx, "a1", q.Generation, reason, now)
		wantErr(t, "Redrive(reason "+reason+")", err, queue.ErrInvalid)
		_, err = s.Settle(ctx, "a1", q.Generation, failure(reason), now)
		wantErr(t, "Settle(reason "+reason+")", err, queue.ErrInvalid)
	}
	for _, reason := range []string{" ", "   "} {
		wantErr(t, "Redrive(blank reason)", s.Redrive(ctx, "a1", q.Generation, reason, now), queue.ErrEmptyReason)
		_, err := s.Settle(ctx, "a1", q.Generation, failure(reason), now)
		wantErr(t, "Settle(blank reason)", err, queue.ErrEmptyReason)
	}
	_, err := s.Settle(ctx, " a1", q.Generation, success, now)
	wantErr(t, "Settle(ID with a leading space)", err, queue.ErrInvalid)
	assertUnchanged(t, "names with edge spaces", before, snap(t, s))
	// Inner spaces stay fine.
	enqueue(t, s, "a 2", "tenant a", "x", now)
	if err := s.Redrive(ctx, "a1", q.Generation, "receiver back up", now); err != nil {
		t.Fatalf("Redrive() error = %v", err)
	}
}
