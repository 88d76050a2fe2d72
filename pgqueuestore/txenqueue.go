package pgqueuestore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The statements of the transactional enqueue and of the promotion of its
// arrivals (docs/decisions/postgres-transactional-enqueue.md). Every
// enqueue, plain or in a caller's transaction, locks the store's enqueue
// key and its event IDs (qLockIDs) and its flows' sequence counters
// (qLockSeqs) before anything else, and a plain one only then the meta
// row: the lock order is enqueue key -> IDs -> flow_seqs -> meta -> flows
// and events, so nothing that holds the meta row ever waits for a caller's
// transaction (docs/decisions/postgres-enqueue-lock-escalation.md).
const (
	// qLockIDs takes transaction-level advisory locks on the keys of the
	// array $1, in array order (lockSteps): first the store's enqueue
	// key (enqueueKey), shared when $2 is true, else exclusive; then,
	// exclusive, each event ID's key (eventKeys: hashed with the schema,
	// sorted). An enqueue of an ID that a caller's open transaction has
	// enqueued waits here, holding nothing of the store's; so does an
	// escalated one (the key exclusive, no ID keys), for every enqueue
	// in flight.
	qLockIDs = `SELECT count(CASE WHEN u.n = 1 AND $2::boolean THEN pg_advisory_xact_lock_shared(u.k) ELSE pg_advisory_xact_lock(u.k) END)
FROM unnest($1::bigint[]) WITH ORDINALITY AS u(k, n)`

	// qLockSeqs creates the sequence counter of each new flow of the array
	// $1 (sorted) and locks every one of them: DO UPDATE with a false
	// condition locks the existing row without writing it.
	qLockSeqs = `INSERT INTO {s}.flow_seqs AS q (flow, last_seq) SELECT f, 0 FROM unnest($1::text[]) AS f
ON CONFLICT (flow) DO UPDATE SET last_seq = q.last_seq WHERE false`

	// qReadSeqs reads the locked counters of the flows of the array $1.
	qReadSeqs = `SELECT flow, last_seq, dest FROM {s}.flow_seqs WHERE flow = ANY($1::text[])`

	// qSetSeqs records the flows' (array $1) new last sequence numbers
	// ($2).
	qSetSeqs = `UPDATE {s}.flow_seqs AS q SET last_seq = u.last
FROM unnest($1::text[], $2::bigint[]) AS u(flow, last) WHERE q.flow = u.flow`

	// qReadMark reads the clock mark and the policy without locking the
	// meta row: a transactional enqueue never holds it.
	qReadMark = `SELECT clock_mark, ` + qPolicyCols + ` FROM {s}.meta WHERE id = 1`

	// qRaiseMark raises the clock mark to $1, in its own short
	// transaction on the store's mark connection (raiseMark).
	qRaiseMark = `UPDATE {s}.meta SET clock_mark = $1 WHERE id = 1 AND clock_mark < $1`

	// qInsertEventsAt inserts a batch of events over unnest, each with
	// its available_at (its NotBefore, or the tick) in $5 and the tick in
	// $6.
	qInsertEventsAt = `INSERT INTO {s}.events
    (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
     available_at, lease_until, ticket, reason, enqueued_at)
SELECT u.id, u.flow, u.seq, u.body, 'pending', 0, 0, 0, u.at, 0, 0, '', $6
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[], $5::bigint[]) AS u(id, flow, seq, body, at)`

	// qInsertArrivals records that the flows of the array $1 have new
	// events that their flows rows do not know of yet.
	qInsertArrivals = `INSERT INTO {s}.arrivals (flow) SELECT unnest($1::text[])`

	// qTakeArrivals deletes and returns the committed arrivals: every
	// write turn runs it right after locking the meta row (withTx). With
	// none it reads an empty table.
	qTakeArrivals = `DELETE FROM {s}.arrivals RETURNING flow`

	// qAnyArrivals reports whether committed arrivals wait for a write
	// turn.
	qAnyArrivals = `SELECT EXISTS (SELECT 1 FROM {s}.arrivals)`

	// qPromoteArrivals brings the flows rows of the flows of the array $1
	// up to their sequence counters (the committed events): a flow
	// without a row gets one with event 1 as its head, a flow without a
	// head gets its first new event as head, as an enqueue would give it;
	// the new head is not ready (the claim's promotion makes it ready when
	// its available_at is due, so a paused flow stays not ready). It
	// returns the flows that got a head, in flow order, for the rotation's
	// join. A new flows row gets the destination its first event named,
	// which the enqueue recorded in the flow's sequence counter.
	qPromoteArrivals = `WITH u AS (
    SELECT q.flow, q.last_seq AS last, q.dest FROM {s}.flow_seqs AS q WHERE q.flow = ANY($1::text[]) AND q.last_seq > 0),
ins AS (
    INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready, head_enqueued_at, dest)
    SELECT u.flow, u.last, 0, 1, e.available_at, false, e.enqueued_at, u.dest
    FROM u JOIN {s}.events AS e ON e.flow = u.flow AND e.seq = 1
    WHERE NOT EXISTS (SELECT 1 FROM {s}.flows AS x WHERE x.flow = u.flow)
    RETURNING flow),
upd AS (
    UPDATE {s}.flows AS f SET last_seq = u.last,
        head_seq = coalesce(f.head_seq, e.seq),
        ready_at = CASE WHEN f.head_seq IS NULL THEN e.available_at ELSE f.ready_at END,
        ready = CASE WHEN f.head_seq IS NULL THEN false ELSE f.ready END,
        head_enqueued_at = CASE WHEN f.head_seq IS NULL THEN e.enqueued_at ELSE f.head_enqueued_at END
    FROM u, {s}.events AS e
    WHERE f.flow = u.flow AND u.last > f.last_seq AND e.flow = u.flow AND e.seq = f.last_seq + 1
    RETURNING f.flow, f.head_seq = e.seq AS gained)
SELECT flow FROM ins UNION ALL SELECT flow FROM upd WHERE gained ORDER BY flow`

	qSavepoint        = `SAVEPOINT fairrelay_enqueue`
	qReleaseSavepoint = `RELEASE SAVEPOINT fairrelay_enqueue`
	qRollbackToSave   = `ROLLBACK TO SAVEPOINT fairrelay_enqueue`
)

// maxIDLocks is the most distinct event IDs (keys) an enqueue locks one
// by one; an enqueue of more takes the store's enqueue key exclusive
// instead, one lock (lock escalation). The server's lock table, shared by
// every session, is sized for max_locks_per_transaction (64 by default)
// locks per server process on average: with at most 64 ID locks and the
// enqueue key, an enqueue stays near its process's share, so enqueues on
// every connection at once cannot run the table out
// (docs/decisions/postgres-enqueue-lock-escalation.md).
const maxIDLocks = 64

// enqueueKey is the advisory lock key of this store's enqueues: every
// enqueue takes it, shared to lock its IDs one by one, exclusive to
// stand for all of them.
func (s *Store) enqueueKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("fairrelay_queue\x00enqueue\x00" + s.schema))
	return int64(h.Sum64())
}

// eventKeys are the advisory lock keys of ids in this store's schema,
// sorted, so that every enqueue takes them in one order. None is the
// enqueue key (an ID hashed to it takes the next key instead).
func (s *Store) eventKeys(ids []string) []int64 {
	ek := s.enqueueKey()
	keys := make([]int64, 0, len(ids))
	for _, id := range ids {
		h := fnv.New64a()
		h.Write([]byte("fairrelay_queue\x00event\x00" + s.schema + "\x00" + id))
		k := int64(h.Sum64())
		if k == ek {
			k++
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// lockSteps are the steps that lock the event IDs and the flows' sequence
// counters of an enqueue of es, flows sorted: the enqueue key shared and
// each ID's key, or, for more than maxIDLocks IDs, the enqueue key
// exclusive alone, which waits for every enqueue in flight (callers' open
// transactions that enqueued included) and holds off new ones until this
// transaction ends.
func (s *Store) lockSteps(es []queue.Event) []step {
	ids := make([]string, 0, len(es))
	flows := make([]string, 0, len(es))
	for _, e := range es {
		ids, flows = append(ids, e.ID), append(flows, e.Flow)
	}
	slices.Sort(flows)
	flows = slices.Compact(flows)
	keys := s.eventKeys(ids)
	shared := len(keys) <= maxIDLocks
	if !shared {
		keys = keys[:0]
	}
	keys = append([]int64{s.enqueueKey()}, keys...)
	return []step{
		{what: "lock event IDs", sql: qLockIDs, args: []any{keys, shared}, rows: func(pgx.Rows) error { return nil }},
		{what: "lock flows", sql: s.q(qLockSeqs), args: []any{flows}},
	}
}

// promoteArrivals promotes the committed arrivals of the flows arrived
// (qTakeArrivals's rows, in any order, repeated) into the flows rows, in
// a write turn: qPromoteArrivals, and under FairRotation the rotation's
// join of each flow that got a head, in flow order, as an enqueue that
// gives a flow a head joins it.
func (s *Store) promoteArrivals(ctx context.Context, tx pgx.Tx, arrived []string, p queue.Policy) error {
	slices.Sort(arrived)
	arrived = slices.Compact(arrived)
	var gained []string
	rows, _ := tx.Query(ctx, s.q(qPromoteArrivals), arrived)
	var f string
	if _, err := pgx.ForEachRow(rows, []any{&f}, func() error {
		gained = append(gained, f)
		return nil
	}); err != nil {
		return fmt.Errorf("promote arrivals: %w", err)
	}
	if !rotation(p) || len(gained) == 0 {
		return nil
	}
	var pp pipe
	for _, f := range gained {
		pp.exec("promote arrivals: join rotation", s.q(qRotArrive), f)
		pp.exec("promote arrivals: join rotation", s.q(qRotJoin))
	}
	return pp.send(ctx, tx)
}

// promoteWaiting runs a write turn that promotes the committed arrivals
// when there are any (one read of the arrivals table otherwise), so that a
// read after it sees every committed event in its flow's row: the reads
// that report flows, heads and counts call it first.
func (s *Store) promoteWaiting(ctx context.Context) error {
	var any bool
	if err := s.pool.QueryRow(ctx, s.q(qAnyArrivals)).Scan(&any); err != nil {
		return fmt.Errorf("read arrivals: %w", err)
	}
	if !any {
		return nil
	}
	return s.withTx(ctx, func(pgx.Tx, admission) error { return nil })
}

// EnqueueTx enqueues e inside tx, the caller's transaction on the store's
// database (docs/contract.md §7.9): the event commits or rolls back with
// tx, with the results and errors of Enqueue. Sequence numbers have no
// holes: a rolled-back event's number is taken again by the flow's next
// enqueue. While tx stays open, it holds up only later enqueues into e's
// flow and of e's ID (they wait for tx to end), and a batch of more than
// 64 events (maxIDLocks), which waits for every enqueue in flight, with
// the enqueues that come after it; claims, settles and enqueues into
// other flows go on. The event is claimable once tx commits
// and the store's next write turn (a claim, any write) has promoted it
// into its flow's row; the commit wakes listeners (Listen).
//
// The tick is checked as every write's is, against the clock mark read
// without locking it; once every event has passed its checks, a tick
// above the mark raises it in a short transaction of its own on the
// store's mark connection, never on the pool, so tx may come from the
// store's pool whatever its size (raised even if tx rolls back, which is
// harmless: the mark only bounds later ticks; a refused call moves no
// mark). A non-zero
// e.Weight is queue.ErrInvalid: setting a weight writes the flow's row,
// which claims update, so it is left to Enqueue and SetWeight.
//
// The statements run under a savepoint of tx: on any error the savepoint
// is rolled back, tx is left usable and nothing of e is in it. With tx at
// REPEATABLE READ or SERIALIZABLE, an enqueue into a flow that another
// transaction enqueued into since tx's snapshot fails with the server's
// serialization error (tx must be retried). Two EnqueueTx calls in one
// transaction take their locks in two steps, so a concurrent enqueue of
// both flows may deadlock with it (the server aborts one): enqueue related
// events with one EnqueueBatchTx; the same holds when a later call in tx
// enqueues more than 64 events (it asks for the store's enqueue key
// exclusive, which tx holds shared, while others hold it too).
func (s *Store) EnqueueTx(ctx context.Context, tx pgx.Tx, e queue.Event, now clock.Tick) (queue.Enqueued, error) {
	rs, err := s.enqueueTx(ctx, tx, []queue.Event{e}, now, true)
	if err != nil {
		return queue.Enqueued{}, fmt.Errorf("enqueue %q in transaction: %w", e.ID, err)
	}
	return rs[0], nil
}

// EnqueueBatchTx is EnqueueTx for a batch, all or nothing, each event
// checked as EnqueueBatch checks it, in order. An empty batch only checks
// the tick. A batch of more than 64 distinct event IDs (maxIDLocks) locks
// the store's enqueue key exclusive instead of each ID: it waits for every
// enqueue in flight, and until tx ends every other enqueue, plain or
// transactional, waits for tx (claims, settles and other writes go on).
func (s *Store) EnqueueBatchTx(ctx context.Context, tx pgx.Tx, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error) {
	rs, err := s.enqueueTx(ctx, tx, es, now, false)
	if err != nil {
		return nil, fmt.Errorf("enqueue batch in transaction: %w", err)
	}
	return rs, nil
}

// enqueueTx is EnqueueTx and EnqueueBatchTx: checks, then two round
// trips in tx (locks and reads; writes) under a savepoint.
func (s *Store) enqueueTx(ctx context.Context, tx pgx.Tx, es []queue.Event, now clock.Tick, single bool) (_ []queue.Enqueued, err error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: no transaction", queue.ErrInvalid)
	}
	for i, e := range es {
		pre := ""
		if !single {
			pre = fmt.Sprintf("event %d: ", i)
		}
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("%s%w", pre, err)
		}
		if e.Weight != 0 {
			return nil, fmt.Errorf("%s%w: weight %d: a transactional enqueue does not set weights (use SetWeight)", pre, queue.ErrInvalid, e.Weight)
		}
	}
	var (
		mark    int64
		pr      policyRow
		seqs    = make(map[string]int64, len(es))
		dests   = make(map[string]string, len(es)) // the flows' destinations, as flow_seqs records them
		events  = make(map[string]*storedEvent, len(es))
		ids     = make([]string, 0, len(es))
		flowsIn = make([]string, 0, len(es))
	)
	for _, e := range es {
		ids, flowsIn = append(ids, e.ID), append(flowsIn, e.Flow)
	}
	slices.Sort(flowsIn)
	flowsIn = slices.Compact(flowsIn)
	pp := pipe{steps: []step{{what: "savepoint", sql: qSavepoint}}}
	pp.query("read clock mark", func(r pgx.Rows) error {
		return r.Scan(append([]any{&mark}, pr.dest()...)...)
	}, s.q(qReadMark))
	if len(es) > 0 {
		pp.steps = append(pp.steps, s.lockSteps(es)...)
		pp.query("read flows", func(r pgx.Rows) error {
			var f, d string
			var last int64
			if err := r.Scan(&f, &last, &d); err != nil {
				return err
			}
			seqs[f], dests[f] = last, d
			return nil
		}, s.q(qReadSeqs), flowsIn)
		pp.query("find events", func(r pgx.Rows) error {
			var id string
			var e storedEvent
			if err := r.Scan(&id, &e.flow, &e.seq, &e.body); err != nil {
				return err
			}
			events[id] = &e
			return nil
		}, s.q(qFindEvents), ids)
	}
	registered := s.queueDestCheck(&pp, es)
	// From here on every error rolls back to the savepoint, the first
	// statement sent (when that failed too, both errors are returned).
	saved := true
	defer func() {
		if err != nil && saved {
			// Even when ctx has ended (the error may be its end): tx is
			// the caller's, and must not keep half of this call.
			rctx := context.WithoutCancel(ctx)
			if _, rerr := tx.Exec(rctx, qRollbackToSave); rerr != nil {
				err = errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rerr))
				return
			}
			if _, rerr := tx.Exec(rctx, qReleaseSavepoint); rerr != nil {
				err = errors.Join(err, fmt.Errorf("release savepoint: %w", rerr))
			}
		}
	}()
	if err := pp.send(ctx, tx); err != nil {
		return nil, err
	}
	p := pr.policy()
	now, raise, err := s.checkUnlocked(p, mark, now)
	if err != nil {
		return nil, err
	}
	out := make([]queue.Enqueued, len(es))
	var (
		newIDs, newFlows     []string
		newSeqs, newAt       []int64
		bodies               [][]byte
		destFlows, destNames []string // new flows of registered destinations
	)
	for i, e := range es {
		if dup, err := checkEnqueue(p, events, e, i, single); err != nil || dup != nil {
			if err != nil {
				return nil, err
			}
			out[i] = *dup
			continue
		}
		// The flow's destination as the sequence counter (locked)
		// records it: a flow with no event yet takes e's.
		var f *flowRow
		if seqs[e.Flow] > 0 {
			f = &flowRow{dest: dests[e.Flow]}
		}
		isNew, err := checkDestination(eventPrefix(i, e, single), e, registered, f)
		if err != nil {
			return nil, err
		}
		if isNew {
			dests[e.Flow] = e.Destination
			if e.Destination != queue.DefaultDestination {
				destFlows, destNames = append(destFlows, e.Flow), append(destNames, e.Destination)
			}
		}
		seqs[e.Flow]++
		seq := seqs[e.Flow]
		events[e.ID] = &storedEvent{flow: e.Flow, seq: seq, body: e.Body}
		out[i] = queue.Enqueued{Seq: seq}
		newIDs, newFlows, newSeqs = append(newIDs, e.ID), append(newFlows, e.Flow), append(newSeqs, seq)
		newAt, bodies = append(newAt, int64(max(now, e.NotBefore))), append(bodies, e.Body)
	}
	if len(newIDs) > 0 {
		var fl []string
		var last []int64
		for _, f := range flowsIn {
			if slices.Contains(newFlows, f) {
				fl, last = append(fl, f), append(last, seqs[f])
			}
		}
		pp.exec("take sequence numbers", s.q(qSetSeqs), fl, last)
		if len(destFlows) > 0 {
			pp.exec("record destinations", s.q(qSetSeqDests), destFlows, destNames)
		}
		pp.exec("insert events", s.q(qInsertEventsAt), newIDs, newFlows, newSeqs, bodies, newAt, int64(now))
		pp.exec("record arrivals", s.q(qInsertArrivals), fl)
		// Delivered when tx commits, whenever that is: not throttled.
		pp.exec("notify", `SELECT pg_notify($1, '')`, s.channel())
	}
	if !raise {
		pp.exec("release savepoint", qReleaseSavepoint)
	}
	if err := pp.send(ctx, tx); err != nil {
		// At REPEATABLE READ or SERIALIZABLE, tx's snapshot may predate
		// another transaction's enqueue of one of the IDs: the ID lock
		// let this call on and the read above did not see the event. Into
		// the same flow the counter's lock has already failed with a
		// serialization error; into another it is a conflict.
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" && pe.TableName == "events" /* unique_violation */ {
			return nil, fmt.Errorf("%w: an event ID of the call was enqueued into another flow after tx's snapshot: %w", queue.ErrConflict, err)
		}
		return nil, err
	}
	if raise {
		// Every check and statement succeeded: only now may the mark move
		// (a refused write does not move it, docs/contract.md §2.6). Until
		// the savepoint is released, a failed raise still takes the call's
		// statements back.
		if err := s.raiseMark(ctx, now); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, qReleaseSavepoint); err != nil {
			return nil, fmt.Errorf("release savepoint: %w", err)
		}
	}
	saved = false
	return out, nil
}

// checkUnlocked checks now as admitPipe does, against mark read without
// locking the meta row, and returns the (possibly moved) tick and whether
// it is above the mark, which raiseMark then records. It writes nothing.
func (s *Store) checkUnlocked(p queue.Policy, mark int64, now clock.Tick) (clock.Tick, bool, error) {
	if err := p.CheckTick(now); err != nil {
		return 0, false, err
	}
	if s.realTime != nil {
		wall := s.realTime.Now()
		if limit := satAdd(wall, s.skew); now > limit {
			return 0, false, fmt.Errorf("%w: tick %d is more than %d ahead of the wall clock %d", queue.ErrTimeAhead, now, s.skew, wall)
		}
		if now < clock.Tick(mark) && now >= clock.Tick(mark)-s.skew {
			now = clock.Tick(mark)
		}
	}
	next, cerr := clock.Mark(mark).Admit(now)
	if cerr != nil {
		return 0, false, fmt.Errorf("%w: %w", queue.ErrTimeRegression, cerr)
	}
	return now, next != clock.Mark(mark), nil
}

// raiseMark raises the clock mark to now in a short autocommit statement
// on the store's mark connection: a connection of its own, opened from the
// pool's connection settings at the first raise and kept, never one of the
// pool's. The caller's transaction may hold one of the pool's connections,
// as may many callers at once: asking the pool for another could wait for
// ever (a pool of one, or every connection held by a caller in EnqueueTx).
//
// One raise at a time uses the connection; waiting for it ends with ctx. A
// tick this store has already raised the mark to (or past) needs no
// statement: the mark never goes down. A connection whose statement failed
// is closed; when the failure was the connection's (a server restart, an
// idle session ended) the statement is tried once more on a new one (it
// only ever raises, so running it twice is harmless).
func (s *Store) raiseMark(ctx context.Context, now clock.Tick) error {
	if s.markConn.raised.Load() >= int64(now) {
		return nil
	}
	select {
	case s.markConn.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("record clock mark: %w", context.Cause(ctx))
	}
	defer func() { <-s.markConn.turn }()
	if s.markConn.closed {
		return errors.New("record clock mark: the store is closed")
	}
	if s.markConn.raised.Load() >= int64(now) {
		return nil
	}
	var err error
	for try := 0; try < 2; try++ {
		if s.markConn.c == nil {
			c, cerr := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
			if cerr != nil {
				return fmt.Errorf("record clock mark: connect: %w", cerr)
			}
			s.markConn.c = c
		}
		if _, err = s.markConn.c.Exec(ctx, s.q(qRaiseMark), int64(now)); err == nil {
			s.markConn.raised.Store(int64(now))
			return nil
		}
		lost := s.markConn.c.IsClosed() || pgconn.SafeToRetry(err)
		s.markConn.c.Close(context.Background())
		s.markConn.c = nil
		if !lost || ctx.Err() != nil {
			break // the server's answer on a live connection, or the caller gave up
		}
	}
	return fmt.Errorf("record clock mark: %w", err)
}
