package experiment

import (
	"context"
	"fmt"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// failureScenarios are the store rules of docs/contract.md §7.8: a failure
// that is permanent, one that asks for a retry-after, and a retry schedule,
// each with the attempt history it leaves.
func failureScenarios() []Scenario {
	return []Scenario{
		{
			Name:   "permanent-failure",
			Clause: "§7.8 (a permanent failure quarantines at once, whatever attempts remain, keeping its reason, error text and history; redrive keeps the history)",
			Shows:  "a-1's body is refused for good at t=1: one settle with Permanent quarantines it on attempt 1 of 3 with reason invalid_body and its error text, a-2 waits behind it and b-1 is delivered; the quarantined list shows the error; after a redrive a-1 and a-2 are delivered and a-1's history still holds its one row",
			Run:    permanentFailure,
		},
		{
			Name:   "retry-after-capped",
			Clause: "§7.8 (a failure's retry-after: the event is available at now + max(backoff, min(retry-after, the policy's limit)))",
			Shows:  "with 4 attempts, backoff 2/4/8 and a retry-after cap of 10, a-1 fails asking 1 (below backoff 2: retry at 0+2), 7 (above backoff 4: retry at 2+7=9) and 100 (capped at 10, above backoff 8: retry at 9+10=19); nothing is dispatchable a tick before each; the fourth attempt at t=19 is delivered; the history holds the three failures",
			Run:    retryAfterCapped,
		},
		{
			Name:   "retry-schedule",
			Clause: "§7.8 (a retry schedule: the wait after the k-th failure is the k-th wait; MaxAttempts is the waits plus one; the history and OldestWaiting)",
			Shows:  "a queue with the schedule 5, 30, 120 (MaxAttempts 4) fails a-1 (flow a unavailable) at t=0, 5, 35 and 155 and quarantines it on the fourth; nothing is dispatchable a tick before each retry; b-1, enqueued later, is delivered; OldestWaiting stays a-1's enqueue tick 0 while it waits in backoff and quarantined, and moves to a-2's 3 once a-1 is redriven and delivered",
			Run:    retrySchedule,
		},
	}
}

// describeHistory is an event's history in one line a row: tick,
// generation, attempt, outcome, reason and error text.
func describeHistory(h []queue.Attempt) []string {
	out := []string{}
	for _, a := range h {
		s := fmt.Sprintf("t=%d gen %d attempt %d %s %s", a.At, a.Generation, a.Attempt, a.Outcome, a.Reason)
		if a.Error != "" {
			s += fmt.Sprintf(" error %q", a.Error)
		}
		out = append(out, s)
	}
	return out
}

// expectHistory checks an event's history (Event's History, oldest first)
// and its current error text.
func (l *Lab) expectHistory(ctx context.Context, q QueueStore, name, id string, wantErr string, want ...string) error {
	e, err := q.Event(ctx, id)
	if err != nil {
		return fmt.Errorf("event %s: %w", id, err)
	}
	if want == nil {
		want = []string{}
	}
	l.Equal(name, describeHistory(e.History), want)
	l.Equal(name+": the event's error text", e.Error, wantErr)
	return nil
}

// expectOldestWaiting checks OldestWaiting (queue.Waiter).
func (l *Lab) expectOldestWaiting(ctx context.Context, q QueueStore, name string, want clock.Tick, wantOK bool) error {
	w, ok := q.(queue.Waiter)
	if !ok {
		l.Check(name, false, "the queue is not a queue.Waiter")
		return nil
	}
	at, ok, err := w.OldestWaiting(ctx)
	if err != nil {
		return err
	}
	l.Equal(name, []any{int64(at), ok}, []any{int64(want), wantOK})
	return nil
}

func permanentFailure(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 3), Ev("a-2", "a", 4), Ev("b-1", "b", 5)); err != nil {
		return err
	}
	c, _, err := lab.claim(ctx, q, 1)
	if err != nil {
		return err
	}
	lab.Equal("the claim at t=1 is a-1, attempt 1 of 3", []any{c.EventID, c.Attempts}, []any{"a-1", 1})
	const why = "unknown_field: extra"
	out, err := lab.settle(ctx, q, c.EventID, c.Generation, queue.Result{Reason: "invalid_body", Permanent: true, Error: why}, 1)
	if err != nil {
		return err
	}
	lab.Equal("a permanent failure on attempt 1 quarantines", out, queue.Quarantined)
	if err := lab.expectEvent(ctx, q, "a-1 quarantined at once, two attempts unused", "a-1", "quarantined gen 1 attempts 1 lifetime 1 reason invalid_body"); err != nil {
		return err
	}
	if err := lab.expectHistory(ctx, q, "a-1's history: one row", "a-1", why, `t=1 gen 1 attempt 1 quarantined invalid_body error "unknown_field: extra"`); err != nil {
		return err
	}
	st, ok, err := lab.step(ctx, relay, 2)
	if err != nil {
		return err
	}
	lab.Check("at t=2 the next claim is b-1: a-2 waits behind its quarantined head", ok && st.Claim.EventID == "b-1" && st.Settled == queue.Acked, "%s", st)
	if err := lab.expectNothing(ctx, relay, 100, "a quarantine never expires: nothing dispatchable at t=100"); err != nil {
		return err
	}
	qs, err := q.Quarantined(ctx)
	if err != nil {
		return err
	}
	var list []string
	for _, e := range qs {
		list = append(list, fmt.Sprintf("%s gen %d %s %q", e.EventID, e.Generation, e.Reason, e.Error))
	}
	lab.Equal("the quarantined list shows the error text", list, []string{`a-1 gen 1 invalid_body "unknown_field: extra"`})
	err = q.Redrive(ctx, "a-1", 1, "receiver accepts the extra field now", 101)
	lab.Trace("t=101 redrive a-1 gen 1 (%q) -> %s", "receiver accepts the extra field now", okOr(err))
	if err != nil {
		return err
	}
	if err := lab.expectHistory(ctx, q, "after the redrive the history is kept, the current error is empty", "a-1", "", `t=1 gen 1 attempt 1 quarantined invalid_body error "unknown_field: extra"`); err != nil {
		return err
	}
	n, err := relay.Drain(ctx, 101)
	if err != nil {
		return err
	}
	lab.Trace("t=101 drain -> %d delivered", n)
	lab.Equal("a-1 and a-2 are delivered after the redrive", n, 2)
	if err := lab.expectEvent(ctx, q, "a-1 acked in its second round (the redrive took generation 2, its claim 3)", "a-1", "acked gen 3 attempts 1 lifetime 2"); err != nil {
		return err
	}
	return lab.expectTotals(ctx, relay.Receiver, "a", 7, "b", 5)
}

func retryAfterCapped(ctx context.Context, lab *Lab) error {
	p := queue.DefaultPolicy()
	p.MaxAttempts, p.RetryAfterCap = 4, 10
	q, err := lab.Queue(WithPolicy(p))
	if err != nil {
		return err
	}
	lab.Trace("queue created with policy: %s, retry-after cap %d", describePolicy(p), p.RetryAfterCap)
	r, err := lab.Receiver()
	if err != nil {
		return err
	}
	relay := &Relay{Queue: q, Receiver: r}
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 2)); err != nil {
		return err
	}
	now := clock.Tick(0)
	for _, tc := range []struct {
		retryAfter, at clock.Tick
		name           string
	}{
		{1, 2, "retry-after 1 is below Backoff(1) = 2: available at 0+2"},
		{7, 9, "retry-after 7 is above Backoff(2) = 4: available at 2+7"},
		{100, 19, "retry-after 100 is capped at 10, above Backoff(3) = 8: available at 9+10"},
	} {
		c, ok, err := lab.claim(ctx, q, now)
		if err != nil {
			return err
		}
		if !ok {
			lab.Check(tc.name, false, "nothing to claim at t=%d", now)
			return nil
		}
		res := queue.Result{Reason: "unavailable", RetryAfter: tc.retryAfter, Error: "503 Service Unavailable"}
		if _, err := lab.settle(ctx, q, c.EventID, c.Generation, res, now); err != nil {
			return err
		}
		e, err := q.Event(ctx, "a-1")
		if err != nil {
			return err
		}
		lab.Equal(tc.name, int64(e.AvailableAt), int64(tc.at))
		if err := lab.expectNothing(ctx, relay, tc.at-1, fmt.Sprintf("nothing dispatchable at t=%d", tc.at-1)); err != nil {
			return err
		}
		now = tc.at
	}
	st, ok, err := lab.step(ctx, relay, now)
	if err != nil {
		return err
	}
	lab.Check("the fourth attempt at t=19 is delivered", ok && st.Claim.EventID == "a-1" && st.Claim.Attempts == 4 && st.Settled == queue.Acked, "%s", st)
	if err := lab.expectHistory(ctx, q, "a-1's history: the three failures", "a-1", "",
		`t=0 gen 1 attempt 1 retry_scheduled unavailable error "503 Service Unavailable"`,
		`t=2 gen 2 attempt 2 retry_scheduled unavailable error "503 Service Unavailable"`,
		`t=9 gen 3 attempt 3 retry_scheduled unavailable error "503 Service Unavailable"`); err != nil {
		return err
	}
	return lab.expectTotals(ctx, r, "a", 2)
}

func retrySchedule(ctx context.Context, lab *Lab) error {
	p := queue.DefaultPolicy().WithSchedule(5, 30, 120)
	q, err := lab.Queue(WithPolicy(p))
	if err != nil {
		return err
	}
	lab.Trace("queue created with policy: %s, schedule %s", describePolicy(p), ticks(p.Schedule))
	lab.Equal("MaxAttempts is the three waits plus one", p.MaxAttempts, 4)
	r, err := lab.Receiver()
	if err != nil {
		return err
	}
	down := true
	relay := &Relay{Queue: q, Receiver: r, Unavailable: func(c queue.Claim) bool { return down && c.Flow == "a" }}
	lab.Trace("the receiver is unavailable for flow a")
	if err := lab.expectOldestWaiting(ctx, q, "an empty queue has nothing waiting", 0, false); err != nil {
		return err
	}
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 1)); err != nil {
		return err
	}
	now := clock.Tick(0)
	for k := 1; k <= 4; k++ {
		st, ok, err := lab.step(ctx, relay, now)
		if err != nil {
			return err
		}
		if !ok || st.Claim.EventID != "a-1" {
			lab.Check(fmt.Sprintf("attempt %d claims a-1", k), false, "claimed %q at t=%d", st.Claim.EventID, now)
			return nil
		}
		if k == 4 {
			lab.Equal("the fourth failure quarantines", st.Settled, queue.Quarantined)
			break
		}
		lab.Equal(fmt.Sprintf("failure %d: retry after the schedule's wait %d", k, p.Schedule[k-1]), st.Settled, queue.RetryScheduled)
		next := now + p.Schedule[k-1]
		if k == 1 {
			if err := lab.enqueueAll(ctx, q, 3, Ev("a-2", "a", 2), Ev("b-1", "b", 4)); err != nil {
				return err
			}
			if err := lab.expectOldestWaiting(ctx, q, "a-1 in backoff is the oldest waiting", 0, true); err != nil {
				return err
			}
			st, ok, err := lab.step(ctx, relay, 3)
			if err != nil {
				return err
			}
			lab.Check("at t=3 b-1 is delivered meanwhile", ok && st.Claim.EventID == "b-1" && st.Settled == queue.Acked, "%s", st)
		}
		if err := lab.expectNothing(ctx, relay, next-1, fmt.Sprintf("a-1 backs off until t=%d", next)); err != nil {
			return err
		}
		now = next
	}
	if err := lab.expectEvent(ctx, q, "a-1 quarantined on its fourth attempt at t=155", "a-1", "quarantined gen 4 attempts 4 lifetime 4 reason unavailable"); err != nil {
		return err
	}
	if err := lab.expectHistory(ctx, q, "a-1's history: one row per failure", "a-1", "",
		"t=0 gen 1 attempt 1 retry_scheduled unavailable",
		"t=5 gen 2 attempt 2 retry_scheduled unavailable",
		"t=35 gen 3 attempt 3 retry_scheduled unavailable",
		"t=155 gen 4 attempt 4 quarantined unavailable"); err != nil {
		return err
	}
	if err := lab.expectOldestWaiting(ctx, q, "quarantined a-1 (enqueued at 0) is still the oldest waiting", 0, true); err != nil {
		return err
	}
	down = false
	lab.Trace("the receiver is back for flow a")
	err = q.Redrive(ctx, "a-1", 4, "receiver back", 200)
	lab.Trace("t=200 redrive a-1 gen 4 (%q) -> %s", "receiver back", okOr(err))
	if err != nil {
		return err
	}
	if _, _, err := lab.step(ctx, relay, 200); err != nil {
		return err
	}
	if err := lab.expectOldestWaiting(ctx, q, "a-1 delivered: a-2 (enqueued at 3) is the oldest waiting", 3, true); err != nil {
		return err
	}
	if _, _, err := lab.step(ctx, relay, 200); err != nil {
		return err
	}
	if err := lab.expectOldestWaiting(ctx, q, "every event acked: nothing waits", 0, false); err != nil {
		return err
	}
	return lab.expectTotals(ctx, r, "a", 3, "b", 4)
}

// ticks is a list of ticks as "5, 30, 120".
func ticks(ts []clock.Tick) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = fmt.Sprint(int64(t))
	}
	return strings.Join(s, ", ")
}
