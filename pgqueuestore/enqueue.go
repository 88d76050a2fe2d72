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
	qFindFlows = `SELECT k.flow, f.last_seq, f.head_seq IS NOT NULL, f.weight
FROM unnest($1::text[]) AS k(flow) JOIN {s}.flows AS f ON f.flow = k.flow`

	qNewFlow = `INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready)
VALUES ($1, 1, 0, 1, $2, true)`

	qNextSeq = `UPDATE {s}.flows SET
    last_seq = $2,
    head_seq = coalesce(head_seq, $2),
    ready_at = CASE WHEN head_seq IS NULL THEN $3 ELSE ready_at END,
    ready    = CASE WHEN head_seq IS NULL THEN true ELSE ready END
WHERE flow = $1`

	qInsertEvent = `INSERT INTO {s}.events
    (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
     available_at, lease_until, ticket, reason, enqueued_at)
VALUES ($1, $2, $3, $4, 'pending', 0, 0, 0, $5, 0, 0, '', $5)`
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
	var out queue.Enqueued
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, m, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		rs, err := s.enqueueEvents(ctx, tx, m.policy, []queue.Event{e}, now, true)
		if err != nil {
			return err
		}
		out = rs[0]
		return nil
	})
	if err != nil {
		return queue.Enqueued{}, fmt.Errorf("enqueue %q: %w", e.ID, err)
	}
	return out, nil
}

// EnqueueBatch enqueues all events in one transaction: all or nothing, each
// checked as Enqueue would, in order (an ID repeated inside the batch is a
// duplicate or a conflict of its first occurrence). An empty batch only
// checks and records now.
func (s *Store) EnqueueBatch(ctx context.Context, es []queue.Event, now clock.Tick) ([]queue.Enqueued, error) {
	for i, e := range es {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("enqueue batch: event %d: %w", i, err)
		}
	}
	var out []queue.Enqueued
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, m, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		out, err = s.enqueueEvents(ctx, tx, m.policy, es, now, false)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue batch: %w", err)
	}
	return out, nil
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
}

// enqueueEvents enqueues es in order inside tx (after admit) in two round
// trips, with the results, errors and writes of enqueueing them one after
// the other (enqueueOne of earlier versions, DECISIONS.md "Batch
// operations in few round trips"): one pipe reads every stored event with
// one of the IDs (qFindEvents) and every existing flow of the events
// (qFindFlows); the checks then run in Go, event by event, on those rows
// as the earlier events leave them (an insert adds an event; a sequence
// number moves the flow's last seq and gives it a head; a weight changes
// its weight), and the writes of every event go to the server in one
// pipe, in event order, statement for statement those of one Enqueue:
// take the sequence number (the first write), set the weight, join the
// rotation, the hook, insert the event. With single, errors are those of
// Enqueue; without, each is prefixed with its event's index and ID.
func (s *Store) enqueueEvents(ctx context.Context, tx pgx.Tx, p queue.Policy, es []queue.Event, now clock.Tick, single bool) ([]queue.Enqueued, error) {
	out := make([]queue.Enqueued, len(es))
	if len(es) == 0 {
		return out, nil
	}
	ids, flowNames := make([]string, 0, len(es)), make([]string, 0, len(es))
	events := make(map[string]*storedEvent, len(es))
	flows := make(map[string]*flowRow, len(es))
	seenFlow := make(map[string]bool, len(es))
	for _, e := range es {
		ids = append(ids, e.ID)
		if !seenFlow[e.Flow] {
			seenFlow[e.Flow] = true
			flowNames = append(flowNames, e.Flow)
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
		events[id] = &e
		return nil
	}, s.q(qFindEvents), ids)
	pp.query("find flows", func(r pgx.Rows) error {
		var (
			flow string
			f    flowRow
		)
		if err := r.Scan(&flow, &f.last, &f.hasHead, &f.weight); err != nil {
			return err
		}
		flows[flow] = &f
		return nil
	}, s.q(qFindFlows), flowNames)
	if err := pp.send(ctx, tx); err != nil {
		return nil, err
	}
	added := false
	for i, e := range es {
		pre := ""
		if !single {
			pre = fmt.Sprintf("event %d (%q): ", i, e.ID)
		}
		if st := events[e.ID]; st != nil {
			if st.flow == e.Flow && bytes.Equal(st.body, e.Body) {
				out[i] = queue.Enqueued{Seq: st.seq, Duplicate: true}
				continue
			}
			return nil, fmt.Errorf("%s%w: stored in flow %q as seq %d", pre, queue.ErrConflict, st.flow, st.seq)
		}
		seq, err := s.enqueueEvent(&pp, pre, p, e, flows, now)
		if err != nil {
			return nil, err
		}
		events[e.ID] = &storedEvent{flow: e.Flow, seq: seq, body: e.Body}
		out[i] = queue.Enqueued{Seq: seq}
		added = true
	}
	if added {
		s.wakePipe(&pp, "")
	}
	if err := pp.send(ctx, tx); err != nil {
		return nil, err
	}
	return out, nil
}

// enqueueEvent queues the writes of one new event on pp (pre prefixes
// their errors), calls the hook between the sequence number and the
// insert, updates flows as the writes will leave the event's flow, and
// returns the event's sequence number. An event with a weight, or any
// event under FairRotation, also sets the flow's weight and joins the
// rotation, in queuestore's order.
func (s *Store) enqueueEvent(pp *pipe, pre string, p queue.Policy, e queue.Event, flows map[string]*flowRow, now clock.Tick) (int64, error) {
	weighted := e.Weight != 0 || rotation(p)
	next := int64(1)
	arrives := true
	if f := flows[e.Flow]; f != nil {
		old := queue.MinWeight
		if weighted {
			old, arrives = f.weight, !f.hasHead
		}
		next = f.last + 1
		pp.exec(pre+"take sequence number", s.q(qNextSeq), e.Flow, next, int64(now))
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
		pp.exec(pre+"take sequence number", s.q(qNewFlow), e.Flow, int64(now))
		w := queue.MinWeight
		if e.Weight != 0 && e.Weight != queue.MinWeight {
			pp.exec(pre+"set weight", s.q(qSetWeight), e.Flow, e.Weight)
			w = e.Weight
		}
		flows[e.Flow] = &flowRow{last: 1, hasHead: true, weight: w}
	}
	if rotation(p) && arrives {
		pp.exec(pre+"join rotation", s.q(qRotArrive), e.Flow)
		pp.exec(pre+"join rotation", s.q(qRotJoin))
	}
	s.call(queue.HookEnqueueSeqTaken)
	pp.exec(pre+"insert event", s.q(qInsertEvent), e.ID, e.Flow, next, e.Body, int64(now))
	return next, nil
}
