package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiver"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// This file holds the retention rows (docs/contract.md §7.9): the size of
// both stores under a steady enqueue → relay → receive load with and
// without a retention window, and the cost of a concurrent pruner on
// claim+settle.

// RetentionSpec sizes one steady-load run of [SteadyLoad].
type RetentionSpec struct {
	Events int // events relayed in all (200,000 in the report)
	Flows  int // the bounded set of flows they are spread over
	Batch  int // events per cycle: EnqueueBatch → ClaimBatch → ReceiveBatch → SettleBatch
	// Retention is the window in ticks; every cycle is one tick, so the
	// window keeps Retention × Batch events. 0 runs without retention:
	// nothing is pruned.
	Retention clock.Tick
	// PruneEvery is how many cycles pass between two prune passes (each
	// pass prunes both stores in batches of their DefaultPruneBatch until
	// nothing more is due); the sizes are sampled at the same cadence.
	PruneEvery int
}

// StoreSizes is the size of the queue and of the receiver, in bytes.
type StoreSizes struct{ Queue, Receiver int64 }

// SteadyResult is what one steady-load run measured.
type SteadyResult struct {
	Spec RetentionSpec
	// Start is the sizes after both stores were opened (empty), Mid after
	// half of the events, End after all; Peak is each store's largest
	// sample.
	Start, Mid, End, Peak StoreSizes
	// Events and Receipts are the rows the prune passes deleted.
	Events, Receipts int64
	Elapsed          time.Duration // the whole run, prune passes included
}

// Rate is the events relayed per second, prune passes included.
func (r SteadyResult) Rate() float64 { return float64(r.Spec.Events) / r.Elapsed.Seconds() }

// steadyQueue is what a steady-load run needs of a queue.
type steadyQueue interface {
	cycleQueue
	queue.Pruner
	Close() error
}

// vacuumer is a steady-load queue whose backend needs a VACUUM before it
// reuses the space of deleted rows (PostgreSQL): SteadyLoad runs it after
// each prune pass, as autovacuum would on a server running for longer than
// a bench's minute (docs/postgres.md: autovacuum for the pruned tables).
type vacuumer interface {
	vacuum(ctx context.Context) error
}

// pgSteadyQueue is the PostgreSQL steady-load queue: the store, and a
// plain VACUUM (no lock on readers or writers) of every table of both
// schemas.
type pgSteadyQueue struct {
	*pgqueuestore.Store
	conn    *pgx.Conn
	schemas []string
}

func (q pgSteadyQueue) vacuum(ctx context.Context) error {
	for _, schema := range q.schemas {
		rows, err := q.conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
			WHERE ns.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname`, schema)
		if err != nil {
			return fmt.Errorf("tables of %s: %w", schema, err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("tables of %s: %w", schema, err)
		}
		for _, t := range tables {
			if _, err := q.conn.Exec(ctx, "VACUUM "+pgx.Identifier{schema, t}.Sanitize()); err != nil {
				return fmt.Errorf("vacuum %s.%s: %w", schema, t, err)
			}
		}
	}
	return nil
}

// steadyReceiver is what a steady-load run needs of a receiver.
type steadyReceiver interface {
	ReceiveBatch(ctx context.Context, ms []receiver.Message) ([]receiver.BatchResult, error)
	receiver.Pruner
	Close() error
}

// SteadyStores opens the two stores of one steady-load run: the queue
// with policy, the receiver with now as its clock, and a function that
// reads their sizes. close releases everything (and on PostgreSQL drops
// the schemas).
type SteadyStores func(ctx context.Context, dir string, policy queue.Policy, now func() time.Time) (q steadyQueue, r steadyReceiver, sizes func(context.Context) (StoreSizes, error), close func() error, err error)

// retentionEpoch is the receiver's clock at tick 0 of a steady-load run:
// tick t is retentionEpoch + t seconds, so the receiver's window, in
// wall-clock time, is the queue's in ticks.
var retentionEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func tickTime(t clock.Tick) time.Time { return retentionEpoch.Add(time.Duration(t) * time.Second) }

// SteadyLoad relays spec.Events events through a queue and a receiver that
// open opens, one cycle (one tick) at a time, spec.Batch events of
// different flows a cycle, and prunes both stores every spec.PruneEvery
// cycles when spec.Retention is set. It samples both stores' sizes after
// every prune pass (or where one would be).
func SteadyLoad(ctx context.Context, dir string, open SteadyStores, spec RetentionSpec) (SteadyResult, error) {
	res := SteadyResult{Spec: spec}
	if spec.Batch < 1 || spec.Batch > spec.Flows || spec.PruneEvery < 1 {
		return res, fmt.Errorf("steady load: batch %d of %d flows, prune every %d: want 1 <= batch <= flows, prune every >= 1", spec.Batch, spec.Flows, spec.PruneEvery)
	}
	p := queue.DefaultPolicy()
	p.Retention = spec.Retention
	var tick clock.Tick
	q, r, sizes, closeAll, err := open(ctx, dir, p, func() time.Time { return tickTime(tick) })
	if err != nil {
		return res, err
	}
	defer closeAll()
	sample := func(into *StoreSizes) error {
		s, err := sizes(ctx)
		if err != nil {
			return err
		}
		*into = s
		res.Peak.Queue = max(res.Peak.Queue, s.Queue)
		res.Peak.Receiver = max(res.Peak.Receiver, s.Receiver)
		return nil
	}
	if err := sample(&res.Start); err != nil {
		return res, err
	}
	es := make([]queue.Event, spec.Batch)
	ms := make([]receiver.Message, spec.Batch)
	items := make([]queue.SettleItem, spec.Batch)
	cycles := (spec.Events + spec.Batch - 1) / spec.Batch
	n := 0
	start := time.Now()
	for c := range cycles {
		tick = clock.Tick(c + 1)
		k := min(spec.Batch, spec.Events-n)
		for i := range k {
			es[i] = queue.Event{ID: fmt.Sprintf("e%d", n+i+1), Flow: flowName((n + i) % spec.Flows), Body: body}
		}
		if err := relayCycle(ctx, q, r, es[:k], ms[:k], items[:k], tick); err != nil {
			return res, err
		}
		n += k
		last := c == cycles-1
		if (c+1)%spec.PruneEvery != 0 && !last && c+1 != cycles/2 {
			continue
		}
		if spec.Retention > 0 {
			ev, rc, err := prunePass(ctx, q, r, tick, spec.Retention)
			if err != nil {
				return res, err
			}
			res.Events += ev
			res.Receipts += rc
			if v, ok := q.(vacuumer); ok {
				if err := v.vacuum(ctx); err != nil {
					return res, err
				}
			}
		}
		var s StoreSizes
		if err := sample(&s); err != nil {
			return res, err
		}
		if c+1 == cycles/2 {
			res.Mid = s
		}
		if last {
			res.End = s
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// relayCycle relays es (events of different flows) at tick: EnqueueBatch,
// ClaimBatch, ReceiveBatch, SettleBatch, every one accepted and acked.
func relayCycle(ctx context.Context, q steadyQueue, r steadyReceiver, es []queue.Event, ms []receiver.Message, items []queue.SettleItem, tick clock.Tick) error {
	if _, err := q.EnqueueBatch(ctx, es, tick); err != nil {
		return err
	}
	cs, err := q.ClaimBatch(ctx, tick, len(es))
	if err != nil {
		return err
	}
	if len(cs) != len(es) {
		return fmt.Errorf("claim batch: %d claims, want %d", len(cs), len(es))
	}
	for i, c := range cs {
		ms[i] = receiver.Message{ID: c.EventID, Flow: c.Flow, Seq: c.Seq, Body: c.Body}
	}
	rs, err := r.ReceiveBatch(ctx, ms)
	if err != nil {
		return err
	}
	if err := allAccepted(rs); err != nil {
		return err
	}
	for i, c := range cs {
		items[i] = queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: queue.Result{OK: true}}
	}
	ss, err := q.SettleBatch(ctx, items, tick)
	if err != nil {
		return err
	}
	return allAcked(ss)
}

// prunePass prunes the queue at tick and the receipts accepted before the
// same window, each in batches of its DefaultPruneBatch until nothing more
// is due, and returns the events and receipts deleted.
func prunePass(ctx context.Context, q queue.Pruner, r receiver.Pruner, tick, retention clock.Tick) (events, receipts int64, err error) {
	for {
		res, err := q.Prune(ctx, tick, queue.DefaultPruneBatch)
		if err != nil {
			return events, receipts, fmt.Errorf("prune queue: %w", err)
		}
		events += res.Events
		if !res.More {
			break
		}
	}
	before := tickTime(tick - retention + 1) // accepted at or before tick - retention
	for {
		res, err := r.Prune(ctx, before, receiver.DefaultPruneBatch)
		if err != nil {
			return events, receipts, fmt.Errorf("prune receiver: %w", err)
		}
		receipts += res.Receipts
		if !res.More {
			break
		}
	}
	return events, receipts, nil
}

// SQLiteSteadyStores opens the steady-load stores as SQLite files in dir
// (queue.db, receiver.db); a store's size is its page_count × page_size,
// read through the WAL (the pages of committed transactions not yet
// checkpointed count); the -wal file itself is not counted.
func SQLiteSteadyStores(ctx context.Context, dir string, policy queue.Policy, now func() time.Time) (steadyQueue, steadyReceiver, func(context.Context) (StoreSizes, error), func() error, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, nil, nil, err
	}
	qp, rp := filepath.Join(dir, "queue.db"), filepath.Join(dir, "receiver.db")
	q, err := queuestore.Open(qp, queuestore.WithPolicy(policy))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	r, err := receiverstore.Open(rp, receiverstore.WithNow(now))
	if err != nil {
		q.Close()
		return nil, nil, nil, nil, err
	}
	qdb, err := OpenDB(qp)
	if err != nil {
		q.Close()
		r.Close()
		return nil, nil, nil, nil, err
	}
	rdb, err := OpenDB(rp)
	if err != nil {
		qdb.Close()
		q.Close()
		r.Close()
		return nil, nil, nil, nil, err
	}
	sizes := func(ctx context.Context) (StoreSizes, error) {
		var s StoreSizes
		var err error
		if s.Queue, err = sqliteSize(ctx, qdb); err != nil {
			return s, err
		}
		s.Receiver, err = sqliteSize(ctx, rdb)
		return s, err
	}
	closeAll := func() error { return errors.Join(qdb.Close(), rdb.Close(), q.Close(), r.Close()) }
	return q, r, sizes, closeAll, nil
}

// PruneClaimSettle is [ClaimSettle] on a queue with a retention window,
// alone (pruner false) or with a pruner running beside it (pruner true):
// a goroutine that, while a Step runs, prunes in batches of
// queue.DefaultPruneBatch, without pause while More, else every
// pruneRest. Every claim+settle is one tick later than the one before,
// so with a window of window ticks the pruner deletes the acked events as
// fast as the drain acks them, once the window is full. Both cases load
// the same backlog; the pair's ratio, taken within a round, is the
// pruner's cost.
func PruneClaimSettle(flows, perFlow int, window clock.Tick, pruner bool) Case {
	name := fmt.Sprintf("claim+settle/%d/retention", flows)
	if pruner {
		name += "+pruner"
	}
	return Case{
		Name: name,
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			p := queue.DefaultPolicy()
			p.Retention = window
			q, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithPolicy(p))
			if err != nil {
				return nil, err
			}
			if err := LoadBacklog(ctx, q, "e", flows, perFlow); err != nil {
				q.Close()
				return nil, err
			}
			return &pruneClaimSettle{q: q, pruner: pruner, tick: now}, nil
		},
	}
}

// pruneRest is how long the pruner of [PruneClaimSettle] waits after a
// batch that left nothing due.
const pruneRest = 10 * time.Millisecond

// pruneSteps is how many claim+settles one Step of [PruneClaimSettle]
// makes, so that the pruner's goroutine is started once per 200 events.
const pruneSteps = 200

type pruneClaimSettle struct {
	q interface {
		ClaimSettler
		queue.Pruner
		Close() error
	}
	pruner bool
	mu     sync.Mutex // guards tick between the drain and the pruner
	tick   clock.Tick
	pruned int64
}

func (c *pruneClaimSettle) now() clock.Tick {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tick
}

// Step makes pruneSteps claim+settles, each a tick later, with the pruner
// running beside them when the case has one.
func (c *pruneClaimSettle) Step(ctx context.Context) (int, error) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var perr error
	if c.pruner {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := c.q.Prune(ctx, c.now(), queue.DefaultPruneBatch)
				if errors.Is(err, queue.ErrTimeRegression) {
					continue // the drain moved on between the read and the prune
				}
				if err != nil {
					perr = err
					return
				}
				c.pruned += res.Events
				if !res.More {
					select {
					case <-stop:
						return
					case <-time.After(pruneRest):
					}
				}
			}
		}()
	}
	n, err := c.steps(ctx)
	close(stop)
	wg.Wait()
	if err == nil && perr != nil {
		err = fmt.Errorf("pruner: %w", perr)
	}
	return n, err
}

func (c *pruneClaimSettle) steps(ctx context.Context) (int, error) {
	for i := range pruneSteps {
		c.mu.Lock()
		c.tick++
		t := c.tick
		c.mu.Unlock()
		cl, ok, err := c.q.Claim(ctx, t)
		if err != nil {
			return i, err
		}
		if !ok {
			return i, ErrBacklogEmpty
		}
		out, err := c.q.Settle(ctx, cl.EventID, cl.Generation, queue.Result{OK: true}, t)
		if err != nil {
			return i, err
		}
		if out != queue.Acked {
			return i, fmt.Errorf("settle %s: outcome %s, want acked", cl.EventID, out)
		}
	}
	return pruneSteps, nil
}

// Close closes the queue.
func (c *pruneClaimSettle) Close() error { return c.q.Close() }

// sqliteSize is a SQLite database's size: page_count × page_size, as a
// reader sees it (the WAL's committed pages included).
func sqliteSize(ctx context.Context, db *sql.DB) (int64, error) {
	var pages, size int64
	if err := db.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return 0, fmt.Errorf("page_count: %w", err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&size); err != nil {
		return 0, fmt.Errorf("page_size: %w", err)
	}
	return pages * size, nil
}

// PGSteadyStores returns the steady-load stores on the PostgreSQL server at
// url: the queue and the receiver each in a schema of its own, dropped on
// close; a store's size is the sum of pg_total_relation_size over its
// schema's tables (heap, indexes and TOAST; dead rows count until a
// VACUUM lets their space be reused: the queue runs one of both schemas
// after each prune pass, standing in for autovacuum).
func PGSteadyStores(url string) SteadyStores {
	return func(ctx context.Context, _ string, policy queue.Policy, now func() time.Time) (steadyQueue, steadyReceiver, func(context.Context) (StoreSizes, error), func() error, error) {
		qs, rs := NewPGSchema(), NewPGSchema()
		drop := func() error {
			return errors.Join(DropPGSchema(context.Background(), url, qs), DropPGSchema(context.Background(), url, rs))
		}
		q, err := pgqueuestore.Open(ctx, url, pgqueuestore.WithSchema(qs), pgqueuestore.WithPolicy(policy))
		if err != nil {
			return nil, nil, nil, nil, errors.Join(err, drop())
		}
		r, err := pgreceiverstore.Open(ctx, url, pgreceiverstore.WithSchema(rs), pgreceiverstore.WithNow(now))
		if err != nil {
			q.Close()
			return nil, nil, nil, nil, errors.Join(err, drop())
		}
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			q.Close()
			r.Close()
			return nil, nil, nil, nil, errors.Join(err, drop())
		}
		size := func(ctx context.Context, schema string) (int64, error) {
			var n int64
			err := c.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
				FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
				WHERE ns.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&n)
			if err != nil {
				return 0, fmt.Errorf("size of %s: %w", schema, err)
			}
			return n, nil
		}
		sizes := func(ctx context.Context) (StoreSizes, error) {
			var s StoreSizes
			var err error
			if s.Queue, err = size(ctx, qs); err != nil {
				return s, err
			}
			s.Receiver, err = size(ctx, rs)
			return s, err
		}
		closeAll := func() error {
			return errors.Join(c.Close(context.Background()), q.Close(), r.Close(), drop())
		}
		return pgSteadyQueue{Store: q, conn: c, schemas: []string{qs, rs}}, r, sizes, closeAll, nil
	}
}
