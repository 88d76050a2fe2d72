package experiment

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// queueScenarios are the queue contract's clauses, each driven through the
// relay against both real stores.
func queueScenarios() []Scenario {
	return []Scenario{
		{
			Name:   "head-blocks-own-flow",
			Clause: "§2.2 (an in-flight head blocks its own flow only)",
			Shows:  "while a's head is in flight with a live lease, a-2 waits and flow b drains; once a-1 is acked, a-2 is claimed",
			Run:    headBlocksOwnFlow,
		},
		{
			Name:   "quarantined-head-blocks-flow",
			Clause: "§2.2, §2.4.6 (a quarantined head blocks its flow; others drain)",
			Shows:  "a-1 fails three times with unsupported_delta and is quarantined; a-2 stays pending for good while b drains",
			Run:    quarantinedHeadBlocksFlow,
		},
		{
			Name:   "backoff-then-quarantine",
			Clause: "§2.4.5, §2.4.6, §2.2 (backoff 2 then 4, then quarantine; a backoff blocks only its flow)",
			Shows:  "a receiver conflict fails a-1 at t=0, t=2 and t=6: available at 2, then 6, then quarantined with reason conflict; z-1 is served during the backoff",
			Run:    backoffThenQuarantine,
		},
		{
			Name:   "lease-expiry-takeover",
			Clause: "§2.3 (take-over), §2.4.1 (stale generation), §3 (idempotent receiver)",
			Shows:  "a worker stalls past its lease; a second worker takes a-1 over with generation 2; the first worker's late delivery and settles change nothing in the queue and the effect is applied once",
			Run:    leaseExpiryTakeover,
		},
		{
			Name:   "expired-settle",
			Clause: "§2.4.3, §2.6 (expired settle without a take-over; it records the clock mark)",
			Shows:  "a settle at the lease's end is expired even though nobody took the event over; only the clock mark moves; a take-over then acks it",
			Run:    expiredSettle,
		},
		{
			Name:   "last-attempt-expiry-quarantines",
			Clause: "§2.3 (lease_expired on the last attempt of a round)",
			Shows:  "the third attempt's lease expires: the next claim picks a (tie at served 3), quarantines a-1 with reason lease_expired (served, ticket, generation unchanged) and claims b-4 in the same transaction",
			Run:    lastAttemptExpiryQuarantines,
		},
		{
			Name:   "unsupported-delta-redrive",
			Clause: "§2.4.6, §2.5, §3 (MaxDelta raised, redrive, byte-identical replay accepted)",
			Shows:  "a delta above MaxDelta 100 is quarantined after three attempts; bad redrives change nothing; after the receiver is reopened with MaxDelta 1000 a redrive with a reason starts a new round and the byte-identical original is accepted, with one audit row",
			Run:    unsupportedDeltaRedrive,
		},
		{
			Name:   "unavailable",
			Clause: "§3 (unavailable: a synthetic failure before sending), §2.4.5",
			Shows:  "the first attempt fails as unavailable without reaching the receiver; the retry after the backoff of 2 is accepted",
			Run:    unavailable,
		},
		{
			Name:   "enqueue-duplicate-conflict",
			Clause: "§2.1 (duplicate, conflict, bad input; batches all or nothing)",
			Shows:  "a byte-identical re-enqueue returns seq 1 as a duplicate; another body or flow under the same ID and bad input are refused and change nothing, not even the clock mark; a batch with one conflict stores nothing",
			Run:    enqueueDuplicateConflict,
		},
		{
			Name:   "clock-regression",
			Clause: "§2.6 (time regression refused on every queue write, before every other check)",
			Shows:  "at a tick below the mark, enqueue, batch enqueue, claim, settle and redrive are all refused with ErrTimeRegression and the snapshot is byte-identical; equal ticks are fine; the mark survives a reopen",
			Run:    clockRegression,
		},
	}
}

func headBlocksOwnFlow(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 1), Ev("a-2", "a", 2), Ev("b-1", "b", 10), Ev("b-2", "b", 20)); err != nil {
		return err
	}
	held, ok, err := lab.claim(ctx, q, 1)
	if err != nil {
		return err
	}
	lab.Check("first claim is a-1", ok && held.EventID == "a-1", "claimed %q", held.EventID)
	var drained []string
	for range 2 {
		st, ok, err := lab.step(ctx, relay, 1)
		if err != nil {
			return err
		}
		if ok {
			drained = append(drained, st.Claim.EventID)
		}
	}
	lab.Equal("b drains while a-1 is in flight", drained, []string{"b-1", "b-2"})
	if err := lab.expectNothing(ctx, relay, 2, "a-2 is blocked by its in-flight head"); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "a-2 waits untouched", "a-2", "pending gen 0 attempts 0 lifetime 0 available 0"); err != nil {
		return err
	}
	if _, err := lab.deliver(ctx, relay, held, 2); err != nil {
		return err
	}
	st, ok, err := lab.step(ctx, relay, 2)
	if err != nil {
		return err
	}
	lab.Check("a-2 is claimed once a-1 is acked", ok && st.Claim.EventID == "a-2" && st.Claim.Ticket == 4, "claimed %q ticket %d", st.Claim.EventID, st.Claim.Ticket)
	if err := lab.expectTotal(ctx, relay.Receiver, "a", 3); err != nil {
		return err
	}
	return lab.expectTotal(ctx, relay.Receiver, "b", 30)
}

func quarantinedHeadBlocksFlow(ctx context.Context, lab *Lab) error {
	q, err := lab.Queue()
	if err != nil {
		return err
	}
	r, err := lab.Receiver(WithMaxDelta(100))
	if err != nil {
		return err
	}
	lab.Trace("receiver opened with MaxDelta 100")
	relay := &Relay{Queue: q, Receiver: r}
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 500), Ev("a-2", "a", 5),
		Ev("b-1", "b", 1), Ev("b-2", "b", 2), Ev("b-3", "b", 3)); err != nil {
		return err
	}
	var order []string
	for _, now := range []clock.Tick{0, 0, 2, 2, 6, 6} {
		st, ok, err := lab.step(ctx, relay, now)
		if err != nil {
			return err
		}
		if ok {
			order = append(order, st.Claim.EventID+":"+string(st.Settled))
		}
	}
	lab.Equal("steps at t=0,0,2,2,6,6", order, []string{
		"a-1:retry_scheduled", "b-1:acked", "a-1:retry_scheduled", "b-2:acked", "a-1:quarantined", "b-3:acked"})
	if err := lab.expectEvent(ctx, q, "a-1 quarantined after its third attempt", "a-1", "quarantined gen 3 attempts 3 lifetime 3 reason unsupported_delta"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 6, "a-2 is blocked by its quarantined head"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 100, "a quarantine does not end with time"); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "a-2 was never claimed", "a-2", "pending gen 0 attempts 0 lifetime 0 available 0"); err != nil {
		return err
	}
	if err := lab.expectTotal(ctx, r, "a", 0); err != nil {
		return err
	}
	return lab.expectTotal(ctx, r, "b", 6)
}

func backoffThenQuarantine(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q, r := relay.Queue, relay.Receiver
	// Another producer already delivered seq 1 of flow a under its own ID:
	// every delivery of a-1 is a conflict.
	if _, err := lab.receive(ctx, r, receiver.Message{ID: "other-1", Flow: "a", Seq: 1, Body: Body(50)}); err != nil {
		return err
	}
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 7), Ev("a-2", "a", 8), Ev("z-1", "z", 9)); err != nil {
		return err
	}
	lab.Equal("Backoff(1), Backoff(2), Backoff(3)", []clock.Tick{queue.Backoff(1), queue.Backoff(2), queue.Backoff(3)}, []clock.Tick{2, 4, 8})
	if _, _, err := lab.step(ctx, relay, 0); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "first failure: retry at 0+2", "a-1", "pending gen 1 attempts 1 lifetime 1 available 2 reason conflict"); err != nil {
		return err
	}
	st, ok, err := lab.step(ctx, relay, 1)
	if err != nil {
		return err
	}
	lab.Check("z-1 is served while a waits out its backoff", ok && st.Claim.EventID == "z-1", "claimed %q", st.Claim.EventID)
	if err := lab.expectNothing(ctx, relay, 1, "a-1's backoff blocks a-2 at t=1"); err != nil {
		return err
	}
	if _, _, err := lab.step(ctx, relay, 2); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "second failure: retry at 2+4", "a-1", "pending gen 2 attempts 2 lifetime 2 available 6 reason conflict"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 5, "still backing off at t=5"); err != nil {
		return err
	}
	if _, _, err := lab.step(ctx, relay, 6); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "third failure: quarantined", "a-1", "quarantined gen 3 attempts 3 lifetime 3 reason conflict"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 50, "nothing dispatchable after the quarantine"); err != nil {
		return err
	}
	cs, err := r.Conflicts(ctx)
	if err != nil {
		return err
	}
	lab.Equal("three identical conflicting deliveries are recorded once", len(cs), 1)
	if err := lab.expectTotal(ctx, r, "a", 50); err != nil {
		return err
	}
	return lab.expectTotal(ctx, r, "z", 9)
}

func leaseExpiryTakeover(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 9), 0); err != nil {
		return err
	}
	first, _, err := lab.claim(ctx, q, 0)
	if err != nil {
		return err
	}
	lab.Equal("first worker: gen, attempt, ticket, lease", []int64{first.Generation, int64(first.Attempts), first.Ticket, int64(first.LeaseUntil)}, []int64{1, 1, 1, 5})
	if err := lab.expectNothing(ctx, relay, 4, "the lease is live at t=4"); err != nil {
		return err
	}
	second, ok, err := lab.claim(ctx, q, 5)
	if err != nil {
		return err
	}
	lab.Check("take-over at t=5 (now >= lease_until)", ok && second.EventID == "a-1", "claimed %q", second.EventID)
	lab.Equal("second worker: gen, attempt, ticket, lease", []int64{second.Generation, int64(second.Attempts), second.Ticket, int64(second.LeaseUntil)}, []int64{2, 2, 2, 10})
	late, err := lab.deliver(ctx, relay, first, 6)
	if err != nil {
		return err
	}
	lab.Equal("the first worker's late delivery is accepted by the receiver", late.Received, receiver.Accepted)
	lab.Equal("its settle of generation 1 is stale", late.Settled, queue.Stale)
	if err := lab.expectEvent(ctx, q, "the stale settle changed nothing", "a-1", "inflight gen 2 attempts 2 lifetime 2 lease 10"); err != nil {
		return err
	}
	st, err := lab.deliver(ctx, relay, second, 7)
	if err != nil {
		return err
	}
	lab.Equal("the second worker's delivery is a duplicate, settled ok", []string{string(st.Received), string(st.Settled)}, []string{"duplicate", "acked"})
	out, err := lab.settle(ctx, q, "a-1", first.Generation, queue.Result{Reason: "late failure"}, 8)
	if err != nil {
		return err
	}
	lab.Equal("a stale failure cannot overwrite the newer round", out, queue.Stale)
	if err := lab.expectEvent(ctx, q, "a-1 stays acked by generation 2", "a-1", "acked gen 2 attempts 2 lifetime 2"); err != nil {
		return err
	}
	_, err = lab.enqueue(ctx, q, Ev("b-1", "b", 1), 7)
	lab.expectErr("the stale settle at t=8 recorded the clock mark", err, queue.ErrTimeRegression)
	return lab.expectTotal(ctx, relay.Receiver, "a", 9)
}

func expiredSettle(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q, r := relay.Queue, relay.Receiver
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 4), 0); err != nil {
		return err
	}
	c, _, err := lab.claim(ctx, q, 0)
	if err != nil {
		return err
	}
	if _, err := lab.receive(ctx, r, Message(c)); err != nil {
		return err
	}
	out, err := lab.settle(ctx, q, c.EventID, c.Generation, queue.Result{OK: true}, 5)
	if err != nil {
		return err
	}
	lab.Equal("a settle at t=5 = lease_until is expired", out, queue.Expired)
	if err := lab.expectEvent(ctx, q, "nobody took a-1 over: still in flight, unchanged", "a-1", "inflight gen 1 attempts 1 lifetime 1 lease 5"); err != nil {
		return err
	}
	_, err = lab.enqueue(ctx, q, Ev("b-1", "b", 1), 4)
	lab.expectErr("the expired settle recorded the clock mark 5", err, queue.ErrTimeRegression)
	st, ok, err := lab.step(ctx, relay, 5)
	if err != nil {
		return err
	}
	lab.Check("a take-over at t=5 delivers a duplicate and acks", ok && st.Received == receiver.Duplicate && st.Settled == queue.Acked, "%s", st)
	if err := lab.expectEvent(ctx, q, "a-1 acked by generation 2", "a-1", "acked gen 2 attempts 2 lifetime 2"); err != nil {
		return err
	}
	return lab.expectTotal(ctx, r, "a", 4)
}

func lastAttemptExpiryQuarantines(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	relay.Unavailable = func(c queue.Claim) bool { return c.Flow == "a" && c.Attempts < queue.MaxAttempts }
	lab.Trace("the receiver is unavailable for flow a's first two attempts of a round")
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 3),
		Ev("b-1", "b", 1), Ev("b-2", "b", 2), Ev("b-3", "b", 3), Ev("b-4", "b", 4)); err != nil {
		return err
	}
	for _, now := range []clock.Tick{0, 0, 2, 2} {
		if _, _, err := lab.step(ctx, relay, now); err != nil {
			return err
		}
	}
	third, _, err := lab.claim(ctx, q, 6)
	if err != nil {
		return err
	}
	lab.Equal("third attempt of a-1: gen, attempt, ticket, lease", []int64{third.Generation, int64(third.Attempts), third.Ticket, int64(third.LeaseUntil)}, []int64{3, 3, 5, 11})
	if _, _, err := lab.step(ctx, relay, 6); err != nil {
		return err
	}
	// Now a and b have both been served 3 times: at t=11 a's expired head
	// wins the tie (smallest flow) and is quarantined, and the same claim
	// goes on to b.
	c, ok, err := lab.claim(ctx, q, 11)
	if err != nil {
		return err
	}
	lab.Check("the same claim goes on to b-4 with ticket 7", ok && c.EventID == "b-4" && c.Ticket == 7, "claimed %q ticket %d", c.EventID, c.Ticket)
	if err := lab.expectEvent(ctx, q, "a-1 quarantined on expiry, generation unchanged", "a-1", "quarantined gen 3 attempts 3 lifetime 3 reason lease_expired"); err != nil {
		return err
	}
	if err := lab.expectServed(ctx, q, "a's served count is unchanged by the quarantine", "a", 3); err != nil {
		return err
	}
	if _, err := lab.deliver(ctx, relay, c, 11); err != nil {
		return err
	}
	out, err := lab.settle(ctx, q, "a-1", third.Generation, queue.Result{OK: true}, 12)
	if err != nil {
		return err
	}
	lab.Equal("the stalled worker's late settle is stale", out, queue.Stale)
	if err := lab.expectEvent(ctx, q, "a-1 stays quarantined", "a-1", "quarantined gen 3 attempts 3 lifetime 3 reason lease_expired"); err != nil {
		return err
	}
	if err := lab.expectTotal(ctx, relay.Receiver, "a", 0); err != nil {
		return err
	}
	return lab.expectTotal(ctx, relay.Receiver, "b", 10)
}

func unsupportedDeltaRedrive(ctx context.Context, lab *Lab) error {
	q, err := lab.Queue()
	if err != nil {
		return err
	}
	r, err := lab.Receiver(WithMaxDelta(100))
	if err != nil {
		return err
	}
	lab.Trace("receiver opened with MaxDelta 100")
	relay := &Relay{Queue: q, Receiver: r}
	original := Ev("a-1", "a", 250)
	if err := lab.enqueueAll(ctx, q, 0, original, Ev("a-2", "a", 1)); err != nil {
		return err
	}
	for _, now := range []clock.Tick{0, 2, 6} {
		if _, _, err := lab.step(ctx, relay, now); err != nil {
			return err
		}
	}
	if err := lab.expectEvent(ctx, q, "a-1 quarantined", "a-1", "quarantined gen 3 attempts 3 lifetime 3 reason unsupported_delta"); err != nil {
		return err
	}
	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.expectErr("redrive without a reason is refused", q.Redrive(ctx, "a-1", 3, "", 7), queue.ErrEmptyReason)
	lab.expectErr("redrive of an old generation is refused", q.Redrive(ctx, "a-1", 2, "retry", 7), queue.ErrStaleGeneration)
	lab.expectErr("redrive of a pending event is refused", q.Redrive(ctx, "a-2", 0, "retry", 7), queue.ErrNotQuarantined)
	lab.expectErr("redrive of an unknown event is refused", q.Redrive(ctx, "a-9", 1, "retry", 7), queue.ErrNotFound)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("refused redrives change nothing", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))

	if err := r.Close(); err != nil {
		return err
	}
	if r, err = lab.Receiver(); err != nil {
		return err
	}
	relay.Receiver = r
	lab.Trace("receiver reopened with MaxDelta 1000 after a reviewed fix")
	const reason = "receiver max_delta raised to 1000 after review"
	if err := q.Redrive(ctx, "a-1", 3, reason, 10); err != nil {
		return err
	}
	lab.Trace("t=10 redrive a-1 gen 3 (%q) -> ok", reason)
	if err := lab.expectEvent(ctx, q, "redrive: new generation, new round, lifetime kept, reason cleared", "a-1", "pending gen 4 attempts 0 lifetime 3 available 10"); err != nil {
		return err
	}
	e, err := q.Event(ctx, "a-1")
	if err != nil {
		return err
	}
	lab.Check("ID, flow, seq and body are byte-identical after the redrive",
		e.ID == original.ID && e.Flow == original.Flow && e.Seq == 1 && bytes.Equal(e.Body, original.Body),
		"%s %s#%d %s", e.ID, e.Flow, e.Seq, e.Body)
	st, ok, err := lab.step(ctx, relay, 10)
	if err != nil {
		return err
	}
	lab.Check("the byte-identical original is accepted", ok && st.Claim.EventID == "a-1" && st.Received == receiver.Accepted && st.Settled == queue.Acked, "%s", st)
	if err := lab.expectEvent(ctx, q, "a-1 acked in its second round", "a-1", "acked gen 5 attempts 1 lifetime 4"); err != nil {
		return err
	}
	if _, _, err := lab.step(ctx, relay, 10); err != nil {
		return err
	}
	audit, err := q.Audit(ctx)
	if err != nil {
		return err
	}
	lab.Equal("one audit row", len(audit), 1)
	if len(audit) == 1 {
		a := audit[0]
		lab.Equal("audit row: event, new generation, reason, tick", []any{a.EventID, a.Generation, a.Reason, int64(a.At)}, []any{"a-1", int64(4), reason, int64(10)})
	}
	rs, err := r.Snapshot(ctx)
	if err != nil {
		return err
	}
	if len(rs.Receipts) > 0 {
		lab.Equal("receipt body is the original bytes", rs.Receipts[0].Body, string(original.Body))
	}
	return lab.expectTotal(ctx, r, "a", 251)
}

func unavailable(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q, r := relay.Queue, relay.Receiver
	relay.Unavailable = func(c queue.Claim) bool { return c.Attempts == 1 }
	lab.Trace("the receiver is unavailable for the first attempt of a round")
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 3), 0); err != nil {
		return err
	}
	st, _, err := lab.step(ctx, relay, 0)
	if err != nil {
		return err
	}
	lab.Equal("unavailable settles as a failure, retry scheduled", []string{st.Result.Reason, string(st.Settled)}, []string{"unavailable", "retry_scheduled"})
	if err := lab.expectEvent(ctx, q, "a-1 waits for the backoff of 2", "a-1", "pending gen 1 attempts 1 lifetime 1 available 2 reason unavailable"); err != nil {
		return err
	}
	rs, err := r.Snapshot(ctx)
	if err != nil {
		return err
	}
	lab.Equal("nothing reached the receiver", len(rs.Receipts)+len(rs.Conflicts)+len(rs.Flows), 0)
	if err := lab.expectNothing(ctx, relay, 1, "backing off at t=1"); err != nil {
		return err
	}
	st, _, err = lab.step(ctx, relay, 2)
	if err != nil {
		return err
	}
	lab.Equal("the retry at t=2 is accepted and acked", []string{string(st.Received), string(st.Settled)}, []string{"accepted", "acked"})
	if err := lab.expectEvent(ctx, q, "a-1 acked on its second attempt", "a-1", "acked gen 2 attempts 2 lifetime 2 reason unavailable"); err != nil {
		return err
	}
	return lab.expectTotal(ctx, r, "a", 3)
}

func enqueueDuplicateConflict(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	first, err := lab.enqueue(ctx, q, Ev("e-1", "a", 5), 1)
	if err != nil {
		return err
	}
	again, err := lab.enqueue(ctx, q, Ev("e-1", "a", 5), 2)
	if err != nil {
		return err
	}
	lab.Equal("first enqueue: seq 1, not a duplicate", first, queue.Enqueued{Seq: 1})
	lab.Equal("byte-identical again: seq 1, duplicate", again, queue.Enqueued{Seq: 1, Duplicate: true})
	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	_, err = lab.enqueue(ctx, q, Ev("e-1", "a", 6), 3)
	lab.expectErr("same ID, other body: conflict", err, queue.ErrConflict)
	_, err = lab.enqueue(ctx, q, Ev("e-1", "b", 5), 3)
	lab.expectErr("same ID, other flow: conflict", err, queue.ErrConflict)
	for _, bad := range []struct {
		name string
		e    queue.Event
	}{
		{"empty ID", queue.Event{Flow: "a", Body: Body(1)}},
		{"empty flow", queue.Event{ID: "e-9", Body: Body(1)}},
		{"empty body", queue.Event{ID: "e-9", Flow: "a"}},
		{"unprintable ID", queue.Event{ID: "e-\x00", Flow: "a", Body: Body(1)}},
	} {
		_, err := q.Enqueue(ctx, bad.e, 3)
		lab.expectErr(bad.name+" is invalid", err, queue.ErrInvalid)
	}
	_, err = q.EnqueueBatch(ctx, []queue.Event{Ev("e-3", "a", 11), Ev("e-1", "a", 9)}, 3)
	lab.Trace("t=3 enqueue batch [e-3, e-1 with another body] -> %s", errText(err))
	lab.expectErr("a batch with one conflict is refused", err, queue.ErrConflict)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("refusals change nothing, not even the clock mark", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))
	second, err := lab.enqueue(ctx, q, Ev("e-2", "a", 7), 2)
	if err != nil {
		return err
	}
	lab.Equal("e-2 at t=2 (the mark is still 2): seq 2", second, queue.Enqueued{Seq: 2})
	batch, err := q.EnqueueBatch(ctx, []queue.Event{Ev("e-3", "a", 11), Ev("e-4", "b", 13)}, 3)
	if err != nil {
		return err
	}
	lab.Trace("t=3 enqueue batch [e-3, e-4] -> %v", batch)
	lab.Equal("batch: e-3 is a#3, e-4 is b#1", batch, []queue.Enqueued{{Seq: 3}, {Seq: 1}})
	for {
		_, ok, err := lab.step(ctx, relay, 4)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
	}
	if err := lab.expectTotal(ctx, relay.Receiver, "a", 23); err != nil {
		return err
	}
	return lab.expectTotal(ctx, relay.Receiver, "b", 13)
}

func clockRegression(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 2), 10); err != nil {
		return err
	}
	held, _, err := lab.claim(ctx, q, 10)
	if err != nil {
		return err
	}
	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	_, err = q.Enqueue(ctx, Ev("a-2", "a", 3), 9)
	lab.expectErr("enqueue at t=9", err, queue.ErrTimeRegression)
	_, err = q.Enqueue(ctx, Ev("a-1", "a", 2), 9)
	lab.expectErr("duplicate enqueue at t=9 (regression comes first)", err, queue.ErrTimeRegression)
	_, err = q.EnqueueBatch(ctx, []queue.Event{Ev("a-2", "a", 3)}, 9)
	lab.expectErr("batch enqueue at t=9", err, queue.ErrTimeRegression)
	_, _, err = q.Claim(ctx, 9)
	lab.expectErr("claim at t=9", err, queue.ErrTimeRegression)
	_, err = q.Settle(ctx, "a-1", held.Generation, queue.Result{OK: true}, 9)
	lab.expectErr("settle at t=9", err, queue.ErrTimeRegression)
	_, err = q.Settle(ctx, "a-1", held.Generation+5, queue.Result{OK: true}, 9)
	lab.expectErr("settle of a wrong generation at t=9 (regression comes first)", err, queue.ErrTimeRegression)
	err = q.Redrive(ctx, "a-1", held.Generation, "operator retry", 9)
	lab.expectErr("redrive of an in-flight event at t=9 (regression comes first)", err, queue.ErrTimeRegression)
	lab.Trace("t=9 enqueue, duplicate enqueue, batch enqueue, claim, settle, stale settle, redrive -> all refused")
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("refused writes change nothing", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))
	st, err := lab.deliver(ctx, relay, held, 10)
	if err != nil {
		return err
	}
	lab.Equal("a settle at the same tick 10 is fine", st.Settled, queue.Acked)
	if err := lab.CloseStores(); err != nil {
		return err
	}
	if q, err = lab.Queue(); err != nil {
		return err
	}
	lab.Trace("queue reopened")
	_, err = q.Enqueue(ctx, Ev("a-2", "a", 3), 9)
	lab.expectErr("the mark survives a reopen: enqueue at t=9", err, queue.ErrTimeRegression)
	got, err := lab.enqueue(ctx, q, Ev("a-2", "a", 3), 10)
	if err != nil {
		return err
	}
	lab.Equal("enqueue at t=10 after the reopen", got.Seq, int64(2))
	return nil
}

// queueJSON marshals the queue's snapshot as it is, to compare two moments.
func queueJSON(ctx context.Context, q QueueStore) ([]byte, error) {
	s, err := queueSnapshot(ctx, q)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}
