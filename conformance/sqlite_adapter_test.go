package conformance

import (
	"context"
	"encoding/json"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
)

// sqliteQueue presents a queuestore.Store as a Queue. queuestore's types
// and sentinel errors are queue's, so every method but Snapshot is the
// store's own; the snapshot is converted because queuestore's carries the
// rotation order's state, which queue's snapshot does not describe yet.
type sqliteQueue struct{ *queuestore.Store }

// via converts between structurally equal types through JSON.
func via[T any](v any) T {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func (q sqliteQueue) Snapshot(ctx context.Context) (queue.Snapshot, error) {
	sn, err := q.Store.Snapshot(ctx)
	if err != nil {
		return queue.Snapshot{}, err
	}
	return via[queue.Snapshot](sn), nil
}
