package queue

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
)

// Check checks x before a Transplanter's ImportFlow writes it
// (docs/contract.md §7.10): a valid flow row, events of that flow in
// strictly ascending sequence order up to its LastSeq, each in a state the
// schema allows, every event before the head acked and every one after it
// pending, a destination slot (Dest) on in-flight events only, the
// flow's HeadSeq the lowest event not acked (0 when every event is
// acked), histories in generation order, and audit rows of the
// kinds that belong to a flow (redrive rows naming one of its events). It
// returns the index in x.Events of the head (-1 when there is none) and
// the highest tick x records as written (enqueues, acks, failures, audit
// rows). An error wraps ErrInvalid.
func (x FlowExport) Check() (head int, mark clock.Tick, err error) {
	f := x.Flow
	bad := func(format string, a ...any) (int, clock.Tick, error) {
		return -1, 0, fmt.Errorf("%w: export of flow %q: %s", ErrInvalid, f.Flow, fmt.Sprintf(format, a...))
	}
	if err := CheckFlow(f.Flow); err != nil {
		return -1, 0, err
	}
	if f.LastSeq < 1 || f.Served < 0 {
		return bad("last_seq %d, served %d", f.LastSeq, f.Served)
	}
	if err := CheckWeight(f.Weight); err != nil {
		return -1, 0, err
	}
	if f.Paused != (f.PauseReason != "") {
		return bad("paused %v with pause reason %q", f.Paused, f.PauseReason)
	}
	if err := CheckEventDestination(f.Destination); err != nil {
		return -1, 0, err
	}
	head = -1
	ids := make(map[string]bool, len(x.Events))
	var prev int64
	for k, e := range x.Events {
		if err := CheckID(e.ID); err != nil {
			return -1, 0, err
		}
		if ids[e.ID] {
			return bad("event %q twice", e.ID)
		}
		ids[e.ID] = true
		if e.Flow != f.Flow {
			return bad("event %q is of flow %q", e.ID, e.Flow)
		}
		if e.Seq <= prev || e.Seq > f.LastSeq {
			return bad("event %q has seq %d after %d (last_seq %d)", e.ID, e.Seq, prev, f.LastSeq)
		}
		prev = e.Seq
		if len(e.Body) < 1 || len(e.Body) > MaxBodyLen {
			return bad("event %q has a body of %d bytes", e.ID, len(e.Body))
		}
		switch e.State {
		case StatePending, StateInflight, StateAcked, StateQuarantined:
		default:
			return bad("event %q has state %q", e.ID, e.State)
		}
		if e.Attempts < 0 || e.Generation < int64(e.Attempts) || e.LifetimeAttempts < e.Attempts ||
			e.AvailableAt < 0 || e.Ticket < 0 || e.EnqueuedAt < 0 || e.AckedAt < 0 ||
			(e.State == StateInflight) != (e.LeaseUntil > 0) || (e.State == StateInflight && e.Attempts < 1) ||
			(e.State == StateQuarantined && e.Reason == "") || (e.State != StateAcked && e.AckedAt != 0) {
			return bad("event %q: counters or ticks the schema refuses", e.ID)
		}
		if e.Dest != "" {
			if e.State != StateInflight {
				return bad("event %q is %s with a destination slot", e.ID, e.State)
			}
			if err := CheckEventDestination(e.Dest); err != nil {
				return -1, 0, err
			}
		}
		if head < 0 && e.State != StateAcked {
			head = k
		}
		if head >= 0 && k > head && e.State != StatePending {
			return bad("event %q after the head is %s, not pending", e.ID, e.State)
		}
		mark = max(mark, e.EnqueuedAt, e.AckedAt)
		if len(e.History) > MaxHistory {
			return bad("event %q has %d history rows, more than %d", e.ID, len(e.History), MaxHistory)
		}
		var g int64
		for _, a := range e.History {
			if a.Generation <= g || a.Attempt < 1 || a.At < 0 || a.Reason == "" || CheckErrorText(a.Error) != nil ||
				(a.Outcome != RetryScheduled && a.Outcome != Quarantined) {
				return bad("event %q: a history row the schema refuses", e.ID)
			}
			g = a.Generation
			mark = max(mark, a.At)
		}
	}
	want := int64(0)
	if head >= 0 {
		want = x.Events[head].Seq
	}
	if f.HeadSeq != want {
		return bad("head_seq %d, but the lowest event not acked is %d", f.HeadSeq, want)
	}
	for _, r := range x.Audit {
		if r.Reason == "" || r.At < 0 {
			return bad("audit row %d has no reason or a negative tick", r.ID)
		}
		switch r.Kind {
		case AuditRedrive:
			if !ids[r.EventID] || r.Generation < 1 || r.Detail != "" {
				return bad("redrive row %d names no event of the flow", r.ID)
			}
		case AuditWeight, AuditPause, AuditResume, AuditFlowDestination:
			if r.EventID != "" || !json.Valid([]byte(r.Detail)) {
				return bad("%s row %d without a JSON detail", r.Kind, r.ID)
			}
		default:
			return bad("audit row %d of kind %q is not about a flow", r.ID, r.Kind)
		}
		mark = max(mark, r.At)
	}
	return head, mark, nil
}

// CheckQueueAudit checks the rows of a Transplanter's ImportAudit: rows of
// the queue-wide kinds (policy, destination, destination_pause,
// destination_resume, shard), each with a reason and a JSON detail. It returns
// the highest tick among them; an error wraps ErrInvalid.
func CheckQueueAudit(rows []AuditRecord) (mark clock.Tick, err error) {
	for _, r := range rows {
		switch r.Kind {
		case AuditPolicy, AuditDestination, AuditDestinationPause, AuditDestinationResume, AuditShard:
		default:
			return 0, fmt.Errorf("%w: audit row %d of kind %q is not queue-wide", ErrInvalid, r.ID, r.Kind)
		}
		if r.Reason == "" || !json.Valid([]byte(r.Detail)) || r.EventID != "" || r.At < 0 {
			return 0, fmt.Errorf("%w: audit row %d (%s) without a reason or a JSON detail", ErrInvalid, r.ID, r.Kind)
		}
		mark = max(mark, r.At)
	}
	return mark, nil
}

// Destinations lists the destinations x names, each once and the default
// left out: its flow's, then those its in-flight events count against
// (ExportedEvent.Dest). ImportFlow refuses x unless every one is
// registered in the importing store (ErrUnknownDestination).
func (x FlowExport) Destinations() []string {
	var ds []string
	add := func(d string) {
		if d != DefaultDestination && !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	add(x.Flow.Destination)
	for _, e := range x.Events {
		add(e.Dest)
	}
	return ds
}
