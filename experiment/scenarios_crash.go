package experiment

import (
	"bytes"
	"context"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/crashpoint"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// crashScenarios kill a real child process at each of the six crash points
// (docs/contract.md §4), assert its exit status 73, and then run a recovery that must
// converge with every effect applied exactly once.
func crashScenarios() []Scenario {
	return []Scenario{
		{
			Name:      "crash-enqueue-seq-taken",
			Clause:    "§4, §2.1, §2.7 (crash inside enqueue after the seq is taken)",
			Shows:     "the child dies inside the enqueue transaction: no event, no seq consumed; the producer's retry gets seq 2 and the event is delivered once",
			Processes: 1,
			Crash:     crashpoint.EnqueueSeqTaken,
			Run:       crashEnqueue,
		},
		{
			Name:      "crash-claim-committed",
			Clause:    "§4, §2.3 (crash after a claim commits, before sending)",
			Shows:     "the claim survives (in flight, generation 1, one attempt and one serve spent); after the lease a take-over delivers it once",
			Processes: 1,
			Crash:     crashpoint.ClaimCommitted,
			Run:       crashClaim,
		},
		{
			Name:      "crash-receive-before-commit",
			Clause:    "§4, §3.6 (crash inside the receiver's accept)",
			Shows:     "the accept is rolled back: no receipt, no total; the take-over's delivery is accepted once",
			Processes: 1,
			Crash:     crashpoint.ReceiveBeforeCommit,
			Run:       crashReceiveBeforeCommit,
		},
		{
			Name:      "crash-receive-committed",
			Clause:    "§4, §1, §3.1 (crash after the receiver commits, before settle)",
			Shows:     "the effect is applied but the queue still has the event in flight; the take-over's redelivery is a duplicate and is acked: the total counts the delta once",
			Processes: 1,
			Crash:     crashpoint.ReceiveCommitted,
			Run:       crashReceiveCommitted,
		},
		{
			Name:      "crash-settle-before-commit",
			Clause:    "§4, §2.4 (crash inside settle)",
			Shows:     "the settle is rolled back and the event stays in flight; the take-over's redelivery is a duplicate and is acked once",
			Processes: 1,
			Crash:     crashpoint.SettleBeforeCommit,
			Run:       crashSettle,
		},
		{
			Name:      "crash-redrive-before-audit",
			Clause:    "§4, §2.5, §2.7 (crash inside redrive after the event update)",
			Shows:     "the redrive is rolled back whole: still quarantined, no audit row; the operator's second redrive lands with one audit row and the event is accepted once",
			Processes: 1,
			Crash:     crashpoint.RedriveBeforeAudit,
			Run:       crashRedrive,
		},
	}
}

// crash runs job in a child armed at point, with the scenario's stores
// closed, and checks that it died with status 73.
func (l *Lab) crash(ctx context.Context, job Job, point crashpoint.Point) error {
	if err := l.CloseStores(); err != nil {
		return err
	}
	exit, err := l.Child(ctx, job, point)
	if err != nil {
		return err
	}
	l.Trace("child %s armed at %s -> exit status %d", job.Program, point, exit.Code)
	l.ExpectExit("child process exits 73 at "+string(point), exit, crashpoint.ExitCode)
	return nil
}

// unchangedBy checks that the crashed transaction left no trace: the queue's
// snapshot is byte-identical to the one taken before the child ran (records,
// seq counters, clock mark).
func (l *Lab) unchangedBy(ctx context.Context, q QueueStore, before []byte) error {
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	l.Check("the crashed transaction left queue.db as it was", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))
	return nil
}

// converged checks the end state every crash recovery must reach: the event
// acked as described, one receipt for it, and the flow's total.
func (l *Lab) converged(ctx context.Context, relay *Relay, id, want string, flow string, total int64) error {
	if err := l.expectEvent(ctx, relay.Queue, "recovered: "+id+" acked", id, want); err != nil {
		return err
	}
	rs, err := relay.Receiver.Snapshot(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, rc := range rs.Receipts {
		if rc.ID == id {
			n++
		}
	}
	l.Equal("one receipt for "+id, n, 1)
	if err := l.expectTotal(ctx, relay.Receiver, flow, total); err != nil {
		return err
	}
	return l.expectNothing(ctx, relay, 100, "nothing left to claim")
}

// crashBeforeTakeover sets up one event, crashes a relay child at point and
// checks what survived, then recovers with a take-over at t=5.
func crashBeforeTakeover(ctx context.Context, lab *Lab, point crashpoint.Point, receivedTotal int64, redelivery receiver.Outcome) error {
	q, err := lab.Queue()
	if err != nil {
		return err
	}
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 8), 0); err != nil {
		return err
	}
	if err := lab.crash(ctx, Job{Program: ProgRelay, Now: 0, Steps: 1}, point); err != nil {
		return err
	}
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	lab.Trace("stores reopened after the crash")
	if err := lab.expectEvent(ctx, relay.Queue, "after the crash a-1 is in flight, generation 1", "a-1", "inflight gen 1 attempts 1 lifetime 1 lease 5"); err != nil {
		return err
	}
	if err := lab.expectServed(ctx, relay.Queue, "the crashed claim spent one serve of flow a", "a", 1); err != nil {
		return err
	}
	got, err := relay.Receiver.Total(ctx, "a")
	if err != nil {
		return err
	}
	lab.Equal("receiver total right after the crash", got, receivedTotal)
	if err := lab.expectNothing(ctx, relay, 4, "the dead worker's lease holds until t=5"); err != nil {
		return err
	}
	st, ok, err := lab.step(ctx, relay, 5)
	if err != nil {
		return err
	}
	lab.Check("take-over at t=5: generation 2, attempt 2", ok && st.Claim.Generation == 2 && st.Claim.Attempts == 2, "%s", st)
	lab.Equal("the take-over's redelivery outcome", st.Received, redelivery)
	return lab.converged(ctx, relay, "a-1", "acked gen 2 attempts 2 lifetime 2", "a", 8)
}

func crashClaim(ctx context.Context, lab *Lab) error {
	return crashBeforeTakeover(ctx, lab, crashpoint.ClaimCommitted, 0, receiver.Accepted)
}

func crashReceiveBeforeCommit(ctx context.Context, lab *Lab) error {
	return crashBeforeTakeover(ctx, lab, crashpoint.ReceiveBeforeCommit, 0, receiver.Accepted)
}

func crashReceiveCommitted(ctx context.Context, lab *Lab) error {
	return crashBeforeTakeover(ctx, lab, crashpoint.ReceiveCommitted, 8, receiver.Duplicate)
}

func crashSettle(ctx context.Context, lab *Lab) error {
	return crashBeforeTakeover(ctx, lab, crashpoint.SettleBeforeCommit, 8, receiver.Duplicate)
}

func crashEnqueue(ctx context.Context, lab *Lab) error {
	q, err := lab.Queue()
	if err != nil {
		return err
	}
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 1), 0); err != nil {
		return err
	}
	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	if err := lab.crash(ctx, Job{Program: ProgEnqueue, Now: 1, Events: []queue.Event{Ev("a-2", "a", 2)}}, crashpoint.EnqueueSeqTaken); err != nil {
		return err
	}
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	lab.Trace("stores reopened after the crash")
	if err := lab.unchangedBy(ctx, relay.Queue, before); err != nil {
		return err
	}
	_, err = relay.Queue.Event(ctx, "a-2")
	lab.expectErr("the crashed enqueue left no event", err, queue.ErrNotFound)
	got, err := lab.enqueue(ctx, relay.Queue, Ev("a-2", "a", 2), 1)
	if err != nil {
		return err
	}
	lab.Equal("the retried enqueue gets seq 2, not a duplicate: the crashed seq was never taken", got, queue.Enqueued{Seq: 2})
	for range 2 {
		if _, _, err := lab.step(ctx, relay, 1); err != nil {
			return err
		}
	}
	if err := lab.expectEvent(ctx, relay.Queue, "a-1 acked once", "a-1", "acked gen 1 attempts 1 lifetime 1"); err != nil {
		return err
	}
	return lab.converged(ctx, relay, "a-2", "acked gen 1 attempts 1 lifetime 1", "a", 3)
}

func crashRedrive(ctx context.Context, lab *Lab) error {
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
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 250), 0); err != nil {
		return err
	}
	for _, now := range []clock.Tick{0, 2, 6} {
		if _, _, err := lab.step(ctx, relay, now); err != nil {
			return err
		}
	}
	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	const reason = "receiver max_delta raised to 1000 after review"
	if err := lab.crash(ctx, Job{Program: ProgRedrive, Now: 10, EventID: "a-1", Generation: 3, Reason: reason}, crashpoint.RedriveBeforeAudit); err != nil {
		return err
	}
	if relay, err = lab.relay(); err != nil {
		return err
	}
	lab.Trace("stores reopened after the crash; receiver with MaxDelta 1000")
	if err := lab.unchangedBy(ctx, relay.Queue, before); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, relay.Queue, "after the crash a-1 is still quarantined in generation 3", "a-1", "quarantined gen 3 attempts 3 lifetime 3 reason unsupported_delta"); err != nil {
		return err
	}
	audit, err := relay.Queue.Audit(ctx)
	if err != nil {
		return err
	}
	lab.Equal("after the crash there is no audit row", len(audit), 0)
	if err := relay.Queue.Redrive(ctx, "a-1", 3, reason, 10); err != nil {
		return err
	}
	lab.Trace("t=10 redrive a-1 gen 3 (%q) -> ok", reason)
	st, ok, err := lab.step(ctx, relay, 10)
	if err != nil {
		return err
	}
	lab.Check("the redriven event is accepted", ok && st.Received == receiver.Accepted, "%s", st)
	if audit, err = relay.Queue.Audit(ctx); err != nil {
		return err
	}
	lab.Equal("one audit row after the recovery", len(audit), 1)
	return lab.converged(ctx, relay, "a-1", "acked gen 5 attempts 1 lifetime 4", "a", 250)
}
