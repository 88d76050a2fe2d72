package queuestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/fairness"
	"github.com/fairrelay/fairrelay/queue"
)

// model is a small in-memory reference of the contract (docs/contract.md §2) for
// FuzzOperations; the randomized sequences of every backend run in the
// conformance module's model (conformance/q_model.go). It is written
// from the contract and not from the store's SQL: flows hold no head cache, the
// head is found by walking the flow's events, and the pick is
// fairness.MinServed over the dispatchable heads.
type model struct {
	pol    Policy // the store's policy (docs/contract.md §7.1)
	mark   clock.Tick
	ticket int64
	flows  map[string]*mFlow
	events map[string]*SnapshotEvent
	audit  []AuditEntry
	// Under FairRotation (docs/contract.md §7.6) the pick is rot's, driven
	// by the same operations: Arrive when an enqueue gives a flow a head,
	// Block when a claim or quarantine takes the head out of the ready set,
	// Ready where the store turns its ready flag on (an ack whose next head
	// is due, a redrive, the promotion of due heads at a claim), Leave at
	// the last ack, SetWeight. nil under FairMinServed.
	rot     *fairness.Rotation
	opAudit []AuditRecord // 'weight' rows
	auditID int64         // the last audit row's id (one sequence for every kind)
}

type mFlow struct {
	lastSeq, served int64
	weight          int
	events          []*SnapshotEvent // by seq
}

func newModel() *model { return newModelPolicy(DefaultPolicy()) }

func newModelPolicy(p Policy) *model {
	m := &model{pol: p, flows: map[string]*mFlow{}, events: map[string]*SnapshotEvent{}}
	if p.Fairness == FairRotation {
		m.rot = &fairness.Rotation{}
	}
	return m
}

// weight records flow f's new weight w (known flow), with the audit row.
func (m *model) setWeight(name string, f *mFlow, w int, reason string, now clock.Tick) {
	b, _ := json.Marshal(WeightChange{Flow: name, Old: f.weight, New: w})
	detail := string(b)
	f.weight = w
	m.auditID++
	m.opAudit = append(m.opAudit, AuditRecord{ID: m.auditID, Kind: AuditWeight, Reason: reason, Detail: detail, At: now})
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

// setWeightOp is SetWeight on the model, with the store's checks in order.
func (m *model) setWeightOp(flow string, w int, reason string, now clock.Tick) error {
	if w < MinWeight || w > MaxWeight {
		return ErrInvalid
	}
	if reason == "" {
		return ErrEmptyReason
	}
	if queue.CheckReason(reason) != nil || queue.CheckFlow(flow) != nil {
		return ErrInvalid
	}
	if err := m.admit(now); err != nil {
		return err
	}
	f := m.flows[flow]
	if f == nil {
		return ErrNotFound
	}
	m.setWeight(flow, f, w, reason, now)
	m.mark = now
	return nil
}

// admit is the §2.6 check; the mark is only written by a successful op.
func (m *model) admit(now clock.Tick) error {
	if now < m.mark {
		return ErrTimeRegression
	}
	return nil
}

func (m *model) enqueueOne(e Event, now clock.Tick) (Enqueued, error) {
	if old, ok := m.events[e.ID]; ok {
		if old.Flow == e.Flow && string(old.Body) == string(e.Body) {
			return Enqueued{Seq: old.Seq, Duplicate: true}, nil
		}
		return Enqueued{}, ErrConflict
	}
	f := m.flows[e.Flow]
	if f == nil {
		f = &mFlow{weight: 1}
		m.flows[e.Flow] = f
		if e.Weight != 0 {
			f.weight = e.Weight
		}
		if m.rot != nil {
			m.rot.SetWeight(e.Flow, f.weight)
		}
	} else if e.Weight != 0 && e.Weight != f.weight {
		m.setWeight(e.Flow, f, e.Weight, ReasonEnqueueWeight, now)
	}
	if m.head(f) == nil {
		m.rotDo(m.rot.Arrive, e.Flow)
	}
	f.lastSeq++
	ev := &SnapshotEvent{ID: e.ID, Flow: e.Flow, Seq: f.lastSeq, Body: Bytes(string(e.Body)), State: statePending,
		AvailableAt: now, EnqueuedAt: now}
	f.events = append(f.events, ev)
	m.events[e.ID] = ev
	return Enqueued{Seq: f.lastSeq}, nil
}

func (m *model) enqueueBatch(es []Event, now clock.Tick) ([]Enqueued, error) {
	for _, e := range es {
		if err := e.Validate(); err != nil {
			return nil, ErrInvalid
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
	out := make([]Enqueued, len(es))
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

func (m *model) head(f *mFlow) *SnapshotEvent {
	for _, e := range f.events {
		if e.State != stateAcked {
			return e
		}
	}
	return nil
}

func (m *model) claim(now clock.Tick, n int) ([]Claim, error) {
	if err := m.admit(now); err != nil {
		return nil, err
	}
	if m.rot != nil {
		return m.claimRot(now, n)
	}
	var out []Claim
	for len(out) < n {
		var cands []fairness.Candidate
		heads := map[string]*SnapshotEvent{}
		for name, f := range m.flows {
			h := m.head(f)
			if h == nil {
				continue
			}
			if (h.State == statePending && h.AvailableAt <= now) || (h.State == stateInflight && now >= h.LeaseUntil) {
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
		if h.State == stateInflight && h.Attempts >= m.pol.MaxAttempts {
			h.State, h.Reason, h.LeaseUntil = stateQuarantined, ReasonLeaseExpired, 0
			continue
		}
		m.ticket++
		m.flows[h.Flow].served++
		h.Generation++
		h.Attempts++
		h.LifetimeAttempts++
		h.State = stateInflight
		h.LeaseUntil = now + m.pol.Lease
		h.Ticket = m.ticket
		out = append(out, Claim{EventID: h.ID, Flow: h.Flow, Seq: h.Seq, Body: []byte(h.Body), Generation: h.Generation,
			Attempts: h.Attempts, Ticket: h.Ticket, LeaseUntil: h.LeaseUntil})
	}
	m.mark = now
	return out, nil
}

// dispatchable reports whether head h can be claimed at now.
func dispatchable(h *SnapshotEvent, now clock.Tick) bool {
	return h != nil && ((h.State == statePending && h.AvailableAt <= now) || (h.State == stateInflight && now >= h.LeaseUntil))
}

// claimRot is claim under FairRotation: the due heads return (Ready), then
// each claim is the rotation's pick.
func (m *model) claimRot(now clock.Tick, n int) ([]Claim, error) {
	names := make([]string, 0, len(m.flows))
	for name := range m.flows {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rf, _ := m.rot.Flow(name)
		if h := m.head(m.flows[name]); h != nil && !rf.Ready && dispatchable(h, now) {
			m.rotDo(m.rot.Ready, name)
		}
	}
	var out []Claim
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
		if h.State == stateInflight && h.Attempts >= m.pol.MaxAttempts {
			h.State, h.Reason, h.LeaseUntil = stateQuarantined, ReasonLeaseExpired, 0
			m.rotDo(m.rot.Block, name)
			continue
		}
		m.rot.Pick()
		m.rotDo(m.rot.Block, name)
		m.ticket++
		f.served++
		h.Generation++
		h.Attempts++
		h.LifetimeAttempts++
		h.State = stateInflight
		h.LeaseUntil = now + m.pol.Lease
		h.Ticket = m.ticket
		out = append(out, Claim{EventID: h.ID, Flow: h.Flow, Seq: h.Seq, Body: []byte(h.Body), Generation: h.Generation,
			Attempts: h.Attempts, Ticket: h.Ticket, LeaseUntil: h.LeaseUntil})
	}
	m.mark = now
	return out, nil
}

func (m *model) settleOne(it SettleItem, now clock.Tick) (Outcome, error) {
	if err := it.Validate(); err != nil {
		return "", ErrInvalid
	}
	e := m.events[it.EventID]
	switch {
	case e == nil:
		return "", ErrNotFound
	case it.Generation != e.Generation || e.State != stateInflight:
		return Stale, nil
	case now >= e.LeaseUntil:
		return Expired, nil
	case it.Result.OK:
		e.State, e.LeaseUntil = stateAcked, 0
		if m.rot != nil {
			switch h := m.head(m.flows[e.Flow]); {
			case h == nil:
				m.rotDo(m.rot.Leave, e.Flow)
			case h.AvailableAt <= now: // the store turns ready on at once
				m.rotDo(m.rot.Ready, e.Flow)
			}
		}
		return Acked, nil
	case e.Attempts < m.pol.MaxAttempts:
		e.State, e.LeaseUntil, e.AvailableAt, e.Reason = statePending, 0, now+m.pol.Delay(e.ID, e.Generation, e.Attempts), it.Result.Reason
		return RetryScheduled, nil
	default:
		e.State, e.LeaseUntil, e.Reason = stateQuarantined, 0, it.Result.Reason
		return Quarantined, nil
	}
}

func (m *model) settle(it SettleItem, now clock.Tick) (Outcome, error) {
	if err := it.Validate(); err != nil {
		return "", ErrInvalid
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

func (m *model) settleBatch(items []SettleItem, now clock.Tick) ([]SettleResult, error) {
	if err := m.admit(now); err != nil {
		return nil, err
	}
	out := make([]SettleResult, len(items))
	for i, it := range items {
		out[i].Outcome, out[i].Err = m.settleOne(it, now)
	}
	m.mark = now
	return out, nil
}

// extendOne is §7.2: settle's checks 1-3, then a new lease from now.
func (m *model) extendOne(it ExtendItem, now clock.Tick) (Outcome, error) {
	if err := it.Validate(); err != nil {
		return "", ErrInvalid
	}
	e := m.events[it.EventID]
	switch {
	case e == nil:
		return "", ErrNotFound
	case it.Generation != e.Generation || e.State != stateInflight:
		return Stale, nil
	case now >= e.LeaseUntil:
		return Expired, nil
	}
	e.LeaseUntil = now + m.pol.Lease
	return Extended, nil
}

func (m *model) extendBatch(items []ExtendItem, now clock.Tick) ([]SettleResult, error) {
	if err := m.admit(now); err != nil {
		return nil, err
	}
	out := make([]SettleResult, len(items))
	for i, it := range items {
		out[i].Outcome, out[i].Err = m.extendOne(it, now)
	}
	m.mark = now
	return out, nil
}

func (m *model) extend(it ExtendItem, now clock.Tick) (Outcome, error) {
	if err := it.Validate(); err != nil {
		return "", ErrInvalid
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
		return ErrEmptyReason
	}
	if queue.CheckReason(reason) != nil || queue.CheckID(id) != nil || gen < 0 {
		return ErrInvalid
	}
	if err := m.admit(now); err != nil {
		return err
	}
	e := m.events[id]
	switch {
	case e == nil:
		return ErrNotFound
	case e.Generation != gen:
		return ErrStaleGeneration
	case e.State != stateQuarantined:
		return ErrNotQuarantined
	}
	e.Generation++
	e.Attempts, e.State, e.AvailableAt, e.Reason, e.LeaseUntil = 0, statePending, now, "", 0
	m.auditID++
	m.audit = append(m.audit, AuditEntry{ID: m.auditID, EventID: id, Generation: e.Generation, Reason: reason, At: now})
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
		case statePending:
			at = h.AvailableAt
		case stateInflight:
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

func (m *model) clone() *model {
	c := &model{pol: m.pol, mark: m.mark, ticket: m.ticket, flows: map[string]*mFlow{}, events: map[string]*SnapshotEvent{},
		audit: append([]AuditEntry(nil), m.audit...), opAudit: append([]AuditRecord(nil), m.opAudit...), auditID: m.auditID, rot: m.rot}
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
func (m *model) check(sn Snapshot) error {
	if sn.ClockMark != m.mark || sn.Ticket != m.ticket {
		return fmt.Errorf("mark/ticket = %d/%d, model %d/%d", sn.ClockMark, sn.Ticket, m.mark, m.ticket)
	}
	names := make([]string, 0, len(m.flows))
	for name := range m.flows {
		names = append(names, name)
	}
	sort.Strings(names)
	var wantEvents []SnapshotEvent
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
			case statePending:
				wantReady = &h.AvailableAt
			case stateInflight:
				wantReady = &h.LeaseUntil
			}
		}
		if !reflect.DeepEqual(got.HeadSeq, wantHead) || !reflect.DeepEqual(got.ReadyAt, wantReady) {
			return fmt.Errorf("flow %s head cache = %s, model head %v ready_at %v", name, jsonOf(got), jsonOf(wantHead), jsonOf(wantReady))
		}
		if got.Ready && (got.ReadyAt == nil || *got.ReadyAt > sn.ClockMark) {
			return fmt.Errorf("flow %s is ready but its tick has not come: %s (mark %d)", name, jsonOf(got), sn.ClockMark)
		}
		if m.rot == nil {
			want := f.weight
			if want == 1 {
				want = 0
			}
			if got.Weight != want || got.Pass != nil || got.Joined != nil {
				return fmt.Errorf("flow %s = %s, model weight %d and no rotation state", name, jsonOf(got), f.weight)
			}
			continue
		}
		rf, _ := m.rot.Flow(name)
		if got.Pass == nil || got.Joined == nil || *got.Pass != rf.Pass || *got.Joined != rf.Joined ||
			got.Weight != rf.Weight || got.Served != rf.Served || got.Ready != rf.Ready || rf.Backlogged != (h != nil) {
			return fmt.Errorf("flow %s = %s, model rotation %+v", name, jsonOf(got), rf)
		}
	}
	if m.rot == nil && sn.Rotation != nil {
		return fmt.Errorf("rotation state %s under %s", jsonOf(sn.Rotation), m.pol.Fairness)
	}
	if m.rot != nil {
		c := m.rot.Clock()
		if sn.Rotation == nil || *sn.Rotation != (RotationState{VNow: c.VNow, VTail: c.VTail, Joins: c.Joins}) {
			return fmt.Errorf("rotation state %s, model %+v", jsonOf(sn.Rotation), c)
		}
	}
	var wantOp []AuditRecord
	for _, a := range sn.OperatorAudit {
		if a.Kind == AuditPolicy {
			wantOp = append(wantOp, a) // written by the test itself, not by a random step
		}
	}
	wantOp = append(wantOp, m.opAudit...)
	sort.Slice(wantOp, func(i, j int) bool { return wantOp[i].ID < wantOp[j].ID })
	if len(sn.OperatorAudit) > 0 || len(wantOp) > 0 {
		if !reflect.DeepEqual(sn.OperatorAudit, wantOp) {
			return fmt.Errorf("operator audit = %s, model %s", jsonOf(sn.OperatorAudit), jsonOf(wantOp))
		}
	}
	if wantEvents == nil {
		wantEvents = []SnapshotEvent{}
	}
	if !reflect.DeepEqual(sn.Events, wantEvents) {
		return fmt.Errorf("events differ:\nstore %s\nmodel %s", jsonOf(sn.Events), jsonOf(wantEvents))
	}
	wantAudit := m.audit
	if wantAudit == nil {
		wantAudit = []AuditEntry{}
	}
	if !reflect.DeepEqual(sn.Audit, wantAudit) {
		return fmt.Errorf("audit = %s, model %s", jsonOf(sn.Audit), jsonOf(wantAudit))
	}
	return nil
}

// chooser is the source of choices of a sequence: the fuzzer's bytes for
// FuzzOperations.
type chooser interface {
	Intn(n int) int // 0 <= result < n
}

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
// successive Claim calls, and must end each step with the same snapshot.
type runner struct {
	s, twin *Store
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

func (r *runner) result() Result {
	switch r.c.Intn(12) {
	case 0:
		return Result{} // invalid: no reason
	case 1, 2, 3, 4, 5, 6:
		return Result{OK: true}
	default:
		return Result{Reason: reasons[r.c.Intn(len(reasons))]}
	}
}

func (r *runner) newEvent() Event {
	if len(r.m.events) > 0 && r.c.Intn(4) == 0 {
		// Reuse an ID: a duplicate, or a conflict by flow or body.
		var ids []string
		for id := range r.m.events {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		old := r.m.events[ids[r.c.Intn(len(ids))]]
		e := Event{ID: old.ID, Flow: old.Flow, Body: []byte(old.Body)}
		switch r.c.Intn(4) {
		case 0:
			e.Flow = flowNames[r.c.Intn(len(flowNames))]
		case 1:
			e.Body = []byte("other")
		}
		return e
	}
	if r.c.Intn(30) == 0 {
		return Event{ID: "", Flow: "a", Body: []byte("x")} // invalid
	}
	return Event{ID: fmt.Sprintf("e%d", len(r.m.events)+r.c.Intn(3)), Flow: flowNames[r.c.Intn(len(flowNames))],
		Body: []byte(fmt.Sprintf(`{"delta": %d}`, 1+r.c.Intn(3))), Weight: r.weight(6)}
}

// weight is an event's or an operator's weight: 0 (keep) one time in
// zeroOdds, else 1..4 mostly, now and then 1000, 0 (for SetWeight: invalid)
// or 1001 (invalid).
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
		r.log = append(r.log, fmt.Sprintf("Enqueue(%q, %q, %q, %d)", e.ID, e.Flow, e.Body, now))
		got, err := r.s.Enqueue(ctx, e, now)
		want, werr := r.m.enqueueBatch([]Event{e}, now)
		if r.twin != nil {
			r.twin.Enqueue(ctx, e, now)
		}
		if !sameErr(err, werr) || (werr == nil && got != want[0]) {
			return fmt.Errorf("Enqueue = %+v, %v; model %+v, %v", got, err, want, werr)
		}
	case op < 7:
		var es []Event
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
		id, gen := r.anyEvent(stateInflight)
		res := r.result()
		r.log = append(r.log, fmt.Sprintf("Settle(%q, %d, %+v, %d)", id, gen, res, now))
		got, err := r.s.Settle(ctx, id, gen, res, now)
		want, werr := r.m.settle(SettleItem{EventID: id, Generation: gen, Result: res}, now)
		if r.twin != nil {
			r.twin.Settle(ctx, id, gen, res, now)
		}
		if !sameErr(err, werr) || got != want {
			return fmt.Errorf("Settle = %q, %v; model %q, %v", got, err, want, werr)
		}
	case op < 18:
		var items []SettleItem
		for n := r.c.Intn(4); n > 0; n-- {
			id, gen := r.anyEvent(stateInflight)
			items = append(items, SettleItem{EventID: id, Generation: gen, Result: r.result()})
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
		id, gen := r.anyEvent(stateInflight)
		r.log = append(r.log, fmt.Sprintf("Extend(%q, %d, %d)", id, gen, now))
		got, err := r.s.Extend(ctx, id, gen, now)
		want, werr := r.m.extend(ExtendItem{EventID: id, Generation: gen}, now)
		if r.twin != nil {
			r.twin.Extend(ctx, id, gen, now)
		}
		if !sameErr(err, werr) || got != want {
			return fmt.Errorf("Extend = %q, %v; model %q, %v", got, err, want, werr)
		}
	case op < 20:
		var items []ExtendItem
		for n := r.c.Intn(4); n > 0; n-- {
			id, gen := r.anyEvent(stateInflight)
			items = append(items, ExtendItem{EventID: id, Generation: gen})
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
			if got[i].Outcome != want[i].Outcome || !sameErr(got[i].Err, want[i].Err) {
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
		r.log = append(r.log, fmt.Sprintf("SetWeight(%q, %d, %q, %d)", flow, w, reason, now))
		err := r.s.SetWeight(ctx, flow, w, reason, now)
		werr := r.m.setWeightOp(flow, w, reason, now)
		if r.twin != nil {
			r.twin.SetWeight(ctx, flow, w, reason, now)
		}
		if !sameErr(err, werr) {
			return fmt.Errorf("SetWeight = %v; model %v", err, werr)
		}
	default:
		id, gen := r.anyEvent(stateQuarantined)
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
	due, ok, err := r.s.NextDue(ctx)
	if err != nil {
		return err
	}
	if err := r.m.checkNextDue(due, ok); err != nil {
		return err
	}
	if r.twin != nil {
		tw, err := r.twin.Snapshot(ctx)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(sn, tw) {
			return fmt.Errorf("ClaimBatch store and successive-Claim twin differ:\n%s\n%s", jsonOf(sn), jsonOf(tw))
		}
	}
	return nil
}

// memTempDir returns a fresh directory on a memory file system (/dev/shm)
// when the machine has one, else t.TempDir(). The randomized tests check the
// contract's logic over tens of thousands of short transactions; on tmpfs an
// fsync costs nothing, so they fit the test budget. The store runs exactly
// as anywhere else (same DSN, WAL, synchronous=FULL): only the medium
// differs. Durability is proven by the crash and multi-process tests, which
// use t.TempDir().
func memTempDir(t testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "queuestore-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}
