package conformance

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// The clauses of docs/contract.md §7.8 that the stores keep: retry
// schedules, retry-after, permanent failures, error text, attempt history
// and OldestWaiting.

// failAt claims the only ready head at now and fails it with r; it returns
// the claim and the outcome.
func failAt(t testing.TB, s Queue, r queue.Result, now clock.Tick) (queue.Claim, queue.Outcome) {
	t.Helper()
	c := mustClaim(t, s, now)
	return c, settle(t, s, c.EventID, c.Generation, r, now)
}

// wantReadyAt fails t unless the only flow's head can be claimed at at and
// not one tick before (the claim at at is settled with success).
func wantReadyAt(t testing.TB, s Queue, id string, at clock.Tick) {
	t.Helper()
	if e := event(t, s, id); e.State != queue.StatePending || e.AvailableAt != at {
		t.Fatalf("event %s = %s, want pending, available at %d", id, jsonOf(e), at)
	}
	if c, ok := claim(t, s, at-1); ok {
		t.Fatalf("Claim(%d) = %s, want nothing before %d", at-1, jsonOf(c), at)
	}
}

// wantHistory fails t unless Event(id).History is want (oldest first).
func wantHistory(t testing.TB, s Queue, id string, want []queue.Attempt) {
	t.Helper()
	got := event(t, s, id).History
	if jsonOf(got) != jsonOf(want) {
		t.Fatalf("Event(%s).History = %s\nwant %s", id, jsonOf(got), jsonOf(want))
	}
}

// docs/contract.md §7.8: with a schedule, the wait after the k-th failed
// attempt is Schedule[k-1], MaxAttempts is the waits plus one, and the
// failure after the last wait quarantines; each failure is one history row.
func queueFailure_7_8_ScheduleWaitsAndMaxAttempts(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	p := queue.DefaultPolicy().WithSchedule(3, 7, 20)
	if p.MaxAttempts != 4 {
		t.Fatalf("WithSchedule(3 waits).MaxAttempts = %d, want 4", p.MaxAttempts)
	}
	s := bk.openPolicy(t, p)
	enqueue(t, s, "a1", "a", "x", 0)
	now := clock.Tick(10)
	var want []queue.Attempt
	for k, wait := range p.Schedule {
		c, o := failAt(t, s, failure("unavailable"), now)
		if o != queue.RetryScheduled || c.Attempts != k+1 {
			t.Fatalf("attempt %d: outcome %q, claim attempts %d; want retry_scheduled", k+1, o, c.Attempts)
		}
		want = append(want, queue.Attempt{At: now, Generation: c.Generation, Attempt: k + 1, Outcome: queue.RetryScheduled, Reason: "unavailable"})
		wantReadyAt(t, s, "a1", now+wait)
		now += wait
	}
	c, o := failAt(t, s, failure("unavailable"), now)
	if o != queue.Quarantined || c.Attempts != 4 {
		t.Fatalf("attempt 4: outcome %q (attempts %d), want quarantined", o, c.Attempts)
	}
	want = append(want, queue.Attempt{At: now, Generation: c.Generation, Attempt: 4, Outcome: queue.Quarantined, Reason: "unavailable"})
	wantHistory(t, s, "a1", want)
	if e := event(t, s, "a1"); e.State != queue.StateQuarantined || e.Reason != "unavailable" {
		t.Fatalf("after the last wait: %s, want quarantined", jsonOf(e))
	}
}

// docs/contract.md §7.8, §7.1: jitter applies to each wait of a schedule:
// the wait is Policy.Delay, in [0, Schedule[k-1]].
func queueFailure_7_8_ScheduleJitter(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	p := queue.DefaultPolicy().WithSchedule(50, 900)
	p.Jitter = true
	s := bk.openPolicy(t, p)
	now := clock.Tick(0)
	differs := false
	for i := range 8 {
		id := "e" + itoa(i)
		enqueue(t, s, id, "f"+itoa(i), "x", now)
		for k := 1; k <= 2; k++ {
			c, o := failAt(t, s, failure("unavailable"), now)
			if c.EventID != id || o != queue.RetryScheduled {
				t.Fatalf("%s attempt %d: claim %s outcome %q", id, k, c.EventID, o)
			}
			d := p.Delay(id, c.Generation, k)
			if d < 0 || d > p.Schedule[k-1] {
				t.Fatalf("Delay(%s, %d, %d) = %d outside [0, %d]", id, c.Generation, k, d, p.Schedule[k-1])
			}
			differs = differs || d != p.Schedule[k-1]
			if e := event(t, s, id); e.AvailableAt != now+d {
				t.Fatalf("%s after attempt %d: available at %d, want %d + Delay %d", id, k, e.AvailableAt, now, d)
			}
			now += d
		}
		c, o := failAt(t, s, failure("unavailable"), now)
		if c.EventID != id || o != queue.Quarantined {
			t.Fatalf("%s attempt 3: claim %s outcome %q, want quarantined", id, c.EventID, o)
		}
	}
	if !differs {
		t.Fatal("no jittered wait differed from its schedule entry: the clause proves nothing")
	}
}

// docs/contract.md §7.8, §7.1: a schedule and a retry-after cap are recorded
// with the policy: reopening with no policy keeps them, with another one
// (another schedule, another cap) is ErrPolicyMismatch; a bad schedule is
// ErrInvalid at Open and at SetPolicy (nothing changes); SetPolicy with a
// schedule is audited with it, and a policy that never had one writes the
// audit bytes it always did.
func queueFailure_7_8_SchedulePersisted(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	p := queue.DefaultPolicy().WithSchedule(5, 30, 120)
	p.RetryAfterCap = 60
	s, loc := bk.openTest(t, withPolicy(p))
	got, err := s.Policy(ctx)
	if err != nil || !got.Equal(p) {
		t.Fatalf("Policy() = %+v, %v; want %+v", got, err, p)
	}
	again, err := bk.openAt(t, loc)
	if err != nil {
		t.Fatalf("reopen without a policy: %v", err)
	}
	if got, err := again.Policy(ctx); err != nil || !got.Equal(p) {
		t.Fatalf("reopened Policy() = %+v, %v; want %+v", got, err, p)
	}
	if _, err := bk.openAt(t, loc, withPolicy(p)); err != nil {
		t.Fatalf("reopen with the same policy: %v", err)
	}
	before := snap(t, s)
	if before.Policy == nil || !before.Policy.Equal(p) {
		t.Fatalf("Snapshot().Policy = %+v, want %+v", before.Policy, p)
	}
	otherSched := p.WithSchedule(5, 30, 121)
	otherCap := p
	otherCap.RetryAfterCap = 61
	noSched := p.WithSchedule()
	for name, o := range map[string]queue.Policy{"another schedule": otherSched, "another cap": otherCap, "no schedule": noSched} {
		_, err := bk.openAt(t, loc, withPolicy(o))
		wantErr(t, "Open("+name+")", err, queue.ErrPolicyMismatch)
	}
	bad := map[string]queue.Policy{}
	b := p
	b.MaxAttempts = 3 // 3 waits want 4
	bad["MaxAttempts not waits+1"] = b
	b = p.WithSchedule(5, 0)
	bad["a zero wait"] = b
	b = p
	b.RetryAfterCap = -1
	bad["a negative cap"] = b
	for name, o := range bad {
		_, err := bk.openAt(t, bk.newLoc(t), withPolicy(o))
		wantErr(t, "Open("+name+")", err, queue.ErrInvalid)
		wantErr(t, "SetPolicy("+name+")", s.SetPolicy(ctx, o, "r", 1), queue.ErrInvalid)
	}
	assertUnchanged(t, "refused SetPolicy", before, snap(t, s))

	// SetPolicy with a schedule: audited with it, and used at once.
	q := queue.DefaultPolicy().WithSchedule(9, 99)
	if err := s.SetPolicy(ctx, q, "ride out a bad day", 2); err != nil {
		t.Fatalf("SetPolicy(schedule) error = %v", err)
	}
	all, err := s.AuditAll(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("AuditAll() = %s, %v", jsonOf(all), err)
	}
	var ch queue.PolicyChange
	if err := json.Unmarshal([]byte(all[0].Detail), &ch); err != nil || !ch.Old.Equal(p) || !ch.New.Equal(q) {
		t.Fatalf("policy audit detail %s (%v), want old %+v new %+v", all[0].Detail, err, p, q)
	}
	if !strings.Contains(all[0].Detail, `"schedule":[9,99]`) || !strings.Contains(all[0].Detail, `"retry_after_cap":60`) {
		t.Fatalf("policy audit detail %s does not carry the schedule and the cap", all[0].Detail)
	}
	if got, err := s.Policy(ctx); err != nil || !got.Equal(q) {
		t.Fatalf("Policy() after SetPolicy = %+v, %v; want %+v", got, err, q)
	}
	enqueue(t, s, "a1", "a", "x", 3)
	if _, o := failAt(t, s, failure("unavailable"), 3); o != queue.RetryScheduled {
		t.Fatalf("outcome %q, want retry_scheduled", o)
	}
	wantReadyAt(t, s, "a1", 3+9)

	// A queue that never had a schedule audits the bytes it always did.
	d, _ := bk.openTest(t)
	r := queue.DefaultPolicy()
	r.Lease = 7
	if err := d.SetPolicy(ctx, r, "longer lease", 1); err != nil {
		t.Fatal(err)
	}
	all, err = d.AuditAll(ctx)
	const wantDetail = `{"old":{"lease":5,"max_attempts":3,"backoff_base":2,"backoff_cap":8,"jitter":false,"fairness":"min_served"},` +
		`"new":{"lease":7,"max_attempts":3,"backoff_base":2,"backoff_cap":8,"jitter":false,"fairness":"min_served"}}`
	if err != nil || len(all) != 1 || all[0].Detail != wantDetail {
		t.Fatalf("AuditAll() = %s, %v; want detail %s", jsonOf(all), err, wantDetail)
	}
}

// docs/contract.md §7.8: a failure's retry-after sets the wait to
// max(Delay, min(RetryAfter, RetryAfterLimit)): below the delay it changes
// nothing, above it it wins, and it is capped by RetryAfterCap, or by the
// policy's longest wait when the cap is 0.
func queueFailure_7_8_RetryAfter(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	p := queue.DefaultPolicy()
	p.MaxAttempts = 5 // backoffs 2, 4, 8, 8; the default limit is BackoffCap 8
	s := bk.openPolicy(t, p)
	enqueue(t, s, "a1", "a", "x", 0)
	now := clock.Tick(0)
	for _, tc := range []struct {
		retryAfter, wait clock.Tick
	}{
		{1, 2},   // below Backoff(1) = 2
		{6, 6},   // above Backoff(2) = 4
		{100, 8}, // capped by the default limit, LongestWait = 8
		{0, 8},   // none: Backoff(4) = 8
	} {
		r := queue.Result{Reason: "unavailable", RetryAfter: tc.retryAfter}
		if _, o := failAt(t, s, r, now); o != queue.RetryScheduled {
			t.Fatalf("retry-after %d: outcome %q", tc.retryAfter, o)
		}
		wantReadyAt(t, s, "a1", now+tc.wait)
		now += tc.wait
	}
	// On the round's last attempt the failure quarantines: the retry-after
	// is ignored.
	if _, o := failAt(t, s, queue.Result{Reason: "unavailable", RetryAfter: 3}, now); o != queue.Quarantined {
		t.Fatalf("last attempt with retry-after: outcome %q, want quarantined", o)
	}

	// With RetryAfterCap: capped by it, not by the longest wait; a
	// schedule's longest wait is the default limit.
	c := queue.DefaultPolicy()
	c.RetryAfterCap = 50
	s2 := bk.openPolicy(t, c)
	enqueue(t, s2, "b1", "b", "x", 0)
	if _, o := failAt(t, s2, queue.Result{Reason: "unavailable", RetryAfter: 500}, 0); o != queue.RetryScheduled {
		t.Fatalf("outcome %q", o)
	}
	wantReadyAt(t, s2, "b1", 50)
	if _, o := failAt(t, s2, queue.Result{Reason: "unavailable", RetryAfter: 30}, 50); o != queue.RetryScheduled {
		t.Fatalf("outcome %q", o)
	}
	wantReadyAt(t, s2, "b1", 80)

	sc := queue.DefaultPolicy().WithSchedule(10, 40)
	s3 := bk.openPolicy(t, sc)
	enqueue(t, s3, "c1", "c", "x", 0)
	if _, o := failAt(t, s3, queue.Result{Reason: "unavailable", RetryAfter: 1000}, 0); o != queue.RetryScheduled {
		t.Fatalf("outcome %q", o)
	}
	wantReadyAt(t, s3, "c1", 40)
}

// docs/contract.md §7.8: a permanent failure quarantines at once, on the
// round's first attempt, keeping its reason, with one history row; it
// blocks its flow as any quarantine, and a redrive starts a new round.
func queueFailure_7_8_PermanentQuarantinesAtOnce(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 1)
	enqueue(t, s, "a2", "a", "y", 1)
	r := queue.Result{Reason: "invalid_body", Permanent: true, RetryAfter: 5, Error: "delta_out_of_range: 1000000"}
	c, o := failAt(t, s, r, 2)
	if o != queue.Quarantined {
		t.Fatalf("permanent failure on attempt 1: outcome %q, want quarantined", o)
	}
	e := event(t, s, "a1")
	if e.State != queue.StateQuarantined || e.Reason != "invalid_body" || e.Attempts != 1 || e.Error != r.Error {
		t.Fatalf("after a permanent failure: %s", jsonOf(e))
	}
	wantHistory(t, s, "a1", []queue.Attempt{{At: 2, Generation: c.Generation, Attempt: 1, Outcome: queue.Quarantined, Reason: "invalid_body", Error: r.Error}})
	if c, ok := claim(t, s, 100); ok {
		t.Fatalf("Claim() = %s; the quarantined head must block its flow", jsonOf(c))
	}
	if err := s.Redrive(ctx, "a1", e.Generation, "fixed the receiver", 100); err != nil {
		t.Fatal(err)
	}
	if c := mustClaim(t, s, 100); c.EventID != "a1" || c.Attempts != 1 {
		t.Fatalf("claim after redrive = %s", jsonOf(c))
	}
	// Permanent on the last attempt is a quarantine too (as without it).
	s2, _ := bk.openTest(t)
	enqueue(t, s2, "b1", "b", "x", 0)
	now := clock.Tick(0)
	for k := 1; k < queue.MaxAttempts; k++ {
		failAt(t, s2, failure("unavailable"), now)
		now += queue.Backoff(k)
	}
	if _, o := failAt(t, s2, queue.Result{Reason: "gone", Permanent: true}, now); o != queue.Quarantined {
		t.Fatalf("permanent on the last attempt: %q", o)
	}
	if e := event(t, s2, "b1"); e.Reason != "gone" {
		t.Fatalf("reason %q, want gone", e.Reason)
	}
}

// docs/contract.md §7.8: a failure's error text is recorded with it; an
// invalid one (too long, not UTF-8, not printable) or a negative
// retry-after is ErrInvalid and changes nothing (in a batch: that item's
// error, the other items settled); whatever queue.ErrorText makes is
// accepted and kept byte for byte.
func queueFailure_7_8_ErrorText(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "b1", "b", "x", 0)
	ca := mustClaim(t, s, 1)
	cb := mustClaim(t, s, 1)
	before := snap(t, s)
	for name, r := range map[string]queue.Result{
		"too long":            {Reason: "unavailable", Error: strings.Repeat("x", queue.MaxErrorLen+1)},
		"not UTF-8":           {Reason: "unavailable", Error: "bad \xff byte"},
		"a newline":           {Reason: "unavailable", Error: "line one\nline two"},
		"a control character": {Reason: "unavailable", Error: "bell\a"},
		"negative retry":      {Reason: "unavailable", RetryAfter: -1},
	} {
		_, err := s.Settle(ctx, ca.EventID, ca.Generation, r, 2)
		wantErr(t, "Settle(error text "+name+")", err, queue.ErrInvalid)
		assertUnchanged(t, "Settle("+name+")", before, snap(t, s))
	}
	long := queue.ErrorText("dial tcp 127.0.0.1:9: connect:\tconnection refused\r\n" + strings.Repeat("é", 400) + "\x00")
	if err := queue.CheckErrorText(long); err != nil || len(long) > queue.MaxErrorLen {
		t.Fatalf("ErrorText made %q (%d bytes), refused: %v", long, len(long), err)
	}
	rs, err := s.SettleBatch(ctx, []queue.SettleItem{
		{EventID: ca.EventID, Generation: ca.Generation, Result: queue.Result{Reason: "unavailable", Error: "x\x1b[31m"}},
		{EventID: cb.EventID, Generation: cb.Generation, Result: queue.Result{Reason: "unavailable", Error: long}},
	}, 2)
	if err != nil || len(rs) != 2 {
		t.Fatalf("SettleBatch() = %v, %v", rs, err)
	}
	wantErr(t, "SettleBatch item with a bad error text", rs[0].Err, queue.ErrInvalid)
	if rs[1].Err != nil || rs[1].Outcome != queue.RetryScheduled {
		t.Fatalf("SettleBatch item 2 = %+v, want retry_scheduled", rs[1])
	}
	if e := event(t, s, "a1"); e.State != queue.StateInflight || e.History != nil || e.Error != "" {
		t.Fatalf("a1 after its refused item: %s, want in flight, no history", jsonOf(e))
	}
	e := event(t, s, "b1")
	if e.Error != long || len(e.History) != 1 || e.History[0].Error != long {
		t.Fatalf("b1 = %s, want error %q recorded", jsonOf(e), long)
	}
	if o := settle(t, s, ca.EventID, ca.Generation, queue.Result{Reason: "conflict", Error: "409 conflict: seq 4 applied with another body"}, 3); o != queue.RetryScheduled {
		t.Fatalf("outcome %q", o)
	}
	if e := event(t, s, "a1"); e.Error != "409 conflict: seq 4 applied with another body" {
		t.Fatalf("a1.Error = %q", e.Error)
	}
}

// docs/contract.md §7.8: the history lists an event's failed attempts
// oldest first, one per generation, at most queue.MaxHistory (the oldest
// dropped); a redrive keeps it (and writes its audit row as §2.5 says); the
// event's Error is the error of the row at its current generation, so ""
// once it is redriven or in flight again; Snapshot.Failures lists every
// row, by event ID then generation. Stale and expired settles write none.
func queueFailure_7_8_HistoryBoundedAndKeptAcrossRedrive(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "b1", "b", "x", 0)
	now := clock.Tick(0)
	var all []queue.Attempt
	for round := 1; round <= 4; round++ {
		for k := 1; k <= queue.MaxAttempts; k++ {
			c := mustClaim(t, s, now)
			msg := "round " + itoa(round) + " attempt " + itoa(k)
			o := settle(t, s, c.EventID, c.Generation, queue.Result{Reason: "unavailable", Error: msg}, now)
			out := queue.RetryScheduled
			if k == queue.MaxAttempts {
				out = queue.Quarantined
			}
			if o != out {
				t.Fatalf("%s: outcome %q, want %q", msg, o, out)
			}
			all = append(all, queue.Attempt{At: now, Generation: c.Generation, Attempt: k, Outcome: out, Reason: "unavailable", Error: msg})
			// A stale and an expired settle write no row.
			if o := settle(t, s, c.EventID, c.Generation, failure("late"), now); o != queue.Stale {
				t.Fatalf("repeat settle = %q, want stale", o)
			}
			if k < queue.MaxAttempts {
				now += queue.Backoff(k)
			}
		}
		e := event(t, s, "b1")
		if e.Error != all[len(all)-1].Error {
			t.Fatalf("quarantined b1.Error = %q, want %q", e.Error, all[len(all)-1].Error)
		}
		wantHistory(t, s, "b1", all[max(0, len(all)-queue.MaxHistory):])
		now++
		if err := s.Redrive(ctx, "b1", e.Generation, "try again", now); err != nil {
			t.Fatal(err)
		}
		if e := event(t, s, "b1"); e.Error != "" || len(e.History) != min(len(all), queue.MaxHistory) {
			t.Fatalf("redriven b1 = %s, want its history kept and no current error", jsonOf(e))
		}
	}
	if len(all) != 12 {
		t.Fatalf("%d failures, want 12", len(all))
	}
	c := mustClaim(t, s, now)
	if e := event(t, s, "b1"); e.Error != "" || e.State != queue.StateInflight {
		t.Fatalf("b1 in flight = %s, want no current error", jsonOf(e))
	}
	if o := settle(t, s, c.EventID, c.Generation, failure("late"), c.LeaseUntil); o != queue.Expired {
		t.Fatalf("settle after the lease = %q, want expired", o)
	}
	wantHistory(t, s, "b1", all[2:])
	now = c.LeaseUntil
	audit, err := s.Audit(ctx)
	if err != nil || len(audit) != 4 || audit[3].Reason != "try again" {
		t.Fatalf("Audit() = %s, %v; want the four redrives", jsonOf(audit), err)
	}
	// Snapshot.Failures: by event ID, then generation.
	enqueue(t, s, "0", "z", "x", now)
	cz := mustClaim(t, s, now)
	settle(t, s, cz.EventID, cz.Generation, queue.Result{Reason: "gap", Error: "want seq 1"}, now)
	var want []queue.SnapshotAttempt
	want = append(want, queue.SnapshotAttempt{EventID: "0", Attempt: queue.Attempt{At: now, Generation: 1, Attempt: 1, Outcome: queue.RetryScheduled, Reason: "gap", Error: "want seq 1"}})
	for _, a := range all[2:] {
		want = append(want, queue.SnapshotAttempt{EventID: "b1", Attempt: a})
	}
	if got := snap(t, s).Failures; jsonOf(got) != jsonOf(want) {
		t.Fatalf("Snapshot().Failures = %s\nwant %s", jsonOf(got), jsonOf(want))
	}
	// A queue that never failed has no failures key at all.
	d, _ := bk.openTest(t)
	enqueue(t, d, "a1", "a", "x", 0)
	ok := mustClaim(t, d, 0)
	settle(t, d, ok.EventID, ok.Generation, success, 0)
	b, _ := json.Marshal(snap(t, d))
	if strings.Contains(string(b), "failures") {
		t.Fatalf("snapshot of a queue that never failed: %s", b)
	}
	if e := event(t, d, "a1"); e.History != nil || e.Error != "" {
		t.Fatalf("acked a1 = %s, want no history", jsonOf(e))
	}
}

// docs/contract.md §7.8, §2.3: the claim that quarantines a take-over on
// the round's last attempt writes one history row: outcome quarantined,
// reason lease_expired, no error text, the event's generation and
// attempt, at the claim's tick. Take-overs before it write none.
func queueFailure_7_8_LeaseExpiredRow(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	now := clock.Tick(0)
	var last queue.Claim
	for k := 1; k <= queue.MaxAttempts; k++ {
		last = mustClaim(t, s, now) // never settled: each lease runs out
		now = last.LeaseUntil
	}
	wantHistory(t, s, "a1", nil)
	now += 2
	if c, ok := claim(t, s, now); ok {
		t.Fatalf("Claim() = %s, want the used-up take-over quarantined", jsonOf(c))
	}
	want := queue.Attempt{At: now, Generation: last.Generation, Attempt: queue.MaxAttempts, Outcome: queue.Quarantined, Reason: queue.ReasonLeaseExpired}
	wantHistory(t, s, "a1", []queue.Attempt{want})
	e := event(t, s, "a1")
	if e.Error != "" || e.Reason != queue.ReasonLeaseExpired || e.Generation != last.Generation {
		t.Fatalf("a1 = %s", jsonOf(e))
	}
	// Through ClaimBatch too.
	enqueue(t, s, "b1", "b", "x", now)
	now2 := now
	var lb queue.Claim
	for k := 1; k <= queue.MaxAttempts; k++ {
		cs, err := s.ClaimBatch(ctx, now2, 4)
		if err != nil || len(cs) != 1 {
			t.Fatalf("ClaimBatch() = %s, %v", jsonOf(cs), err)
		}
		lb = cs[0]
		now2 = lb.LeaseUntil
	}
	if cs, err := s.ClaimBatch(ctx, now2, 4); err != nil || len(cs) != 0 {
		t.Fatalf("ClaimBatch() = %s, %v; want none", jsonOf(cs), err)
	}
	wantHistory(t, s, "b1", []queue.Attempt{{At: now2, Generation: lb.Generation, Attempt: queue.MaxAttempts, Outcome: queue.Quarantined, Reason: queue.ReasonLeaseExpired}})
}

// docs/contract.md §7.8: Quarantined, QuarantinedMatching and the Pager's
// QuarantinedPage give each event the error text of the failure that
// quarantined it ("" for none, and for lease_expired).
func queueFailure_7_8_QuarantinedError(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	enqueue(t, s, "b1", "b", "x", 0)
	enqueue(t, s, "c1", "c", "x", 0)
	ca := mustClaim(t, s, 0)
	cb := mustClaim(t, s, 0)
	cc := mustClaim(t, s, 0)
	settle(t, s, ca.EventID, ca.Generation, queue.Result{Reason: "invalid_body", Permanent: true, Error: "unknown_field: x"}, 1)
	settle(t, s, cb.EventID, cb.Generation, queue.Result{Reason: "invalid_body", Permanent: true}, 1)
	_ = cc
	now := cc.LeaseUntil
	for k := 2; k <= queue.MaxAttempts; k++ {
		c := mustClaim(t, s, now)
		now = c.LeaseUntil
	}
	if c, ok := claim(t, s, now); ok {
		t.Fatalf("Claim() = %s, want c1 quarantined", jsonOf(c))
	}
	want := []queue.QuarantinedEvent{
		{EventID: "a1", Flow: "a", Seq: 1, Generation: 1, LifetimeAttempts: 1, Reason: "invalid_body", Error: "unknown_field: x"},
		{EventID: "b1", Flow: "b", Seq: 1, Generation: 1, LifetimeAttempts: 1, Reason: "invalid_body"},
		{EventID: "c1", Flow: "c", Seq: 1, Generation: 3, LifetimeAttempts: 3, Reason: queue.ReasonLeaseExpired},
	}
	q, err := s.Quarantined(ctx)
	if err != nil || jsonOf(q) != jsonOf(want) {
		t.Fatalf("Quarantined() = %s, %v\nwant %s", jsonOf(q), err, jsonOf(want))
	}
	m, err := s.QuarantinedMatching(ctx, queue.RedriveFilter{Reason: "invalid_body"})
	if err != nil || jsonOf(m) != jsonOf(want[:2]) {
		t.Fatalf("QuarantinedMatching(invalid_body) = %s, %v\nwant %s", jsonOf(m), err, jsonOf(want[:2]))
	}
	pg := capability[queue.Pager](t, s, "Pager")
	var got []queue.QuarantinedEvent
	cursor := ""
	for {
		p, err := pg.QuarantinedPage(ctx, queue.QuarantinedQuery{Limit: 2, After: cursor})
		if err != nil {
			t.Fatalf("QuarantinedPage() error = %v", err)
		}
		got = append(got, p.Events...)
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	if jsonOf(got) != jsonOf(want) {
		t.Fatalf("QuarantinedPage pages = %s\nwant %s", jsonOf(got), jsonOf(want))
	}
}

// docs/contract.md §7.8: OldestWaiting is the enqueue tick of the oldest
// event not acked, whatever holds it (pending, in flight, in backoff,
// quarantined, or behind such a head), and ok=false when every event is
// acked; in both flow orders, through Settle and through SettleBatch.
func queueFailure_7_8_OldestWaiting(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	orders := []queue.Fairness{queue.FairMinServed}
	if bk.Rotation {
		orders = append(orders, queue.FairRotation)
	}
	for _, fair := range orders {
		for _, batch := range []bool{false, true} {
			p := queue.DefaultPolicy()
			p.Fairness = fair
			s := bk.openPolicy(t, p)
			w := capability[queue.Waiter](t, s, "Waiter")
			ack := func(c queue.Claim, now clock.Tick) {
				t.Helper()
				if !batch {
					settle(t, s, c.EventID, c.Generation, success, now)
					return
				}
				rs, err := s.SettleBatch(ctx, []queue.SettleItem{{EventID: c.EventID, Generation: c.Generation, Result: success}}, now)
				if err != nil || rs[0].Outcome != queue.Acked {
					t.Fatalf("SettleBatch(ack %s) = %+v, %v", c.EventID, rs, err)
				}
			}
			check := func(what string, want clock.Tick, wantOK bool) {
				t.Helper()
				at, ok, err := w.OldestWaiting(ctx)
				if err != nil || ok != wantOK || (ok && at != want) {
					t.Fatalf("%s/batch=%v: %s: OldestWaiting() = %d, %v, %v; want %d, %v", fair, batch, what, at, ok, err, want, wantOK)
				}
			}
			check("empty queue", 0, false)
			enqueue(t, s, "a1", "a", "x", 5)
			enqueue(t, s, "a2", "a", "x", 6)
			check("pending heads", 5, true)
			now := clock.Tick(8)
			for k := 1; k <= queue.MaxAttempts; k++ {
				c := mustClaim(t, s, now) // a1
				check("behind an in-flight head", 5, true)
				settle(t, s, c.EventID, c.Generation, failure("unavailable"), now)
				if k < queue.MaxAttempts {
					check("behind a head in backoff", 5, true)
					now += queue.Backoff(k)
				}
			}
			if e := event(t, s, "a1"); e.State != queue.StateQuarantined {
				t.Fatalf("a1 = %s, want quarantined", jsonOf(e))
			}
			check("behind a quarantined head", 5, true)
			enqueue(t, s, "b1", "b", "x", now)
			ack(mustClaim(t, s, now), now) // b1
			check("b1 acked, a1 quarantined", 5, true)
			if err := s.Redrive(ctx, "a1", event(t, s, "a1").Generation, "again", now); err != nil {
				t.Fatal(err)
			}
			ack(mustClaim(t, s, now), now) // a1 acked: a2 (enqueued at 6) is the head
			check("a1 acked", 6, true)
			ack(mustClaim(t, s, now), now)
			check("every event acked", 0, false)
			enqueue(t, s, "b2", "b", "x", now+1)
			check("a new head in a drained flow", now+1, true)
		}
	}
}
