package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/fairness"
	"github.com/fairrelay/fairrelay/queue"
)

// model is a small in-memory reference of the contract (docs/contract.md §2), written
// from docs/contract.md and not from the store's SQL: flows hold no head cache, the
// head is found by walking the flow's events, and the pick is
// fairness.MinServed over the dispatchable heads. Under FairRotation
// (docs/contract.md §7.6) the pick is rot's, fairness.Rotation ("its exact
// model", §7.6), driven by the same operations: Arrive when an enqueue
// gives a flow a head, Block when a claim or quarantine takes the head out
// of the ready set, Ready where a store turns its ready flag on (an ack
// whose next head is due, a redrive, the promotion of due heads at the
// start of a claim: docs/fairness.md §8, the same statements on both
// backends), Leave at the last ack, SetWeight.
type model struct {
	pol    queue.Policy // the store's policy (docs/contract.md §7.1)
	mark   clock.Tick
	ticket int64
	flows  map[string]*mFlow
	events map[string]*queue.SnapshotEvent
	// audit is every audit row of every kind in write order; their IDs
	// are one count without holes (docs/contract.md §7.7).
	audit []queue.AuditRecord
	rot   *fairness.Rotation // nil under FairMinServed
	// history is each event's failed attempts, oldest first, at most
	// queue.MaxHistory (docs/contract.md §7.8).
	history map[string][]queue.Attempt
	// ackedAt is each acked event's ack tick (docs/contract.md §7.9).
	ackedAt map[string]clock.Tick
}

type mFlow struct {
	lastSeq, served int64
	weight          int                    // 1 unless an enqueue or SetWeight gave another
	events          []*queue.SnapshotEvent // by seq
}

func newModel() *model { return newModelPolicy(queue.DefaultPolicy()) }

func newModelPolicy(p queue.Policy) *model {
	m := &model{pol: p, flows: map[string]*mFlow{}, events: map[string]*queue.SnapshotEvent{}, history: map[string][]queue.Attempt{},
		ackedAt: map[string]clock.Tick{}}
	if p.Fairness == queue.FairRotation {
		m.rot = &fairness.Rotation{}
	}
	return m
}

// fail records a failed attempt of e at now (docs/contract.md §7.8): the
// claim's generation and attempt, keeping the latest queue.MaxHistory.
func (m *model) fail(e *queue.SnapshotEvent, o queue.Outcome, reason, errText string, now clock.Tick) {
	h := append(m.history[e.ID], queue.Attempt{At: now, Generation: e.Generation, Attempt: e.Attempts, Outcome: o, Reason: reason, Error: errText})
	if len(h) > queue.MaxHistory {
		h = append([]queue.Attempt(nil), h[len(h)-queue.MaxHistory:]...)
	}
	m.history[e.ID] = h
}

// errorOf is the Error the stores report for event e: the error of its
// history row at its current generation, else "".
func (m *model) errorOf(e *queue.SnapshotEvent) string {
	h := m.history[e.ID]
	if n := len(h); n > 0 && h[n-1].Generation == e.Generation {
		return h[n-1].Error
	}
	return ""
}

// addAudit appends an audit row with the next ID.
func (m *model) addAudit(a queue.AuditRecord) {
	a.ID = int64(len(m.audit) + 1)
	m.audit = append(m.audit, a)
}

// setWeight records known flow f's new weight w with its 'weight' audit
// row (docs/contract.md §7.6: detail {"flow":…,"old":…,"new":…}).
func (m *model) setWeight(name string, f *mFlow, w int, reason string, now clock.Tick) {
	b, err := json.Marshal(queue.WeightChange{Flow: name, Old: f.weight, New: w})
	if err != nil {
		panic(err)
	}
	f.weight = w
	m.addAudit(queue.AuditRecord{Kind: queue.AuditWeight, Reason: reason, Detail: string(b), At: now})
	if m.rot != nil {
		if err := m.rot.SetWeight(name, w); err != nil {
			panic(err)
		}
	}
}

// rotDo applies a rotation operation; an error is a bug of the model.
func (m *model) rotDo(op func(string) error, flow string) {
	if m.rot == nil {
		return
	}
	if err := op(flow); err != nil {
		panic(fmt.Sprintf("model rotation: %v", err))
	}
}

// setWeightOp is SetWeight (docs/contract.md §7.6), its checks in the
// stores' order: the weight, the reason, the flow name, the tick, the flow.
func (m *model) setWeightOp(flow string, w int, reason string, now clock.Tick) error {
	if w < queue.MinWeight || w > queue.MaxWeight {
		return queue.ErrInvalid
	}
	if reason == "" {
		return queue.ErrEmptyReason
	}
	if queue.CheckReason(reason) != nil || queue.CheckFlow(flow) != nil {
		return queue.ErrInvalid
	}
	if err := m.admit(now); err != nil {
		return err
	}
	f := m.flows[flow]
	if f == nil {
		return queue.ErrNotFound
	}
	m.setWeight(flow, f, w, reason, now)
	m.mark = now
	return nil
}

// admit is the §2.6 check; the mark is only written by a successful op.
func (m *model) admit(now clock.Tick) error {
	if now < m.mark {
		return queue.ErrTimeRegression
	}
	return nil
}

func (m *model) enqueueOne(e queue.Event, now clock.Tick) (queue.Enqueued, error) {
	if old, ok := m.events[e.ID]; ok {
		if old.Flow == e.Flow && string(old.Body) == string(e.Body) {
			return queue.Enqueued{Seq: old.Seq, Duplicate: true}, nil
		}
		return queue.Enqueued{}, queue.ErrConflict
	}
	f := m.flows[e.Flow]
	if f == nil {
		f = &mFlow{weight: queue.MinWeight}
		m.flows[e.Flow] = f
		if e.Weight != 0 {
			f.weight = e.Weight
		}
		if m.rot != nil {
			if err := m.rot.SetWeight(e.Flow, f.weight); err != nil {
				panic(err)
			}
		}
	} else if e.Weight != 0 && e.Weight != f.weight {
		m.setWeight(e.Flow, f, e.Weight, queue.ReasonEnqueueWeight, now)
	}
	arrives := m.head(f) == nil
	if arrives { // arrive: join at the tail
		m.rotDo(m.rot.Arrive, e.Flow)
	}
	f.lastSeq++
	// A scheduled event (docs/contract.md §7.9) is available at its
	// NotBefore when that is later than now.
	ev := &queue.SnapshotEvent{ID: e.ID, Flow: e.Flow, Seq: f.lastSeq, Body: queue.Bytes(string(e.Body)), State: queue.StatePending,
		AvailableAt: max(now, e.NotBefore), EnqueuedAt: now}
	f.events = append(f.events, ev)
	m.events[e.ID] = ev
	if arrives && ev.AvailableAt > now { // a scheduled head waits for its tick
		m.rotDo(m.rot.Block, e.Flow)
	}
	return queue.Enqueued{Seq: f.lastSeq}, nil
}

func (m *model) enqueueBatch(es []queue.Event, now clock.Tick) ([]queue.Enqueued, error) {
	for _, e := range es {
		if err := e.Validate(); err != nil {
			return nil, queue.ErrInvalid
		}
	}
	if err := m.admit(now); err != nil {
		return nil, err
	}
	// A conflict refuses the whole batch: try it on a copy first (the
	// rotation, which cannot be copied, is not touched by the try).
	try := m.clone()
	try.rot = nil
	for _, e := range es {
		if _, err := try.enqueueOne(e, now); err != nil {
			return nil, err
		}
	}
	out := make([]queue.Enqueued, len(es))
	for i, e := range es {
		r, err := m.enqueueOne(e, now)
		if err != nil {
			panic(err)
		}
		out[i] = r
	}
	m.mark = now
	return out, nil
}

func (m *model) head(f *mFlow) *queue.SnapshotEvent {
	for _, e := range f.events {
		if e.State != queue.StateAcked {
			return e
		}
	}
	return nil
}

func (m *model) claim(now clock.Tick, n int) ([]queue.Claim, error) {
	if err := m.admit(now); err != nil {
		return nil, err
	}
	if m.rot != nil {
		return m.claimRot(now, n), nil
	}
	var out []queue.Claim
	for len(out) < n {
		var cands []fairness.Candidate
		heads := map[string]*queue.SnapshotEvent{}
		for name, f := range m.flows {
			if h := m.head(f); dispatchable(h, now) {
				cands = append(cands, fairness.Candidate{Flow: name, Served: f.served})
				heads[name] = h
			}
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].Flow < cands[j].Flow })
		i, ok := fairness.MinServed.Select(cands)
		if !ok {
			break
		}
		h := heads[cands[i].Flow]
		if h.State == queue.StateInflight && h.Attempts >= m.pol.MaxAttempts {
			h.State, h.Reason, h.LeaseUntil = queue.StateQuarantined, queue.ReasonLeaseExpired, 0
			m.fail(h, queue.Quarantined, queue.ReasonLeaseExpired, "", now)
			continue
		}
		m.flows[h.Flow].served++
		out = append(out, m.take(h, now))
	}
	m.mark = now
	return out, nil
}

// take claims head h at now: a ticket, a generation, an attempt, a lease.
func (m *model) take(h *queue.SnapshotEvent, now clock.Tick) queue.Claim {
	m.ticket++
	h.Generation++
	h.Attempts++
	h.LifetimeAttempts++
	h.State = queue.StateInflight
	h.LeaseUntil = now + m.pol.Lease
	h.Ticket = m.ticket
	return queue.Claim{EventID: h.ID, Flow: h.Flow, Seq: h.Seq, Body: []byte(h.Body), Generation: h.Generation,
		Attempts: h.Attempts, Ticket: h.Ticket, LeaseUntil: h.LeaseUntil}
}

// dispatchable reports whether head h can be claimed at now.
func dispatchable(h *queue.SnapshotEvent, now clock.Tick) bool {
	return h != nil && ((h.State == queue.StatePending && h.AvailableAt <= now) || (h.State == queue.StateInflight && now >= h.LeaseUntil))
}

// claimRot is claim under FairRotation: the heads that have become due
// return (Ready: P = max(P, vnow)), then each claim is the rotation's pick;
// a used-up take-over is quarantined and costs nothing (Block).
func (m *model) claimRot(now clock.Tick, n int) []queue.Claim {
	names := make([]string, 0, len(m.flows))
	for name := range m.flows {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rf, _ := m.rot.Flow(name)
		if h := m.head(m.flows[name]); !rf.Ready && dispatchable(h, now) {
			m.rotDo(m.rot.Ready, name)
		}
	}
	var out []queue.Claim
	for len(out) < n {
		name, ok := m.rot.Peek()
		if !ok {
			break
		}
		f := m.flows[name]
		h := m.head(f)
		if !dispatchable(h, now) {
			panic(fmt.Sprintf("model rotation picks %q whose head is not dispatchable", name))
		}
		if h.State == queue.StateInflight && h.Attempts >= m.pol.MaxAttempts {
			h.State, h.Reason, h.LeaseUntil = queue.StateQuarantined, queue.ReasonLeaseExpired, 0
			m.fail(h, queue.Quarantined, queue.ReasonLeaseExpired, "", now)
			m.rotDo(m.rot.Block, name)
			continue
		}
		m.rot.Pick()
		m.rotDo(m.rot.Block, name)
		f.served++
		out = append(out, m.take(h, now))
	}
	m.mark = now
	return out
}

func (m *model) settleOne(it queue.SettleItem, now clock.Tick) (queue.Outcome, error) {
	if err := it.Validate(); err != nil {
		return "", queue.ErrInvalid
	}
	e := m.events[it.EventID]
	switch {
	case e == nil:
		return "", queue.ErrNotFound
	case it.Generation != e.Generation || e.State != queue.StateInflight:
		return queue.Stale, nil
	case now >= e.LeaseUntil:
		return queue.Expired, nil
	case it.Result.OK:
		e.State, e.LeaseUntil = queue.StateAcked, 0
		m.ackedAt[e.ID] = now
		if m.rot != nil {
			switch h := m.head(m.flows[e.Flow]); {
			case h == nil:
				m.rotDo(m.rot.Leave, e.Flow)
			case h.AvailableAt <= now: // the next head returns at once
				m.rotDo(m.rot.Ready, e.Flow)
			}
		}
		return queue.Acked, nil
	case e.Attempts < m.pol.MaxAttempts && !it.Result.Permanent:
		wait := m.pol.Delay(e.ID, e.Generation, e.Attempts)
		if ra := min(it.Result.RetryAfter, m.pol.RetryAfterLimit()); ra > wait {
			wait = ra // §7.8: max(backoff, retry-after), capped by the policy's limit
		}
		e.State, e.LeaseUntil, e.AvailableAt, e.Reason = queue.StatePending, 0, now+wait, it.Result.Reason
		m.fail(e, queue.RetryScheduled, it.Result.Reason, it.Result.Error, now)
		return queue.RetryScheduled, nil
	default: // the round's last attempt, or a permanent failure
		e.State, e.LeaseUntil, e.Reason = queue.StateQuarantined, 0, it.Result.Reason
		m.fail(e, queue.Quarantined, it.Result.Reason, it.Result.Error, now)
		return queue.Quarantined, nil
	}
}

func (m *model) settle(it queue.SettleItem, now clock.Tick) (queue.Outcome, error) {
	if err := it.Validate(); err != nil {
		return "", queue.ErrInvalid
	}
	if err := m.admit(now); err != nil {
		return "", err
	}
	o, err := m.settleOne(it, now)
	if err == nil {
		m.mark = now
	}
	return o, err
}

func (m *model) settleBatch(items []queue.SettleItem, now clock.Tick) ([]queue.SettleResult, error) {
	if err := m.admit(now); err != nil {
		return nil, err
	}
	out := make([]queue.SettleResult, len(items))
	for i, it := range items {
		out[i].Outcome, out[i].Err = m.settleOne(it, now)
	}
	m.mark = now
	return out, nil
}

// extendOne is §7.2: settle's checks 1-3, then a new lease from now.
func (m *model) extendOne(it queue.ExtendItem, now clock.Tick) (queue.Outcome, error) {
	if err := it.Validate(); err != nil {
		return "", queue.ErrInvalid
	}
	e := m.events[it.EventID]
	switch {
	case e == nil:
		return "", queue.ErrNotFound
	case it.Generation != e.Generation || e.State != queue.StateInflight:
		return queue.Stale, nil
	case now >= e.LeaseUntil:
		return queue.Expired, nil
	}
	e.LeaseUntil = now + m.pol.Lease
	return queue.Extended, nil
}

func (m *model) extendBatch(items []queue.ExtendItem, now clock.Tick) ([]queue.SettleResult, error) {
	if err := m.admit(now); err != nil {
		return nil, err
	}
	out := make([]queue.SettleResult, len(items))
	for i, it := range items {
		out[i].Outcome, out[i].Err = m.extendOne(it, now)
		if out[i].Outcome == queue.Extended {
			out[i].LeaseUntil = now + m.pol.Lease
		}
	}
	m.mark = now
	return out, nil
}

func (m *model) extend(it queue.ExtendItem, now clock.Tick) (queue.Outcome, error) {
	if err := it.Validate(); err != nil {
		return "", queue.ErrInvalid
	}
	if err := m.admit(now); err != nil {
		return "", err
	}
	o, err := m.extendOne(it, now)
	if err == nil {
		m.mark = now
	}
	return o, err
}

func (m *model) redrive(id string, gen int64, reason string, now clock.Tick) error {
	if reason == "" {
		return queue.ErrEmptyReason
	}
	if queue.CheckReason(reason) != nil || queue.CheckID(id) != nil || gen < 0 {
		return queue.ErrInvalid
	}
	if err := m.admit(now); err != nil {
		return err
	}
	e := m.events[id]
	switch {
	case e == nil:
		return queue.ErrNotFound
	case e.Generation != gen:
		return queue.ErrStaleGeneration
	case e.State != queue.StateQuarantined:
		return queue.ErrNotQuarantined
	}
	e.Generation++
	e.Attempts, e.State, e.AvailableAt, e.Reason, e.LeaseUntil = 0, queue.StatePending, now, "", 0
	m.addAudit(queue.AuditRecord{Kind: queue.AuditRedrive, EventID: id, Generation: e.Generation, Reason: reason, At: now})
	m.rotDo(m.rot.Ready, e.Flow)
	m.mark = now
	return nil
}

// checkNextDue checks NextDue's answer against the heads: the earliest
// ready_at of a pending or in-flight head; when that tick has come, any
// tick up to the mark.
func (m *model) checkNextDue(due clock.Tick, ok bool) error {
	var (
		first clock.Tick
		any   bool
	)
	for _, f := range m.flows {
		h := m.head(f)
		if h == nil {
			continue
		}
		var at clock.Tick
		switch h.State {
		case queue.StatePending:
			at = h.AvailableAt
		case queue.StateInflight:
			at = h.LeaseUntil
		default:
			continue
		}
		if !any || at < first {
			first, any = at, true
		}
	}
	switch {
	case ok != any:
		return fmt.Errorf("NextDue ok = %v, model %v (earliest %d)", ok, any, first)
	case any && first <= m.mark && due > m.mark:
		return fmt.Errorf("NextDue = %d with a head due at %d <= mark %d", due, first, m.mark)
	case any && first > m.mark && due != first:
		return fmt.Errorf("NextDue = %d, model %d", due, first)
	}
	return nil
}

// clone copies the model but shares rot (which cannot be copied): the
// copy is for a try that runs without it.
func (m *model) clone() *model {
	c := &model{pol: m.pol, mark: m.mark, ticket: m.ticket, flows: map[string]*mFlow{}, events: map[string]*queue.SnapshotEvent{},
		audit: append([]queue.AuditRecord(nil), m.audit...), rot: m.rot, history: map[string][]queue.Attempt{},
		ackedAt: maps.Clone(m.ackedAt)}
	for id, h := range m.history {
		c.history[id] = append([]queue.Attempt(nil), h...)
	}
	for name, f := range m.flows {
		nf := &mFlow{lastSeq: f.lastSeq, served: f.served, weight: f.weight}
		for _, e := range f.events {
			ce := *e
			nf.events = append(nf.events, &ce)
			c.events[ce.ID] = &ce
		}
		c.flows[name] = nf
	}
	return c
}

// check compares the store's snapshot with the model, and the flows table's
// head cache with the heads the model finds by walking events.
func (m *model) check(sn queue.Snapshot) error {
	if sn.ClockMark != m.mark || sn.Ticket != m.ticket {
		return fmt.Errorf("mark/ticket = %d/%d, model %d/%d", sn.ClockMark, sn.Ticket, m.mark, m.ticket)
	}
	names := make([]string, 0, len(m.flows))
	for name := range m.flows {
		names = append(names, name)
	}
	sort.Strings(names)
	var wantEvents []queue.SnapshotEvent
	if len(sn.Flows) != len(names) {
		return fmt.Errorf("%d flows, model %d", len(sn.Flows), len(names))
	}
	for i, name := range names {
		f, got := m.flows[name], sn.Flows[i]
		for _, e := range f.events {
			wantEvents = append(wantEvents, *e)
		}
		if got.Flow != name || got.LastSeq != f.lastSeq || got.Served != f.served {
			return fmt.Errorf("flow %s = %s, model last_seq %d served %d", name, jsonOf(got), f.lastSeq, f.served)
		}
		h := m.head(f)
		var wantHead *int64
		var wantReady *clock.Tick
		if h != nil {
			wantHead = &h.Seq
			switch h.State {
			case queue.StatePending:
				wantReady = &h.AvailableAt
			case queue.StateInflight:
				wantReady = &h.LeaseUntil
			}
		}
		if !reflect.DeepEqual(got.HeadSeq, wantHead) || !reflect.DeepEqual(got.ReadyAt, wantReady) {
			return fmt.Errorf("flow %s head cache = %s, model head %v ready_at %v", name, jsonOf(got), jsonOf(wantHead), jsonOf(wantReady))
		}
		if got.Ready && (got.ReadyAt == nil || *got.ReadyAt > sn.ClockMark) {
			return fmt.Errorf("flow %s is ready but its tick has not come: %s (mark %d)", name, jsonOf(got), sn.ClockMark)
		}
		if err := m.checkFlowRotation(name, f, h, got); err != nil {
			return err
		}
	}
	if err := m.checkRotationClock(sn); err != nil {
		return err
	}
	if wantEvents == nil {
		wantEvents = []queue.SnapshotEvent{}
	}
	if !reflect.DeepEqual(sn.Events, wantEvents) {
		return fmt.Errorf("events differ:\nstore %s\nmodel %s", jsonOf(sn.Events), jsonOf(wantEvents))
	}
	wantAudit, wantOp := []queue.AuditEntry{}, []queue.AuditRecord(nil)
	for _, a := range m.audit {
		if a.Kind == queue.AuditRedrive {
			wantAudit = append(wantAudit, queue.AuditEntry{ID: a.ID, EventID: a.EventID, Generation: a.Generation, Reason: a.Reason, At: a.At})
		} else {
			wantOp = append(wantOp, a)
		}
	}
	if !reflect.DeepEqual(sn.Audit, wantAudit) {
		return fmt.Errorf("audit = %s, model %s", jsonOf(sn.Audit), jsonOf(wantAudit))
	}
	if !reflect.DeepEqual(sn.OperatorAudit, wantOp) {
		return fmt.Errorf("operator audit = %s, model %s", jsonOf(sn.OperatorAudit), jsonOf(wantOp))
	}
	if want := m.failures(); !reflect.DeepEqual(sn.Failures, want) {
		return fmt.Errorf("failures = %s, model %s", jsonOf(sn.Failures), jsonOf(want))
	}
	return nil
}

// failures is the model's Snapshot.Failures: every history row by event
// ID, then generation; nil when none.
func (m *model) failures() []queue.SnapshotAttempt {
	ids := make([]string, 0, len(m.history))
	for id := range m.history {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []queue.SnapshotAttempt
	for _, id := range ids {
		for _, a := range m.history[id] {
			out = append(out, queue.SnapshotAttempt{EventID: id, Attempt: a})
		}
	}
	return out
}

// checkEvent compares Event(id) with the model: the row, its History and
// its Error (docs/contract.md §7.8).
func (m *model) checkEvent(got queue.EventState, err error, id string) error {
	e := m.events[id]
	if e == nil {
		if !errors.Is(err, queue.ErrNotFound) {
			return fmt.Errorf("Event(%q) = %s, %v; model: not found", id, jsonOf(got), err)
		}
		return nil
	}
	want := queue.EventState{ID: e.ID, Flow: e.Flow, Seq: e.Seq, Body: []byte(e.Body), State: e.State, Generation: e.Generation,
		Attempts: e.Attempts, LifetimeAttempts: e.LifetimeAttempts, AvailableAt: e.AvailableAt, LeaseUntil: e.LeaseUntil,
		Reason: e.Reason, AckedAt: m.ackedAt[id], Error: m.errorOf(e), History: m.history[id]}
	if err != nil || jsonOf(got) != jsonOf(want) {
		return fmt.Errorf("Event(%q) = %s, %v; model %s", id, jsonOf(got), err, jsonOf(want))
	}
	return nil
}

// checkOldestWaiting compares OldestWaiting with the model: the smallest
// enqueue tick of an event not acked (docs/contract.md §7.8).
func (m *model) checkOldestWaiting(at clock.Tick, ok bool) error {
	var (
		want clock.Tick
		any  bool
	)
	for _, e := range m.events {
		if e.State != queue.StateAcked && (!any || e.EnqueuedAt < want) {
			want, any = e.EnqueuedAt, true
		}
	}
	if ok != any || (ok && at != want) {
		return fmt.Errorf("OldestWaiting = %d, %v; model %d, %v", at, ok, want, any)
	}
	return nil
}

// checkAuditAll compares AuditAll (every row of every kind, oldest first)
// with the model's rows.
func (m *model) checkAuditAll(got []queue.AuditRecord) error {
	if len(got) != len(m.audit) || len(got) > 0 && !reflect.DeepEqual(got, m.audit) {
		return fmt.Errorf("AuditAll = %s, model %s", jsonOf(got), jsonOf(m.audit))
	}
	return nil
}

// checkFlowRotation compares one flow's weight and rotation state with the
// model (docs/contract.md §7.6, "Snapshots"). Under FairMinServed: no pass
// or joined, and a weight only when it is not 1. Under FairRotation: the
// weight, and the pass, joined, served and ready flag of fairness.Rotation
// driven as the stores drive their rows (docs/fairness.md §8): both
// backends run the same statements, so the exact pass, clamped where the
// store turns the ready flag on, is the model's on each.
func (m *model) checkFlowRotation(name string, f *mFlow, h *queue.SnapshotEvent, got queue.SnapshotFlow) error {
	if m.rot == nil {
		want := f.weight
		if want == queue.MinWeight {
			want = 0
		}
		if got.Weight != want || got.Pass != nil || got.Joined != nil {
			return fmt.Errorf("flow %s = %s, model weight %d and no rotation state", name, jsonOf(got), f.weight)
		}
		return nil
	}
	rf, _ := m.rot.Flow(name)
	if got.Pass == nil || got.Joined == nil || *got.Pass != rf.Pass || *got.Joined != rf.Joined ||
		got.Weight != rf.Weight || got.Weight != f.weight || got.Served != rf.Served || got.Ready != rf.Ready || rf.Backlogged != (h != nil) {
		return fmt.Errorf("flow %s = %s, model rotation %+v (weight %d)", name, jsonOf(got), rf, f.weight)
	}
	return nil
}

// checkRotationClock compares the queue's vnow, vtail and joins with the
// model's: present under FairRotation only.
func (m *model) checkRotationClock(sn queue.Snapshot) error {
	if m.rot == nil {
		if sn.Rotation != nil {
			return fmt.Errorf("rotation state %s under %s", jsonOf(sn.Rotation), m.pol.Fairness)
		}
		return nil
	}
	c := m.rot.Clock()
	if sn.Rotation == nil || *sn.Rotation != (queue.RotationState{VNow: c.VNow, VTail: c.VTail, Joins: c.Joins}) {
		return fmt.Errorf("rotation state %s, model %+v", jsonOf(sn.Rotation), c)
	}
	return nil
}

// chooser is the source of choices of a random sequence: math/rand for the
// randomized test, the fuzzer's bytes for FuzzQueue.
type chooser interface {
	Intn(n int) int // 0 <= result < n
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) Intn(n int) int { return c.r.IntN(n) }

// byteChooser takes its choices from data; when data runs out every choice
// is 0.
type byteChooser struct{ data []byte }

func (c *byteChooser) Intn(n int) int {
	if len(c.data) == 0 || n <= 1 {
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b) % n
}

func (c *byteChooser) empty() bool { return len(c.data) == 0 }

// sameErr reports whether the store's error matches the model's.
func sameErr(got, want error) bool {
	if want == nil || got == nil {
		return got == nil && want == nil
	}
	return errors.Is(got, want)
}

// runner applies the same random operations to a store and to the model
// and checks them after every step. twin, when set, is a second store that
// receives the same operations with every ClaimBatch replaced by
// successive queue.Claim calls, and must end each step with the same snapshot.
type runner struct {
	s, twin Queue
	m       *model
	c       chooser
	log     []string
}

var (
	flowNames = []string{"a", "b", "c", "B", "ab"}
	reasons   = []string{"unavailable", "unsupported_delta", "conflict", "gap"}
)

func (r *runner) tick() clock.Tick {
	if r.m.mark > 0 && r.c.Intn(10) == 0 {
		return r.m.mark - 1 - clock.Tick(r.c.Intn(3)) // backwards
	}
	switch r.c.Intn(4) {
	case 0, 1:
		return r.m.mark
	case 2:
		return r.m.mark + 1 + clock.Tick(r.c.Intn(2))
	default:
		return r.m.mark + clock.Tick(r.c.Intn(8))
	}
}

// anyEvent picks a known event ID, or an unknown one now and then.
func (r *runner) anyEvent(prefer string) (string, int64) {
	var ids []string
	for id, e := range r.m.events {
		if prefer == "" || e.State == prefer {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		for id := range r.m.events {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 || r.c.Intn(20) == 0 {
		return "unknown", 1
	}
	sort.Strings(ids)
	id := ids[r.c.Intn(len(ids))]
	gen := r.m.events[id].Generation
	switch r.c.Intn(8) {
	case 0:
		gen++
	case 1:
		if gen > 0 {
			gen--
		}
	}
	return id, gen
}

// result is a settle's result: a success, a failure that is now and then
// permanent, asks for a retry-after or carries an error text
// (docs/contract.md §7.8), or an invalid one (no reason, a bad error text,
// a negative retry-after).
func (r *runner) result() queue.Result {
	switch r.c.Intn(12) {
	case 0:
		return queue.Result{} // invalid: no reason
	case 1, 2, 3, 4, 5, 6:
		return queue.Result{OK: true}
	default:
		res := queue.Result{Reason: reasons[r.c.Intn(len(reasons))]}
		switch r.c.Intn(8) {
		case 0:
			res.Permanent = true
		case 1, 2:
			res.RetryAfter = clock.Tick(r.c.Intn(12))
		case 3:
			res.Error = errorTexts[r.c.Intn(len(errorTexts))]
		case 4:
			res.Error, res.RetryAfter = "connection refused", clock.Tick(1+r.c.Intn(3))
		case 5:
			if r.c.Intn(4) == 0 {
				res.Error = "bad\ntext" // invalid: not printable
			} else if r.c.Intn(3) == 0 {
				res.RetryAfter = -1 // invalid
			}
		}
		return res
	}
}

// errorTexts are the error texts the random settles give.
var errorTexts = []string{"connection refused", "503 Service Unavailable", "délai dépassé", "x"}

func (r *runner) newEvent() queue.Event {
	if len(r.m.events) > 0 && r.c.Intn(4) == 0 {
		// Reuse an ID: a duplicate, or a conflict by flow or body.
		var ids []string
		for id := range r.m.events {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		old := r.m.events[ids[r.c.Intn(len(ids))]]
		e := queue.Event{ID: old.ID, Flow: old.Flow, Body: []byte(old.Body), NotBefore: r.notBefore()}
		switch r.c.Intn(4) {
		case 0:
			e.Flow = flowNames[r.c.Intn(len(flowNames))]
		case 1:
			e.Body = []byte("other")
		}
		return e
	}
	if r.c.Intn(30) == 0 {
		return queue.Event{ID: "", Flow: "a", Body: []byte("x")} // invalid
	}
	return queue.Event{ID: fmt.Sprintf("e%d", len(r.m.events)+r.c.Intn(3)), Flow: flowNames[r.c.Intn(len(flowNames))],
		Body: []byte(fmt.Sprintf(`{"delta": %d}`, 1+r.c.Intn(3))), Weight: r.weight(6), NotBefore: r.notBefore()}
}

// notBefore is an event's NotBefore (docs/contract.md §7.9): 0 (at once)
// mostly, now and then a tick around the mark (below it: at once too, above
// it: a scheduled event), rarely -1 (invalid).
func (r *runner) notBefore() clock.Tick {
	switch r.c.Intn(12) {
	case 0, 1:
		return r.m.mark + clock.Tick(r.c.Intn(12)) - 2
	case 2:
		if r.c.Intn(8) == 0 {
			return -1
		}
	}
	return 0
}

// weight is an event's or an operator's weight (docs/contract.md §7.6),
// under every policy: 0 (keep) but one time in zeroOdds, then 1..4 mostly,
// now and then 1000, 0 (for SetWeight: invalid) or 1001 (invalid).
func (r *runner) weight(zeroOdds int) int {
	if r.c.Intn(zeroOdds) != 0 {
		return 0
	}
	switch k := r.c.Intn(12); {
	case k < 8:
		return 1 + k%4
	case k < 10:
		return 1000
	case k < 11:
		return 0
	default:
		return 1001
	}
}

// step runs one random operation on the store(s) and the model.
func (r *runner) step(ctx context.Context) error {
	now := r.tick()
	switch op := r.c.Intn(23); {
	case op < 6:
		e := r.newEvent()
		r.log = append(r.log, fmt.Sprintf("Enqueue(%q, %q, %q, not before %d, %d)", e.ID, e.Flow, e.Body, e.NotBefore, now))
		got, err := r.s.Enqueue(ctx, e, now)
		want, werr := r.m.enqueueBatch([]queue.Event{e}, now)
		if r.twin != nil {
			r.twin.Enqueue(ctx, e, now)
		}
		if !sameErr(err, werr) || (werr == nil && got != want[0]) {
			return fmt.Errorf("Enqueue = %+v, %v; model %+v, %v", got, err, want, werr)
		}
	case op < 7:
		var es []queue.Event
		for n := r.c.Intn(4); n > 0; n-- {
			e := r.newEvent()
			if r.m.events[e.ID] == nil {
				e.ID += fmt.Sprintf("-b%d", n)
			}
			es = append(es, e)
		}
		r.log = append(r.log, fmt.Sprintf("EnqueueBatch(%d events, %d)", len(es), now))
		got, err := r.s.EnqueueBatch(ctx, es, now)
		want, werr := r.m.enqueueBatch(es, now)
		if r.twin != nil {
			r.twin.EnqueueBatch(ctx, es, now)
		}
		if !sameErr(err, werr) || (werr == nil && !reflect.DeepEqual(got, want)) {
			return fmt.Errorf("EnqueueBatch = %+v, %v; model %+v, %v", got, err, want, werr)
		}
	case op < 11:
		r.log = append(r.log, fmt.Sprintf("Claim(%d)", now))
		got, ok, err := r.s.Claim(ctx, now)
		want, werr := r.m.claim(now, 1)
		if r.twin != nil {
			r.twin.Claim(ctx, now)
		}
		if !sameErr(err, werr) || ok != (len(want) == 1) || (ok && !reflect.DeepEqual(got, want[0])) {
			return fmt.Errorf("Claim = %s, %v, %v; model %s, %v", jsonOf(got), ok, err, jsonOf(want), werr)
		}
	case op < 13:
		n := 1 + r.c.Intn(4)
		r.log = append(r.log, fmt.Sprintf("ClaimBatch(%d, %d)", now, n))
		got, err := r.s.ClaimBatch(ctx, now, n)
		want, werr := r.m.claim(now, n)
		if r.twin != nil {
			for i := 0; i < n; i++ {
				if _, ok, _ := r.twin.Claim(ctx, now); !ok {
					break
				}
			}
		}
		if !sameErr(err, werr) || (werr == nil && jsonOf(got) != jsonOf(want)) {
			return fmt.Errorf("ClaimBatch = %s, %v; model %s, %v", jsonOf(got), err, jsonOf(want), werr)
		}
	case op < 17:
		id, gen := r.anyEvent(queue.StateInflight)
		res := r.result()
		r.log = append(r.log, fmt.Sprintf("Settle(%q, %d, %+v, %d)", id, gen, res, now))
		got, err := r.s.Settle(ctx, id, gen, res, now)
		want, werr := r.m.settle(queue.SettleItem{EventID: id, Generation: gen, Result: res}, now)
		if r.twin != nil {
			r.twin.Settle(ctx, id, gen, res, now)
		}
		if !sameErr(err, werr) || got != want {
			return fmt.Errorf("Settle = %q, %v; model %q, %v", got, err, want, werr)
		}
	case op < 18:
		var items []queue.SettleItem
		for n := r.c.Intn(4); n > 0; n-- {
			id, gen := r.anyEvent(queue.StateInflight)
			items = append(items, queue.SettleItem{EventID: id, Generation: gen, Result: r.result()})
		}
		r.log = append(r.log, fmt.Sprintf("SettleBatch(%+v, %d)", items, now))
		got, err := r.s.SettleBatch(ctx, items, now)
		want, werr := r.m.settleBatch(items, now)
		if r.twin != nil {
			r.twin.SettleBatch(ctx, items, now)
		}
		if !sameErr(err, werr) || len(got) != len(want) {
			return fmt.Errorf("SettleBatch = %+v, %v; model %+v, %v", got, err, want, werr)
		}
		for i := range got {
			if got[i].Outcome != want[i].Outcome || !sameErr(got[i].Err, want[i].Err) {
				return fmt.Errorf("SettleBatch item %d = %+v; model %+v", i, got[i], want[i])
			}
		}
	case op < 19:
		id, gen := r.anyEvent(queue.StateInflight)
		r.log = append(r.log, fmt.Sprintf("Extend(%q, %d, %d)", id, gen, now))
		got, err := r.s.Extend(ctx, id, gen, now)
		want, werr := r.m.extend(queue.ExtendItem{EventID: id, Generation: gen}, now)
		if r.twin != nil {
			r.twin.Extend(ctx, id, gen, now)
		}
		if !sameErr(err, werr) || got != want {
			return fmt.Errorf("Extend = %q, %v; model %q, %v", got, err, want, werr)
		}
	case op < 20:
		var items []queue.ExtendItem
		for n := r.c.Intn(4); n > 0; n-- {
			id, gen := r.anyEvent(queue.StateInflight)
			items = append(items, queue.ExtendItem{EventID: id, Generation: gen})
		}
		r.log = append(r.log, fmt.Sprintf("ExtendBatch(%+v, %d)", items, now))
		got, err := r.s.ExtendBatch(ctx, items, now)
		want, werr := r.m.extendBatch(items, now)
		if r.twin != nil {
			r.twin.ExtendBatch(ctx, items, now)
		}
		if !sameErr(err, werr) || len(got) != len(want) {
			return fmt.Errorf("ExtendBatch = %+v, %v; model %+v, %v", got, err, want, werr)
		}
		for i := range got {
			if got[i].Outcome != want[i].Outcome || got[i].LeaseUntil != want[i].LeaseUntil || !sameErr(got[i].Err, want[i].Err) {
				return fmt.Errorf("ExtendBatch item %d = %+v; model %+v", i, got[i], want[i])
			}
		}
	case op < 21:
		flow := flowNames[r.c.Intn(len(flowNames))]
		if r.c.Intn(10) == 0 {
			flow = "never"
		}
		w := r.weight(1)
		reason := "tenant upgraded"
		if r.c.Intn(10) == 0 {
			reason = ""
		}
		ws, ok := r.s.(queue.Weighter)
		if !ok {
			r.log = append(r.log, fmt.Sprintf("SetWeight(%q, %d, %q, %d) skipped: not a queue.Weighter", flow, w, reason, now))
			break
		}
		r.log = append(r.log, fmt.Sprintf("SetWeight(%q, %d, %q, %d)", flow, w, reason, now))
		err := ws.SetWeight(ctx, flow, w, reason, now)
		werr := r.m.setWeightOp(flow, w, reason, now)
		if tw, ok := r.twin.(queue.Weighter); ok {
			tw.SetWeight(ctx, flow, w, reason, now)
		}
		if !sameErr(err, werr) {
			return fmt.Errorf("SetWeight = %v; model %v", err, werr)
		}
	default:
		id, gen := r.anyEvent(queue.StateQuarantined)
		reason := "operator"
		if r.c.Intn(10) == 0 {
			reason = ""
		}
		r.log = append(r.log, fmt.Sprintf("Redrive(%q, %d, %q, %d)", id, gen, reason, now))
		err := r.s.Redrive(ctx, id, gen, reason, now)
		werr := r.m.redrive(id, gen, reason, now)
		if r.twin != nil {
			r.twin.Redrive(ctx, id, gen, reason, now)
		}
		if !sameErr(err, werr) {
			return fmt.Errorf("Redrive = %v; model %v", err, werr)
		}
	}
	sn, err := r.s.Snapshot(ctx)
	if err != nil {
		return err
	}
	if err := r.m.check(sn); err != nil {
		return err
	}
	all, err := r.s.AuditAll(ctx)
	if err != nil {
		return err
	}
	if err := r.m.checkAuditAll(all); err != nil {
		return err
	}
	due, ok, err := r.s.NextDue(ctx)
	if err != nil {
		return err
	}
	if err := r.m.checkNextDue(due, ok); err != nil {
		return err
	}
	if w, isW := r.s.(queue.Waiter); isW {
		at, ok, err := w.OldestWaiting(ctx)
		if err != nil {
			return err
		}
		if err := r.m.checkOldestWaiting(at, ok); err != nil {
			return err
		}
	}
	id, _ := r.anyEvent("")
	got, gerr := r.s.Event(ctx, id)
	if err := r.m.checkEvent(got, gerr, id); err != nil {
		return err
	}
	if r.twin != nil {
		tw, err := r.twin.Snapshot(ctx)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(sn, tw) {
			return fmt.Errorf("ClaimBatch store and successive-queue.Claim twin differ:\n%s\n%s", jsonOf(sn), jsonOf(tw))
		}
	}
	return nil
}

// seqTB is the testing.TB of one random sequence: what a backend's NewLoc
// and Open register with Cleanup (closing a store, dropping a schema,
// removing a directory) runs when the sequence ends rather than when the
// clause does, so that a clause of thousands of sequences holds the stores
// of the sequences running, not of all of them.
type seqTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (s *seqTB) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// TempDir is a new directory removed when the sequence ends, on a memory
// file system (/dev/shm) when the machine has one: the randomized model
// checks the contract's logic over tens of thousands of short
// transactions, and on tmpfs an fsync costs nothing. The store runs as
// anywhere else; only the medium differs (the other clauses, and the
// crash tests of each backend, use t.TempDir()).
func (s *seqTB) TempDir() string {
	s.TB.Helper()
	root := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		root = "/dev/shm"
	}
	dir, err := os.MkdirTemp(root, "conformance-model-")
	if err != nil && root != "" {
		dir, err = os.MkdirTemp("", "conformance-model-")
	}
	if err != nil {
		s.TB.Fatalf("TempDir: %v", err)
	}
	s.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// done runs the cleanups, last registered first.
func (s *seqTB) done() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// runSequence runs steps random operations from seed on a new store with
// policy p (and a twin, when asked); the stores are closed and removed when
// it returns.
func runSequence(t *testing.T, bk *QueueBackend, p queue.Policy, seed uint64, steps int, withTwin bool) error {
	ctx := context.Background()
	st := &seqTB{TB: t}
	defer st.done()
	r := &runner{s: bk.openPolicy(st, p), m: newModelPolicy(p), c: randChooser{rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}}
	if withTwin {
		r.twin = bk.openPolicy(st, p)
	}
	for i := 0; i < steps; i++ {
		if err := r.step(ctx); err != nil {
			return fmt.Errorf("seed %d, step %d: %v\nsteps:\n  %s", seed, i, err, strings.Join(r.log, "\n  "))
		}
	}
	return nil
}

// runSequences runs n sequences on all CPUs and fails on the first
// divergence, naming its seed and operations.
func runSequences(t *testing.T, bk *QueueBackend, p queue.Policy, n, steps int, withTwin bool, seedBase uint64) {
	var next atomic.Int64
	var failed atomic.Bool
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for w := 0; w < max(2, runtime.GOMAXPROCS(0)); w++ {
		wg.Go(func() {
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := runSequence(t, bk, p, seedBase+uint64(i), steps, withTwin); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// sequences is the number of random sequences to run: def (a quarter of
// it under the race detector), or FAIRRELAY_CONFORMANCE_SEQUENCES when set
// (100000 for a long run).
func sequences(def int) int {
	if n, ok := sequencesSet(); ok {
		return n
	}
	if raceDetector {
		return max(1, def/4)
	}
	return def
}

// sequencesSet is FAIRRELAY_CONFORMANCE_SEQUENCES, and whether it is set
// to a count (a number above 0): the one override of every count of
// random sequences or seeds, the backends' own included.
func sequencesSet() (int, bool) {
	n, err := strconv.Atoi(os.Getenv("FAIRRELAY_CONFORMANCE_SEQUENCES"))
	return n, err == nil && n > 0
}

// twinSeeds is the number of random seeds of a twin clause whose default
// is def: the backend's TwinSeeds when set, else def, or raceTwinSeeds
// under the race detector (mage test runs the twin clauses again at def
// without it: the race-built run is there for data races in the stores'
// batch code, which two seeds reach as well as forty).
func (bk *QueueBackend) twinSeeds(def int) int {
	n, set := sequencesSet()
	switch {
	case set:
		return n
	case bk.TwinSeeds > 0:
		return bk.TwinSeeds
	case raceDetector:
		return min(def, raceTwinSeeds)
	}
	return def
}

// raceTwinSeeds is how many seeds a twin clause runs under the race
// detector.
const raceTwinSeeds = 2

// sequences is the backend's count of model sequences: sequences(Sequences),
// or RaceSequences under the race detector when the backend sets it.
func (bk *QueueBackend) sequences() int {
	if _, set := sequencesSet(); raceDetector && bk.RaceSequences > 0 && !set {
		return bk.RaceSequences
	}
	return sequences(bk.Sequences)
}

// The model clauses below, with n = QueueBackend.Sequences, run n, n/2,
// n + n/4, 3n/40, n/4 + n/8 and 3n/40 sequences: with SQLite's 1000, 1000,
// 500, 1000 + 250, 75, 250 + 125 and 75. Every step may enqueue with a
// weight (0 keeps, 1001 is refused), set a weight (SetWeight, bad weights,
// blank reasons and unknown flows too; skipped on a backend that is not a
// queue.Weighter), claim, settle (now and then permanent, with a
// retry-after or an error text, or with an invalid one), extend or
// redrive, under either policy; after every step the snapshot (events,
// flows, weights, rotation state, the redrive and the operator audit rows,
// the failures), AuditAll, NextDue, OldestWaiting (on a queue.Waiter) and
// Event of one random event (History, Error) must be the model's.

// docs/contract.md §2 (all clauses), §7.6 (weights under min_served):
// random sequences of enqueue, claim, settle (ok, fail, stale generation,
// late), extend, redrive, SetWeight, NextDue and clock steps (including
// backwards) agree with the reference model after every step.
func queueModel_2_RandomSequencesMatchReference(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	runSequences(t, bk, queue.DefaultPolicy(), bk.sequences(), 10, false, 1)
}

// docs/contract.md §7.1: the same with a short, jittered, non-default
// policy (Lease 3, two attempts per round, backoff 1..3 with jitter):
// claim, settle, extend and the take-over follow the recorded policy, and
// retries land at the documented Delay.
func queueModel_7_1_NonDefaultPolicyWithJitter(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	p := queue.Policy{Lease: 3, MaxAttempts: 2, BackoffBase: 1, BackoffCap: 3, Jitter: true, Fairness: queue.FairMinServed}
	runSequences(t, bk, p, max(1, bk.sequences()/2), 12, false, 5_000_000)
}

// docs/contract.md §7.6: the same under the rotation, with weights: every
// claim's flow is fairness.Rotation's pick, and every flow's weight, pass,
// joined, served and ready flag and the queue's vnow, vtail and joins are
// the model's after every step; then with the short jittered policy and
// longer sequences (more retries, expiry take-overs and quarantines). A
// backend without the rotation skips it.
func queueModel_7_6_RotationMatchesReference(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	if !bk.Rotation {
		t.Skip("the backend does not implement the rotation")
	}
	p := queue.DefaultPolicy()
	p.Fairness = queue.FairRotation
	runSequences(t, bk, p, bk.sequences(), 14, false, 7_000_000)
	p = queue.Policy{Lease: 3, MaxAttempts: 2, BackoffBase: 1, BackoffCap: 3, Jitter: true, Fairness: queue.FairRotation}
	runSequences(t, bk, p, max(1, bk.sequences()/4), 30, false, 8_000_000)
}

// docs/contract.md §7.6: under the rotation too, ClaimBatch (paging
// through (pass, joined)) gives exactly what successive Claim calls give.
func queueModel_7_6_RotationClaimBatchEqualsSuccessiveClaims(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	if !bk.Rotation {
		t.Skip("the backend does not implement the rotation")
	}
	p := queue.DefaultPolicy()
	p.Fairness = queue.FairRotation
	runSequences(t, bk, p, max(1, bk.sequences()*3/40), 20, true, 9_000_000)
}

// docs/contract.md §7.8: the same with a retry schedule (jittered), a
// retry-after cap and random settles that are permanent, ask for a
// retry-after or carry an error text: availability, states, the history
// (Snapshot.Failures, Event's History and Error) and OldestWaiting are the
// model's after every step; in both flow orders.
func queueModel_7_8_ScheduleRetryAfterHistory(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	p := queue.DefaultPolicy().WithSchedule(1, 4, 2)
	p.Lease, p.Jitter, p.RetryAfterCap = 3, true, 5
	runSequences(t, bk, p, max(1, bk.sequences()/4), 30, false, 11_000_000)
	if bk.Rotation {
		p.Fairness = queue.FairRotation
		runSequences(t, bk, p, max(1, bk.sequences()/8), 30, false, 12_000_000)
	}
}

// ClaimBatch gives exactly what successive Claim calls give (order,
// tickets, served, generations, leases): a store using ClaimBatch and a twin
// using Claim end every step with the same snapshot.
func queueModel_ClaimBatchEqualsSuccessiveClaims(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	runSequences(t, bk, queue.DefaultPolicy(), max(1, bk.sequences()*3/40), 14, true, 1_000_000)
}
