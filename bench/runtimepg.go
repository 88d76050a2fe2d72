package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/inbox"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
)

// RuntimePGCase is [RuntimeCase] with the queue and the receiver store on
// the PostgreSQL server at url (pgqueuestore and pgreceiverstore, each in a
// schema of its own, dropped on Close; the queue analyzed after its backlog
// is loaded): the same relay, handler and backlog, so that its rate can be
// set beside the SQLite case's in the same round.
func RuntimePGCase(url string, kind RuntimeKind, concurrency, batch, flows, perFlow int, step time.Duration) Case {
	return runtimeCase(fmt.Sprintf("runtime-pg/%s/c%d-b%d", kind, concurrency, batch), pgRuntimeStores(url), kind, concurrency, batch, flows, perFlow, step, nil)
}

// pgRuntimeQueue is a pgqueuestore whose Close also drops its schema.
type pgRuntimeQueue struct {
	*pgqueuestore.Store
	url, schema string
}

// Close closes the store and drops its schema.
func (p *pgRuntimeQueue) Close() error {
	return errors.Join(p.Store.Close(), DropPGSchema(context.Background(), p.url, p.schema))
}

// pgRuntimeStores opens the runtime stores on the server at url.
func pgRuntimeStores(url string) runtimeStores {
	return func(ctx context.Context, dir string, receiver bool) (runtimeQueue, inbox.BatchReceiver, []func() error, error) {
		qs := NewPGSchema()
		q, err := pgqueuestore.Open(ctx, url, pgqueuestore.WithSchema(qs), pgqueuestore.WithPolicy(RuntimePolicy()), pgqueuestore.WithRealTime(clock.Wall{}, 1000))
		if err != nil {
			return nil, nil, nil, errors.Join(err, DropPGSchema(ctx, url, qs))
		}
		pq := &pgRuntimeQueue{Store: q, url: url, schema: qs}
		if !receiver {
			return pq, nil, []func() error{pq.Close}, nil
		}
		rs := NewPGSchema()
		r, err := pgreceiverstore.Open(ctx, url, pgreceiverstore.WithSchema(rs))
		if err != nil {
			return nil, nil, nil, errors.Join(err, pq.Close(), DropPGSchema(ctx, url, rs))
		}
		closeR := func() error {
			return errors.Join(r.Close(), DropPGSchema(context.Background(), url, rs))
		}
		return pq, r, []func() error{pq.Close, closeR}, nil
	}
}

// analyze runs ANALYZE on the queue's tables once its backlog is loaded.
func (p *pgRuntimeQueue) analyze(ctx context.Context) error { return analyzePG(ctx, p.url, p.schema) }
