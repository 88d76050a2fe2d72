package experiment

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// policyScenarios are the options beyond the default (docs/contract.md §7):
// a queue's recorded policy, lease extension, real time and bulk redrive.
func policyScenarios() []Scenario {
	return []Scenario{
		{
			Name:   "extend-keeps-lease",
			Clause: "§7.2 (Extend moves the lease to now + Lease and changes nothing else)",
			Shows:  "a worker holds a-1 past its first lease end (5) and past its extended one (9) by extending at t=4 and t=8; nobody else claims it meanwhile, b drains, and a-1 is delivered once and acked in its first attempt",
			Run:    extendKeepsLease,
		},
		{
			Name:   "extend-stale-expired",
			Clause: "§7.2, §2.4.1–§2.4.3 (Extend's checks in Settle's order: stale, stale, expired; per item in a batch)",
			Shows:  "an extend of another generation is stale and changes nothing; one at the lease's end is expired and only records the clock mark; after a take-over the old worker's extend is stale, and an extend of an acked event is stale; ExtendBatch answers item by item",
			Run:    extendStaleExpired,
		},
		{
			Name:   "custom-policy",
			Clause: "§7.1 (a queue's policy: recorded at creation, used by claim and settle, changed only with an audited reason)",
			Shows:  "a queue created with lease 30, 5 attempts and backoff 10/20/40 capped at 60 fails a-1 at t=0, 10, 30, 70 and 130 and quarantines it on the fifth; reopening with another explicit policy is refused; SetPolicy with a reason changes the lease to 60 and writes a policy audit row",
			Run:    customPolicy,
		},
		{
			Name:   "jitter-deterministic",
			Clause: "§7.1 (deterministic full jitter: a function of event ID, generation and attempt, within [0, Backoff(k)])",
			Shows:  "with jitter on, the same event ID, generation and attempt give the same delay in two queues and in the policy's own Delay, every delay lies in [0, Backoff(k)], and the delays spread; with jitter off the delay is Backoff(k)",
			Run:    jitterDeterministic,
		},
		{
			Name:   "real-time-skew",
			Clause: "§7.3 (real time: a tick at most the skew below the mark happens at the mark; further below, or further ahead of the clock than the skew, or overflowing, is refused)",
			Shows:  "with a fake wall clock and a skew of 50, an enqueue 40 below the mark is written at the mark, one 60 below is ErrTimeRegression, one 51 ahead of the clock is ErrTimeAhead, one at the clock read in microseconds is ErrTimeAhead, one exactly 50 ahead is admitted; a tick whose lease would overflow is ErrTickOverflow with or without the option; refusals change nothing",
			Run:    realTimeSkew,
		},
		{
			Name:   "bulk-redrive",
			Clause: "§2.5, §7 (bulk redrive: every quarantined head matching a filter, one operator reason, one audit row per event)",
			Shows:  "three flows are quarantined (two for unsupported_delta, one unavailable); the filtered dry runs list them and change nothing; one RedriveAll with one reason redrives all three with three audit rows, and all three are delivered afterwards",
			Run:    bulkRedrive,
		},
	}
}

// extend extends a claim's lease, traced.
func (l *Lab) extend(ctx context.Context, q QueueStore, id string, gen int64, now clock.Tick) (queue.Outcome, error) {
	out, err := q.Extend(ctx, id, gen, now)
	if err != nil {
		l.Trace("t=%d extend %s gen %d -> %s", now, id, gen, errText(err))
		return out, err
	}
	l.Trace("t=%d extend %s gen %d -> %s", now, id, gen, out)
	return out, nil
}

// expectTotals checks receiver totals given as flow, total pairs, in order.
func (l *Lab) expectTotals(ctx context.Context, r ReceiverStore, pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := l.expectTotal(ctx, r, pairs[i].(string), int64(pairs[i+1].(int))); err != nil {
			return err
		}
	}
	return nil
}

// describePolicy is a policy in one line, for traces and checks.
func describePolicy(p queue.Policy) string {
	jitter := "off"
	if p.Jitter {
		jitter = "on"
	}
	return fmt.Sprintf("lease %d, max attempts %d, backoff base %d, cap %d, jitter %s", p.Lease, p.MaxAttempts, p.BackoffBase, p.BackoffCap, jitter)
}

func extendKeepsLease(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 7), Ev("b-1", "b", 1), Ev("b-2", "b", 2)); err != nil {
		return err
	}
	held, _, err := lab.claim(ctx, q, 0)
	if err != nil {
		return err
	}
	lab.Equal("the worker's claim: event, gen, attempt, ticket, lease", []any{held.EventID, held.Generation, held.Attempts, held.Ticket, int64(held.LeaseUntil)}, []any{"a-1", int64(1), 1, int64(1), int64(5)})
	out, err := lab.extend(ctx, q, "a-1", held.Generation, 4)
	if err != nil {
		return err
	}
	lab.Equal("extend at t=4 is extended", out, queue.Extended)
	if err := lab.expectEvent(ctx, q, "lease 4+5=9; gen, attempts, lifetime unchanged", "a-1", "inflight gen 1 attempts 1 lifetime 1 lease 9"); err != nil {
		return err
	}
	st, ok, err := lab.step(ctx, relay, 5)
	if err != nil {
		return err
	}
	lab.Check("at t=5, a-1's first lease end, the next claim is b-1, not a take-over", ok && st.Claim.EventID == "b-1", "claimed %q", st.Claim.EventID)
	out, err = lab.extend(ctx, q, "a-1", held.Generation, 8)
	if err != nil {
		return err
	}
	lab.Equal("extend at t=8 is extended", out, queue.Extended)
	if err := lab.expectEvent(ctx, q, "lease 8+5=13", "a-1", "inflight gen 1 attempts 1 lifetime 1 lease 13"); err != nil {
		return err
	}
	st, ok, err = lab.step(ctx, relay, 9)
	if err != nil {
		return err
	}
	lab.Check("at t=9, the first extension's end, the next claim is b-2, not a take-over", ok && st.Claim.EventID == "b-2", "claimed %q", st.Claim.EventID)
	if err := lab.expectNothing(ctx, relay, 12, "a-1's lease is still live at t=12"); err != nil {
		return err
	}
	done, err := lab.deliver(ctx, relay, held, 12)
	if err != nil {
		return err
	}
	lab.Equal("the worker delivers at t=12: accepted, acked", []string{string(done.Received), string(done.Settled)}, []string{"accepted", "acked"})
	if err := lab.expectEvent(ctx, q, "a-1 acked in its first attempt, generation 1", "a-1", "acked gen 1 attempts 1 lifetime 1"); err != nil {
		return err
	}
	if err := lab.expectServed(ctx, q, "extending spent no claim: a served 1", "a", 1); err != nil {
		return err
	}
	st2, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	lab.Equal("global ticket 3: extends take no ticket", st2.Ticket, int64(3))
	rs, err := relay.Receiver.Snapshot(ctx)
	if err != nil {
		return err
	}
	var receipts []string
	for _, rc := range rs.Receipts {
		receipts = append(receipts, rc.ID)
	}
	lab.Equal("the receiver's receipts: a-1 once, b-1, b-2", receipts, []string{"a-1", "b-1", "b-2"})
	return lab.expectTotal(ctx, relay.Receiver, "a", 7)
}

func extendStaleExpired(ctx context.Context, lab *Lab) error {
	relay, err := lab.relay()
	if err != nil {
		return err
	}
	q := relay.Queue
	if _, err := lab.enqueue(ctx, q, Ev("a-1", "a", 4), 0); err != nil {
		return err
	}
	first, _, err := lab.claim(ctx, q, 0)
	if err != nil {
		return err
	}
	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	out, err := lab.extend(ctx, q, "a-1", first.Generation+1, 0)
	if err != nil {
		return err
	}
	lab.Equal("extend of another generation is stale (check 1)", out, queue.Stale)
	_, err = q.Extend(ctx, "a-9", 1, 0)
	lab.Trace("t=0 extend a-9 gen 1 -> %s", errText(err))
	lab.expectErr("extend of an unknown event is refused", err, queue.ErrNotFound)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("a stale extend at the mark changes nothing", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))

	out, err = lab.extend(ctx, q, "a-1", first.Generation, 5)
	if err != nil {
		return err
	}
	lab.Equal("extend at t=5 = lease_until is expired (check 3)", out, queue.Expired)
	if err := lab.expectEvent(ctx, q, "the expired extend left a-1 as it was", "a-1", "inflight gen 1 attempts 1 lifetime 1 lease 5"); err != nil {
		return err
	}
	_, err = lab.enqueue(ctx, q, Ev("b-1", "b", 1), 4)
	lab.expectErr("the expired extend recorded the clock mark 5", err, queue.ErrTimeRegression)

	second, ok, err := lab.claim(ctx, q, 5)
	if err != nil {
		return err
	}
	lab.Check("take-over at t=5 with generation 2", ok && second.EventID == "a-1" && second.Generation == 2, "claimed %q gen %d", second.EventID, second.Generation)
	out, err = lab.extend(ctx, q, "a-1", first.Generation, 6)
	if err != nil {
		return err
	}
	lab.Equal("the old worker's extend after the take-over is stale", out, queue.Stale)
	if err := lab.expectEvent(ctx, q, "the new worker's lease is untouched", "a-1", "inflight gen 2 attempts 2 lifetime 2 lease 10"); err != nil {
		return err
	}
	if _, err := lab.deliver(ctx, relay, second, 6); err != nil {
		return err
	}
	out, err = lab.extend(ctx, q, "a-1", second.Generation, 7)
	if err != nil {
		return err
	}
	lab.Equal("extend of an acked event is stale (check 2)", out, queue.Stale)

	if _, err := lab.enqueue(ctx, q, Ev("b-1", "b", 1), 7); err != nil {
		return err
	}
	held, _, err := lab.claim(ctx, q, 7)
	if err != nil {
		return err
	}
	items := []queue.ExtendItem{
		{EventID: "b-1", Generation: held.Generation},
		{EventID: "a-1", Generation: second.Generation},
		{EventID: "b-1", Generation: held.Generation + 8},
		{EventID: "zz-1", Generation: 1},
	}
	rs, err := q.ExtendBatch(ctx, items, 8)
	if err != nil {
		return err
	}
	got := make([]string, len(rs))
	for i, r := range rs {
		if r.Err != nil {
			got[i] = items[i].EventID + ": " + errText(r.Err)
		} else {
			got[i] = items[i].EventID + ": " + string(r.Outcome)
		}
	}
	lab.Trace("t=8 extend batch [b-1 gen 1, a-1 gen 2, b-1 gen 9, zz-1 gen 1] -> %s", strings.Join(got, "; "))
	lab.Equal("ExtendBatch answers item by item", got, []string{
		"b-1: extended", "a-1: stale", "b-1: stale", "zz-1: " + errText(queue.ErrNotFound)})
	if err := lab.expectEvent(ctx, q, "b-1's lease is 8+5=13", "b-1", "inflight gen 1 attempts 1 lifetime 1 lease 13"); err != nil {
		return err
	}
	if _, err := lab.deliver(ctx, relay, held, 12); err != nil {
		return err
	}
	if err := lab.expectTotal(ctx, relay.Receiver, "a", 4); err != nil {
		return err
	}
	return lab.expectTotal(ctx, relay.Receiver, "b", 1)
}

func customPolicy(ctx context.Context, lab *Lab) error {
	p := queue.DefaultPolicy()
	p.Lease, p.MaxAttempts, p.BackoffBase, p.BackoffCap = 30, 5, 10, 60
	q, err := lab.Queue(WithPolicy(p))
	if err != nil {
		return err
	}
	lab.Trace("queue created with policy: %s", describePolicy(p))
	r, err := lab.Receiver()
	if err != nil {
		return err
	}
	relay := &Relay{Queue: q, Receiver: r, Unavailable: func(c queue.Claim) bool { return c.Flow == "a" }}
	lab.Trace("the receiver is unavailable for flow a")
	var backoffs []clock.Tick
	for k := 1; k <= 5; k++ {
		backoffs = append(backoffs, p.Backoff(k))
	}
	lab.Equal("Backoff(1..5): 10, 20, 40, then the cap 60", backoffs, []clock.Tick{10, 20, 40, 60, 60})
	got, err := q.Policy(ctx)
	if err != nil {
		return err
	}
	lab.Equal("the recorded policy", describePolicy(got), describePolicy(p))

	_, err = lab.Queue(WithPolicy(queue.DefaultPolicy()))
	lab.Trace("open queue.db with the default policy given explicitly -> %s", errText(err))
	lab.expectErr("opening with another explicit policy is refused", err, queue.ErrPolicyMismatch)
	plain, err := lab.Queue()
	if err != nil {
		return err
	}
	got, err = plain.Policy(ctx)
	if err != nil {
		return err
	}
	lab.Equal("opening with no policy uses the recorded one", describePolicy(got), describePolicy(p))

	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 3), Ev("b-1", "b", 5)); err != nil {
		return err
	}
	st, _, err := lab.step(ctx, relay, 0)
	if err != nil {
		return err
	}
	lab.Equal("claim at t=0: a-1 with lease 0+30", []any{st.Claim.EventID, int64(st.Claim.LeaseUntil)}, []any{"a-1", int64(30)})
	if err := lab.expectEvent(ctx, q, "first failure: retry at 0+10", "a-1", "pending gen 1 attempts 1 lifetime 1 available 10 reason unavailable"); err != nil {
		return err
	}
	held, _, err := lab.claim(ctx, q, 0)
	if err != nil {
		return err
	}
	if _, _, err := lab.step(ctx, relay, 10); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "second failure: retry at 10+20", "a-1", "pending gen 2 attempts 2 lifetime 2 available 30 reason unavailable"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 29, "at t=29 b-1's lease of 30 is live and a-1 backs off"); err != nil {
		return err
	}
	st, ok, err := lab.step(ctx, relay, 30)
	if err != nil {
		return err
	}
	lab.Check("t=30: b-1's lease has run out, b (served 1) is taken over before a (served 2)",
		ok && st.Claim.EventID == "b-1" && st.Claim.Generation == held.Generation+1 && st.Settled == queue.Acked, "%s", st)
	if _, _, err := lab.step(ctx, relay, 30); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "third failure: retry at 30+40", "a-1", "pending gen 3 attempts 3 lifetime 3 available 70 reason unavailable"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 69, "still backing off at t=69"); err != nil {
		return err
	}
	if _, _, err := lab.step(ctx, relay, 70); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "fourth failure: retry at 70+60 (80 capped at 60)", "a-1", "pending gen 4 attempts 4 lifetime 4 available 130 reason unavailable"); err != nil {
		return err
	}
	if err := lab.expectNothing(ctx, relay, 129, "still backing off at t=129"); err != nil {
		return err
	}
	if _, _, err := lab.step(ctx, relay, 130); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "fifth failure: quarantined", "a-1", "quarantined gen 5 attempts 5 lifetime 5 reason unavailable"); err != nil {
		return err
	}

	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	longer := p
	longer.Lease = 60
	err = q.SetPolicy(ctx, longer, "", 130)
	lab.Trace("t=130 set policy (%s) with an empty reason -> %s", describePolicy(longer), errText(err))
	lab.expectErr("a policy change without a reason is refused", err, queue.ErrEmptyReason)
	bad := p
	bad.BackoffCap = 5
	err = q.SetPolicy(ctx, bad, "cap below base", 130)
	lab.Trace("t=130 set policy (%s) -> %s", describePolicy(bad), errText(err))
	lab.expectErr("a policy with its cap below its base is refused", err, queue.ErrInvalid)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("refused policy changes change nothing", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))
	const why = "handlers now take up to 45 s"
	if err := q.SetPolicy(ctx, longer, why, 130); err != nil {
		return err
	}
	lab.Trace("t=130 set policy (%s), reason %q -> ok", describePolicy(longer), why)
	got, err = plain.Policy(ctx)
	if err != nil {
		return err
	}
	lab.Equal("every handle reads the new policy", describePolicy(got), describePolicy(longer))

	relay.Unavailable = nil
	lab.Trace("the receiver is back for flow a")
	const fixed = "receiver back for flow a"
	if err := q.Redrive(ctx, "a-1", 5, fixed, 130); err != nil {
		return err
	}
	lab.Trace("t=130 redrive a-1 gen 5 (%q) -> ok", fixed)
	st, _, err = lab.step(ctx, relay, 130)
	if err != nil {
		return err
	}
	lab.Equal("the next claim uses the new lease: 130+60", []any{st.Claim.EventID, int64(st.Claim.LeaseUntil), string(st.Settled)}, []any{"a-1", int64(190), "acked"})
	audit, err := q.AuditAll(ctx)
	if err != nil {
		return err
	}
	var rows []string
	for _, a := range audit {
		rows = append(rows, fmt.Sprintf("%s at %d: %q", a.Kind, a.At, a.Reason))
	}
	lab.Equal("the audit: the policy change, then the redrive", rows, []string{
		fmt.Sprintf("%s at 130: %q", queue.AuditPolicy, why), fmt.Sprintf("%s at 130: %q", queue.AuditRedrive, fixed)})
	if err := lab.expectTotal(ctx, r, "a", 3); err != nil {
		return err
	}
	return lab.expectTotal(ctx, r, "b", 5)
}

func jitterDeterministic(ctx context.Context, lab *Lab) error {
	p := queue.DefaultPolicy()
	p.Jitter, p.BackoffBase, p.BackoffCap = true, 100, 800
	q, err := lab.Queue(WithPolicy(p))
	if err != nil {
		return err
	}
	lab.Trace("queue.db created with policy: %s", describePolicy(p))
	other, err := lab.OpenQueue("other.db", WithPolicy(p))
	if err != nil {
		return err
	}
	lab.Trace("other.db created with the same policy")
	ids := []string{"a-1", "b-1", "c-1"}
	// Each queue fails every event twice (unavailable, nothing is sent):
	// at t=0, and at t=1000, after every first delay.
	avail := map[string][]int64{}
	for i, s := range []QueueStore{q, other} {
		file := []string{"queue.db", "other.db"}[i]
		for _, id := range ids {
			if _, err := s.Enqueue(ctx, Ev(id, id[:1], 1), 0); err != nil {
				return err
			}
		}
		for _, now := range []clock.Tick{0, 1000} {
			cs, err := s.ClaimBatch(ctx, now, len(ids))
			if err != nil {
				return err
			}
			if len(cs) != len(ids) {
				return fmt.Errorf("claim at t=%d: %d claims, want %d", now, len(cs), len(ids))
			}
			for _, c := range cs {
				out, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{Reason: Unavailable}, now)
				if err != nil {
					return err
				}
				e, err := s.Event(ctx, c.EventID)
				if err != nil {
					return err
				}
				want := now + p.Delay(c.EventID, c.Generation, c.Attempts)
				lab.Check(fmt.Sprintf("%s: %s attempt %d (gen %d) failed at t=%d: available at now + Delay", file, c.EventID, c.Attempts, c.Generation, now),
					out == queue.RetryScheduled && e.AvailableAt == want && e.AvailableAt-now <= p.Backoff(c.Attempts),
					"%s, available %d, want %d (Backoff(%d) = %d)", out, e.AvailableAt, want, c.Attempts, p.Backoff(c.Attempts))
				avail[c.EventID] = append(avail[c.EventID], int64(e.AvailableAt))
			}
		}
	}
	lab.Trace("available ticks, queue.db then other.db: a-1 %v, b-1 %v, c-1 %v", avail["a-1"], avail["b-1"], avail["c-1"])
	same := true
	var seen []string
	for _, id := range ids {
		a := avail[id]
		same = same && len(a) == 4 && a[0] == a[2] && a[1] == a[3]
		seen = append(seen, fmt.Sprintf("%s %v", id, a))
	}
	lab.Check("the same ID, generation and attempt give the same delay in both queues", same, "%s", strings.Join(seen, ", "))

	// The policy's own Delay, over many IDs.
	var (
		outside, again, differ int
		distinct               = map[clock.Tick]bool{}
		lo, hi                 = clock.Tick(math.MaxInt64), clock.Tick(0)
	)
	for n := range 1000 {
		id := fmt.Sprintf("e-%04d", n)
		for k := 1; k <= 3; k++ {
			d := p.Delay(id, int64(k), k)
			if d != p.Delay(id, int64(k), k) {
				again++
			}
			if d < 0 || d > p.Backoff(k) {
				outside++
			}
			if d != p.Delay(id, int64(k)+1, k) {
				differ++
			}
			if k == 3 {
				distinct[d] = true
				lo, hi = min(lo, d), max(hi, d)
			}
		}
	}
	lab.Equal("Delay twice with the same arguments: no difference in 3000 calls", again, 0)
	lab.Equal("delays outside [0, Backoff(k)] in 3000", outside, 0)
	lab.Check("attempt 3 (Backoff 400) over 1000 IDs spreads over the range", len(distinct) > 100 && lo < 40 && hi > 360,
		"%d distinct delays, from %d to %d", len(distinct), lo, hi)
	lab.Check("another generation changes the delay for most IDs", differ > 2000, "%d of 3000 differ", differ)
	off := queue.DefaultPolicy()
	plain := 0
	for n := range 1000 {
		for k := 1; k <= 3; k++ {
			if off.Delay(fmt.Sprintf("e-%04d", n), 1, k) == off.Backoff(k) {
				plain++
			}
		}
	}
	lab.Equal("jitter off: Delay is Backoff(k) in all 3000", plain, 3000)
	return nil
}

func realTimeSkew(ctx context.Context, lab *Lab) error {
	src := clock.NewManual(1_000_000)
	q, err := lab.Queue(WithRealTime(src, 50))
	if err != nil {
		return err
	}
	lab.Trace("queue.db opened in real time: a fake wall clock at %d, skew 50", src.Now())
	r, err := lab.Receiver()
	if err != nil {
		return err
	}
	relay := &Relay{Queue: q, Receiver: r}
	if err := lab.enqueueAll(ctx, q, src.Now(), Ev("a-1", "a", 1), Ev("b-1", "b", 2)); err != nil {
		return err
	}
	lab.Trace("the clock moves to %d", src.Advance(100))
	if _, _, err := lab.step(ctx, relay, src.Now()); err != nil {
		return err
	}
	if _, err := lab.enqueue(ctx, q, Ev("a-2", "a", 3), 1_000_060); err != nil {
		return err
	}
	if err := lab.expectEvent(ctx, q, "an enqueue 40 below the mark 1000100 is written at the mark", "a-2", "pending gen 0 attempts 0 lifetime 0 available 1000100"); err != nil {
		return err
	}
	held, _, err := lab.claim(ctx, q, 1_000_070)
	if err != nil {
		return err
	}
	lab.Equal("a claim 30 below the mark leases from the mark: 1000100+5", []any{held.EventID, int64(held.LeaseUntil)}, []any{"b-1", int64(1_000_105)})

	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	_, err = lab.enqueue(ctx, q, Ev("a-3", "a", 4), 1_000_040)
	lab.expectErr("an enqueue 60 below the mark is refused", err, queue.ErrTimeRegression)
	_, err = lab.enqueue(ctx, q, Ev("a-3", "a", 4), 1_000_151)
	lab.expectErr("an enqueue 51 ahead of the clock is refused", err, queue.ErrTimeAhead)
	_, _, err = lab.claim(ctx, q, 1_000_100_000)
	lab.expectErr("a claim at the clock read in microseconds is refused as ahead of the clock", err, queue.ErrTimeAhead)
	_, _, err = lab.claim(ctx, q, math.MaxInt64-2)
	lab.expectErr("a claim whose lease would overflow is refused first", err, queue.ErrTickOverflow)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("refused ticks change nothing, not even the clock mark", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))

	if _, err := lab.deliver(ctx, relay, held, src.Now()); err != nil {
		return err
	}
	if _, err := lab.enqueue(ctx, q, Ev("a-3", "a", 4), 1_000_150); err != nil {
		return err
	}
	st, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	lab.Equal("an enqueue exactly 50 ahead of the clock is admitted and moves the mark", int64(st.ClockMark), int64(1_000_150))
	lab.Trace("the clock moves to %d", src.Advance(100))
	for range 2 {
		if _, _, err := lab.step(ctx, relay, src.Now()); err != nil {
			return err
		}
	}

	plain, err := lab.Queue()
	if err != nil {
		return err
	}
	lab.Trace("queue.db opened a second time without the real-time option")
	if _, err := lab.enqueue(ctx, plain, Ev("c-1", "c", 5), src.Now()); err != nil {
		return err
	}
	_, _, err = lab.claim(ctx, plain, math.MaxInt64-2)
	lab.expectErr("without the option too, a claim whose lease would overflow is refused", err, queue.ErrTickOverflow)
	c, _, err := lab.claim(ctx, plain, src.Now())
	if err != nil {
		return err
	}
	lab.Check("the refused claim left c-1 to the next claim at the clock", c.EventID == "c-1" && c.Ticket == 5, "claimed %q ticket %d", c.EventID, c.Ticket)
	if _, err := lab.deliver(ctx, relay, c, src.Now()); err != nil {
		return err
	}
	return lab.expectTotals(ctx, r, "a", 8, "b", 2, "c", 5)
}

func bulkRedrive(ctx context.Context, lab *Lab) error {
	q, err := lab.Queue()
	if err != nil {
		return err
	}
	r, err := lab.Receiver(WithMaxDelta(100))
	if err != nil {
		return err
	}
	lab.Trace("receiver opened with MaxDelta 100; the receiver is unavailable for flow c")
	relay := &Relay{Queue: q, Receiver: r, Unavailable: func(c queue.Claim) bool { return c.Flow == "c" }}
	if err := lab.enqueueAll(ctx, q, 0, Ev("a-1", "a", 500), Ev("a-2", "a", 1), Ev("b-1", "b", 700),
		Ev("c-1", "c", 3), Ev("c-2", "c", 4), Ev("d-1", "d", 5)); err != nil {
		return err
	}
	for _, now := range []clock.Tick{0, 2, 6} {
		for {
			_, ok, err := lab.step(ctx, relay, now)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
		}
	}
	matching := func(f queue.RedriveFilter) ([]string, error) {
		qs, err := q.QuarantinedMatching(ctx, f)
		if err != nil {
			return nil, err
		}
		out := []string{}
		for _, e := range qs {
			out = append(out, fmt.Sprintf("%s gen %d %s", e.EventID, e.Generation, e.Reason))
		}
		lab.Trace("dry run (flow %q, reason %q) -> %v", f.Flow, f.Reason, out)
		return out, nil
	}
	before, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		f    queue.RedriveFilter
		want []string
	}{
		{"dry run, no filter: the three quarantined heads", queue.RedriveFilter{},
			[]string{"a-1 gen 3 unsupported_delta", "b-1 gen 3 unsupported_delta", "c-1 gen 3 unavailable"}},
		{"dry run, reason unsupported_delta", queue.RedriveFilter{Reason: "unsupported_delta"},
			[]string{"a-1 gen 3 unsupported_delta", "b-1 gen 3 unsupported_delta"}},
		{"dry run, flow c", queue.RedriveFilter{Flow: "c"}, []string{"c-1 gen 3 unavailable"}},
		{"dry run, flow c and reason unsupported_delta: none", queue.RedriveFilter{Flow: "c", Reason: "unsupported_delta"}, []string{}},
	} {
		got, err := matching(c.f)
		if err != nil {
			return err
		}
		lab.Equal(c.name, got, c.want)
	}
	_, err = q.RedriveAll(ctx, queue.RedriveFilter{}, "", 7)
	lab.Trace("t=7 redrive all with an empty reason -> %s", errText(err))
	lab.expectErr("a bulk redrive without a reason is refused", err, queue.ErrEmptyReason)
	after, err := queueJSON(ctx, q)
	if err != nil {
		return err
	}
	lab.Check("dry runs and the refused redrive change nothing", bytes.Equal(before, after), "queue snapshot byte-identical: %v", bytes.Equal(before, after))

	if err := r.Close(); err != nil {
		return err
	}
	if r, err = lab.Receiver(); err != nil {
		return err
	}
	relay.Receiver, relay.Unavailable = r, nil
	lab.Trace("receiver reopened with MaxDelta 1000 and available for every flow")
	const reason = "MaxDelta raised to 1000; flow c's endpoint is back"
	done, err := q.RedriveAll(ctx, queue.RedriveFilter{}, reason, 10)
	if err != nil {
		return err
	}
	var got []string
	for _, d := range done {
		got = append(got, fmt.Sprintf("%s (%s#%d) gen %d", d.EventID, d.Flow, d.Seq, d.Generation))
	}
	lab.Trace("t=10 redrive all (%q) -> %v", reason, got)
	lab.Equal("one call redrives the three heads, each to a new generation", got, []string{"a-1 (a#1) gen 4", "b-1 (b#1) gen 4", "c-1 (c#1) gen 4"})
	audit, err := q.AuditAll(ctx)
	if err != nil {
		return err
	}
	var rows []string
	for _, a := range audit {
		rows = append(rows, fmt.Sprintf("%s %s gen %d at %d: %q", a.Kind, a.EventID, a.Generation, a.At, a.Reason))
	}
	lab.Equal("three audit rows, one per event, with the one reason", rows, []string{
		fmt.Sprintf("%s a-1 gen 4 at 10: %q", queue.AuditRedrive, reason),
		fmt.Sprintf("%s b-1 gen 4 at 10: %q", queue.AuditRedrive, reason),
		fmt.Sprintf("%s c-1 gen 4 at 10: %q", queue.AuditRedrive, reason),
	})
	n := 0
	for {
		_, ok, err := lab.step(ctx, relay, 10)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		n++
	}
	lab.Equal("all five waiting events are delivered afterwards", n, 5)
	again, err := q.RedriveAll(ctx, queue.RedriveFilter{}, reason, 10)
	if err != nil {
		return err
	}
	lab.Trace("t=10 redrive all again -> %d redriven", len(again))
	lab.Equal("a second bulk redrive finds nothing to redrive", len(again), 0)
	return lab.expectTotals(ctx, r, "a", 501, "b", 700, "c", 7, "d", 5)
}
