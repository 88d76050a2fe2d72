package pgqueuestore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

const (
	// qFindEvents reads the stored events with an ID of the array $1 (no
	// row for an ID not stored): one primary key probe per ID.
	qFindEvents = `SELECT k.id, e.flow, e.seq, e.body
FROM unnest($1::text[]) AS k(id) JOIN {s}.events AS e ON e.id = k.id`

	// qFindFlows reads the existing flows named in the array $1: the last
	// seq, whether the flow has a head, the weight (what qFlowHeadWeight
	// reads of one flow). One primary key probe per name.
	qFindFlows = `SELECT k.flow, f.last_seq, f.head_seq IS NOT NULL, f.weight, f.dest
FROM unnest($1::text[]) AS k(flow) JOIN {s}.flows AS f ON f.flow = k.flow`

	// qNewFlow makes flow $1 with its first event as head, enqueued at $2
	// and available at $3 (later than $2 for a scheduled event: not ready
	// until then), delivering to destination $4.
	qNewFlow = `INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready, head_enqueued_at, dest)
VALUES ($1, 1, 0, 1, $3::bigint, $3::bigint <= $2::bigint, $2::bigint, $4)`

	// qNextSeq gives flow $1 its event $2, enqueued at $3 and available
	// at $4: the flow's head when it has none (ready when available and
	// the flow is not paused).
	qNextSeq = `UPDATE {s}.flows SET
    last_seq = $2,
    head_seq = coalesce(head_seq, $2),
    ready_at = CASE WHEN head_seq IS NULL THEN $4::bigint ELSE ready_at END,
    ready    = CASE WHEN head_seq IS NULL THEN $4::bigint <= $3::bigint AND paused IS NULL ELSE ready END,
    head_enqueued_at = CASE WHEN head_seq IS NULL THEN $3::bigint ELSE head_enqueued_at END
WHERE flow = $1`

	// The set forms of qNewFlow, qNextSeq and qInsertEvent (enqueueSets).
	// The head's available_at is in $4 (qNewFlows) and $5 (qNextSeqs).
	qNewFlows = `INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready, head_enqueued_at, dest)
SELECT u.flow, u.last, 0, 1, u.at, u.at <= $3::bigint, $3, u.dest
FROM unnest($1::text[], $2::bigint[], $4::bigint[], $5::text[]) AS u(flow, last, at, dest)`

	// qSetSeqDests records the destinations ($2) of new flows ($1) in
	// their sequence counters, where an enqueue in a caller's transaction
	// checks them (only for flows of a registered destination).
	qSetSeqDests = `UPDATE {s}.flow_seqs AS q SET dest = u.dest
FROM unnest($1::text[], $2::text[]) AS u(flow, dest) WHERE q.flow = u.flow`
	qNextSeqs = `UPDATE {s}.flows AS f SET
    last_seq = u.last,
    head_seq = coalesce(f.head_seq, u.first),
    ready_at = CASE WHEN f.head_seq IS NULL THEN u.at ELSE f.ready_at END,
    ready    = CASE WHEN f.head_seq IS NULL THEN u.at <= $4::bigint AND f.paused IS NULL ELSE f.ready END,
    head_enqueued_at = CASE WHEN f.head_seq IS NULL THEN $4 ELSE f.head_enqueued_at END
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $5::bigint[]) AS u(flow, first, last, at)
WHERE f.flow = u.flow`
	qInsertEvent = `INSERT INTO {s}.events
    (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
     available_at, lease_until, ticket, reason, enqueued_at)
VALUES ($1, $2, $3, $4, 'pending', 0, 0, 0, $6, 0, 0, '', $5)`
)

// Enqueue stores e as the next event of its flow, pending and available at
// now, in one transaction. The same ID again with the same flow and
// byte-identical body returns the stored sequence number with Duplicate set
// and changes nothing but the clock mark; with another flow or body it is
// queue.ErrConflict and changes nothing. Bad input is queue.ErrInvalid; a
// tick below the clock mark is queue.ErrTimeRegression. A non-zero
// e.Weight gives a new flow its weight, or changes an existing flow's with
// a 'weight' audit row of reason ReasonEnqueueWeight (docs/contract.md
// §7.6); under FairRotation an enqueue that gives its flow a head joins the
// flow at the rotation's tail.
func (s *Store) Enqueue(ctx context.Context, e queue.Event, now clock.Tick) (queue.Enqueued, error) {
	if err := e.Validate(); err != nil {
		return queue.Enqueued{}, fmt.Errorf("enqueue: %w", err)
	}
	rs, err := s.enqueue(ctx, []queue.Event{e}, now, true)
	if err != nil {
		return queue.Enqueued{}, fmt.Errorf("enqueue %q: %w", e.ID, err)
	}
	return rs[0], nil
}

// EnqueueBatch enqueues all events in one transaction: all or nothing, each
// checked as Enqueue would, in order (an ID repeated inside the batch is a
// duplicate or a conflict of its first occurrence). An empty batch only
// checks and records now. A batch of more than 64 distinct event IDs
// (maxIDLocks) takes one lock, the store's enqueue key exclusive, instead
// of one per ID (lockSteps): before it begins it waits for every enqueue in
// flight, callers' open transactions that enqueued included, and the
// enqueues that come after it wait for it to commit.
func (s *Store) EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error) {
	for i, e := range es {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("enqueue batch: event %d: %w", i, err)
		}
	}
	out, err := s.enqueue(ctx, es, now, false)
	if err != nil {
		return nil, fmt.Errorf("enqueue batch: %w", err)
	}
	return out, nil
}

// enqueue is Enqueue (single) and EnqueueBatch in two round trips: the
// first locks (lockSteps), locks the meta row and reads what the checks
// need (enqueueReads), the second writes and commits. When the
// turn promoted arrivals (a flow's row may have moved since it was read),
// the flows are read again with the writes' first statements, a round
// trip more.
func (s *Store) enqueue(ctx context.Context, es []queue.Event, now clock.Tick, single bool) ([]queue.Enqueued, error) {
	var out []queue.Enqueued
	var locks []step
	if len(es) > 0 {
		locks = s.lockSteps(es)
	}
	rd, reads := s.enqueueReads(es)
	err := s.withTxRead(ctx, locks, reads, func(tx pgx.Tx, a admission, stale bool, pp *pipe) error {
		now, m, err := s.admitPipe(ctx, tx, a, now, pp)
		if err != nil {
			return err
		}
		if stale && len(es) > 0 {
			clear(rd.flows)
			rd.queueFlows(pp, s.q)
			if err := pp.send(ctx, tx); err != nil {
				return err
			}
		}
		out, err = s.enqueueEvents(pp, m.policy, es, now, single, rd)
		return err
	})
	return out, err
}

// storedEvent is what qFindEvents read of a stored event (or what this
// batch inserted).
type storedEvent struct {
	flow string
	seq  int64
	body []byte
}

// flowRow is what qFindFlows read of a flow (or what this batch made of
// it): its last seq, whether it has a head, its weight.
type flowRow struct {
	last    int64
	hasHead bool
	weight  int
	dest    string
}

// enqueueRead is what an enqueue reads before its checks (enqueueReads):
// the stored events with one of its IDs, the existing flows of its
// events, and which of the destinations its events name are registered
// (nil when none names one).
type enqueueRead struct {
	flowNames  []string
	events     map[string]*storedEvent
	flows      map[string]*flowRow
	registered map[string]bool
}

// enqueueReads returns the reads of an enqueue of es, to run once its
// locks are held (none for no event), and what they fill: every stored
// event with one of the IDs (qFindEvents), every existing flow of the
// events (qFindFlows), the registered destinations (queueDestCheck).
func (s *Store) enqueueReads(es []queue.Event) (*enqueueRead, []step) {
	rd := &enqueueRead{
		events: make(map[string]*storedEvent, len(es)),
		flows:  make(map[string]*flowRow, len(es)),
	}
	if len(es) == 0 {
		return rd, nil
	}
	ids := make([]string, 0, len(es))
	seenFlow := make(map[string]bool, len(es))
	for _, e := range es {
		ids = append(ids, e.ID)
		if !seenFlow[e.Flow] {
			seenFlow[e.Flow] = true
			rd.flowNames = append(rd.flowNames, e.Flow)
		}
	}
	var pp pipe
	pp.query("find events", func(r pgx.Rows) error {
		var (
			id string
			e  storedEvent
		)
		if err := r.Scan(&id, &e.flow, &e.seq, &e.body); err != nil {
			return err
		}
		rd.events[id] = &e
		return nil
	}, s.q(qFindEvents), ids)
	rd.queueFlows(&pp, s.q)
	rd.registered = s.queueDestCheck(&pp, es)
	return rd, pp.steps
}

// queueFlows queues the read of the existing flows into rd.flows.
func (rd *enqueueRead) queueFlows(pp *pipe, q func(string) string) {
	pp.query("find flows", func(r pgx.Rows) error {
		var (
			flow string
			f    flowRow
		)
		if err := r.Scan(&flow, &f.last, &f.hasHead, &f.weight, &f.dest); err != nil {
			return err
		}
		rd.flows[flow] = &f
		return nil
	}, q(qFindFlows), rd.flowNames)
}

// enqueueEvents enqueues es in order inside tx (after admit), with the
// results, errors and writes of enqueueing them one after the other
// (enqueueOne of earlier versions,
// docs/decisions/postgres-batch-round-trips.md), on what rd read: the
// checks run in Go, event by event, on those rows as the earlier events
// leave them (an insert adds an event; a sequence number moves the flow's
// last seq and gives it a head; a weight changes its weight), and the
// writes are queued on pp, after what it holds, to go with COMMIT: without
// weights under FairMinServed as three set statements (enqueueSets), else
// per event, in event order, the statements of one Enqueue (take the
// sequence number, set the weight, join the rotation, the hook, insert the
// event: enqueueEvent). With single, errors are those of Enqueue; without,
// each is prefixed with its event's index and ID.
func (s *Store) enqueueEvents(pp *pipe, p queue.Policy, es []queue.Event, now clock.Tick, single bool, rd *enqueueRead) ([]queue.Enqueued, error) {
	out := make([]queue.Enqueued, len(es))
	if len(es) == 0 {
		return out, nil
	}
	events, flows, registered := rd.events, rd.flows, rd.registered
	// Without weights and rotation an event's writes are its flow's
	// sequence number and its insert: a batch of those is written by one
	// statement per kind (enqueueSets).
	plain := !rotation(p)
	for _, e := range es {
		plain = plain && e.Weight == 0
	}
	var sets enqueueSets
	var seqFlows []string
	var destFlows, destNames []string // new flows of registered destinations
	seqSeen := make(map[string]bool)
	added := false
	for i, e := range es {
		if dup, err := checkEnqueue(p, events, e, i, single); err != nil || dup != nil {
			if err != nil {
				return nil, err
			}
			out[i] = *dup
			continue
		}
		isNew, err := checkDestination(eventPrefix(i, e, single), e, registered, flows[e.Flow])
		if err != nil {
			return nil, err
		}
		if isNew && e.Destination != queue.DefaultDestination {
			destFlows, destNames = append(destFlows, e.Flow), append(destNames, e.Destination)
		}
		var seq int64
		if plain {
			seq = sets.add(e, flows, max(now, e.NotBefore))
			s.call(queue.HookEnqueueSeqTaken)
		} else {
			var err error
			if seq, err = s.enqueueEvent(pp, eventPrefix(i, e, single), p, e, flows, now); err != nil {
				return nil, err
			}
		}
		events[e.ID] = &storedEvent{flow: e.Flow, seq: seq, body: e.Body}
		out[i] = queue.Enqueued{Seq: seq}
		if !seqSeen[e.Flow] {
			seqSeen[e.Flow] = true
			seqFlows = append(seqFlows, e.Flow)
		}
		added = true
	}
	sets.queue(pp, s.q, now)
	if added {
		// The flows' sequence counters (locked by lockSteps) follow.
		lasts := make([]int64, len(seqFlows))
		for k, f := range seqFlows {
			lasts[k] = flows[f].last
		}
		pp.exec("take sequence numbers", s.q(qSetSeqs), seqFlows, lasts)
		if len(destFlows) > 0 {
			pp.exec("record destinations", s.q(qSetSeqDests), destFlows, destNames)
		}
	}
	if added {
		s.wakePipe(pp, "")
	}
	return out, nil
}

// enqueueSets gathers the writes of a batch of events without weights
// under FairMinServed: the new flows (qNewFlows), the existing flows'
// sequence numbers (qNextSeqs), the events (qInsertEventsAt). One statement
// per kind leaves the rows as the events' statements one after the other
// would: a new flow ends with last_seq at its number of events and head
// 1; an existing flow with last_seq at its last event's seq, and a head,
// ready at now, only when it had none (as the first qNextSeq makes it).
type enqueueSets struct {
	newFlows, oldFlows []string
	newLast            []int64
	oldFirst, oldLast  []int64
	newAt, oldAt       []int64        // the heads' available_at
	newDest            []string       // the new flows' destinations
	slot               map[string]int // index in newFlows (>= 0) or -1 - index in oldFlows
	ids, evFlows       []string
	seqs, ats          []int64
	bodies             [][]byte
}

// add records event e, available at at, and returns its sequence number,
// updating flows.
func (w *enqueueSets) add(e queue.Event, flows map[string]*flowRow, at clock.Tick) int64 {
	if w.slot == nil {
		w.slot = make(map[string]int)
	}
	f := flows[e.Flow]
	if f == nil {
		f = &flowRow{weight: queue.MinWeight, dest: e.Destination}
		flows[e.Flow] = f
		w.slot[e.Flow] = len(w.newFlows)
		w.newFlows, w.newLast, w.newAt = append(w.newFlows, e.Flow), append(w.newLast, 0), append(w.newAt, int64(at))
		w.newDest = append(w.newDest, e.Destination)
	} else if _, ok := w.slot[e.Flow]; !ok {
		w.slot[e.Flow] = -1 - len(w.oldFlows)
		w.oldFlows, w.oldFirst, w.oldLast = append(w.oldFlows, e.Flow), append(w.oldFirst, f.last+1), append(w.oldLast, 0)
		w.oldAt = append(w.oldAt, int64(at))
	}
	f.last, f.hasHead = f.last+1, true
	if k := w.slot[e.Flow]; k >= 0 {
		w.newLast[k] = f.last
	} else {
		w.oldLast[-1-k] = f.last
	}
	w.ids, w.evFlows = append(w.ids, e.ID), append(w.evFlows, e.Flow)
	w.seqs, w.bodies, w.ats = append(w.seqs, f.last), append(w.bodies, e.Body), append(w.ats, int64(at))
	return f.last
}

// queue queues the statements on pp: flows first (the events reference
// them).
func (w *enqueueSets) queue(pp *pipe, q func(string) string, now clock.Tick) {
	if len(w.newFlows) > 0 {
		pp.exec("take sequence numbers", q(qNewFlows), w.newFlows, w.newLast, int64(now), w.newAt, w.newDest)
	}
	if len(w.oldFlows) > 0 {
		pp.exec("take sequence numbers", q(qNextSeqs), w.oldFlows, w.oldFirst, w.oldLast, int64(now), w.oldAt)
	}
	if len(w.ids) > 0 {
		pp.exec("insert events", q(qInsertEventsAt), w.ids, w.evFlows, w.seqs, w.bodies, w.ats, int64(now))
	}
}

// enqueueEvent queues the writes of one new event on pp (pre prefixes
// their errors), calls the hook between the sequence number and the
// insert, updates flows as the writes will leave the event's flow, and
// returns the event's sequence number. An event with a weight, or any
// event under FairRotation, also sets the flow's weight and joins the
// rotation, in queuestore's order.
func (s *Store) enqueueEvent(pp *pipe, pre string, p queue.Policy, e queue.Event, flows map[string]*flowRow, now clock.Tick) (int64, error) {
	weighted := e.Weight != 0 || rotation(p)
	at := max(now, e.NotBefore)
	next := int64(1)
	arrives := true
	if f := flows[e.Flow]; f != nil {
		old := queue.MinWeight
		if weighted {
			old, arrives = f.weight, !f.hasHead
		}
		next = f.last + 1
		pp.exec(pre+"take sequence number", s.q(qNextSeq), e.Flow, next, int64(now), int64(at))
		if e.Weight != 0 && e.Weight != old {
			detail, err := json.Marshal(WeightChange{Flow: e.Flow, Old: old, New: e.Weight})
			if err != nil {
				return 0, fmt.Errorf("%sencode weight change: %w", pre, err)
			}
			pp.exec(pre+"set weight", s.q(qSetWeight), e.Flow, e.Weight)
			pp.exec(pre+"insert audit", s.q(qInsertAuditKind), string(queue.AuditWeight), ReasonEnqueueWeight, string(detail), int64(now))
			f.weight = e.Weight
		}
		f.last, f.hasHead = next, true
	} else {
		pp.exec(pre+"take sequence number", s.q(qNewFlow), e.Flow, int64(now), int64(at), e.Destination)
		w := queue.MinWeight
		if e.Weight != 0 && e.Weight != queue.MinWeight {
			pp.exec(pre+"set weight", s.q(qSetWeight), e.Flow, e.Weight)
			w = e.Weight
		}
		flows[e.Flow] = &flowRow{last: 1, hasHead: true, weight: w, dest: e.Destination}
	}
	if rotation(p) && arrives {
		pp.exec(pre+"join rotation", s.q(qRotArrive), e.Flow)
		pp.exec(pre+"join rotation", s.q(qRotJoin))
	}
	s.call(queue.HookEnqueueSeqTaken)
	pp.exec(pre+"insert event", s.q(qInsertEvent), e.ID, e.Flow, next, e.Body, int64(now), int64(at))
	return next, nil
}

// checkEnqueue is an enqueue's check of its event e (number i of a batch;
// single: of Enqueue) against the events stored or taken before it: a
// NotBefore the policy refuses, first, as queuestore checks it; then a
// Duplicate of a stored event with the same flow and body (returned), or
// queue.ErrConflict for another flow or body; nil, nil for a new event.
func checkEnqueue(p queue.Policy, events map[string]*storedEvent, e queue.Event, i int, single bool) (*queue.Enqueued, error) {
	pre := eventPrefix(i, e, single)
	if err := p.CheckTick(e.NotBefore); err != nil {
		return nil, fmt.Errorf("%snot-before: %w", pre, err)
	}
	if st := events[e.ID]; st != nil {
		if st.flow == e.Flow && bytes.Equal(st.body, e.Body) {
			return &queue.Enqueued{Seq: st.seq, Duplicate: true}, nil
		}
		return nil, fmt.Errorf("%s%w: stored in flow %q as seq %d", pre, queue.ErrConflict, st.flow, st.seq)
	}
	return nil, nil
}

// eventPrefix is what an enqueue's errors about e start with: nothing for
// Enqueue (single), the event's number and ID in a batch.
func eventPrefix(i int, e queue.Event, single bool) string {
	if single {
		return ""
	}
	return fmt.Sprintf("event %d (%q): ", i, e.ID)
}
