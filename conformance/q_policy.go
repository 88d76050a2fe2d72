package conformance

import (
	"context"
	"encoding/json"
	"github.com/fairrelay/fairrelay/queue"
	"math"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// §7.1: the default policy is the contract's constants.
func queuePolicy_7_1_DefaultIsTheConstants(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	p := queue.DefaultPolicy()
	want := queue.Policy{Lease: 5, MaxAttempts: 3, BackoffBase: 2, BackoffCap: 8, Jitter: false, Fairness: queue.FairMinServed}
	if !p.Equal(want) || p.Lease != queue.Lease || p.MaxAttempts != queue.MaxAttempts || p.BackoffBase != queue.BackoffBase || p.BackoffCap != queue.BackoffCap {
		t.Fatalf("DefaultPolicy() = %+v, want %+v", p, want)
	}
	for k := 1; k <= 6; k++ {
		if p.Backoff(k) != queue.Backoff(k) || p.Delay("e", 1, k) != queue.Backoff(k) {
			t.Errorf("k=%d: queue.Policy.Backoff = %d, Delay = %d, queue.Backoff = %d", k, p.Backoff(k), p.Delay("e", 1, k), queue.Backoff(k))
		}
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("DefaultPolicy().Validate() = %v", err)
	}
}

// queue.Backoff is min(Base*2^(k-1), Cap) and never overflows, however large k
// or Cap.
func queuePolicy_7_1_BackoffOverflowSafe(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	p := queue.Policy{Lease: 1, MaxAttempts: 100, BackoffBase: 3, BackoffCap: math.MaxInt64}
	if got := p.Backoff(3); got != 12 {
		t.Errorf("Backoff(3) = %d, want 12", got)
	}
	for _, k := range []int{62, 63, 64, 100, 1000} {
		if got := p.Backoff(k); got <= 0 || got > p.BackoffCap {
			t.Errorf("Backoff(%d) = %d, want in (0, cap]", k, got)
		}
	}
	if got := p.Backoff(1000); got != math.MaxInt64 {
		t.Errorf("Backoff(1000) = %d, want the cap %d", got, int64(math.MaxInt64))
	}
	q := queue.Policy{Lease: 1, MaxAttempts: 3, BackoffBase: 1000, BackoffCap: 30000}
	for k, want := range map[int]clock.Tick{1: 1000, 2: 2000, 5: 16000, 6: 30000, 99: 30000} {
		if got := q.Backoff(k); got != want {
			t.Errorf("Backoff(%d) = %d, want %d", k, got, want)
		}
	}
}

// Validate refuses every field outside its limits with queue.ErrInvalid.
func queuePolicy_7_1_ValidateLimits(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ok := queue.DefaultPolicy()
	bad := map[string]func(p *queue.Policy){
		"lease 0":           func(p *queue.Policy) { p.Lease = 0 },
		"negative lease":    func(p *queue.Policy) { p.Lease = -5 },
		"max attempts 0":    func(p *queue.Policy) { p.MaxAttempts = 0 },
		"max attempts 101":  func(p *queue.Policy) { p.MaxAttempts = queue.MaxPolicyAttempts + 1 },
		"base 0":            func(p *queue.Policy) { p.BackoffBase = 0 },
		"cap below base":    func(p *queue.Policy) { p.BackoffBase, p.BackoffCap = 9, 8 },
		"unknown fairness":  func(p *queue.Policy) { p.Fairness = "random" },
		"negative base":     func(p *queue.Policy) { p.BackoffBase = -1 },
		"negative cap/base": func(p *queue.Policy) { p.BackoffBase, p.BackoffCap = -4, -2 },
	}
	for name, mut := range bad {
		p := ok
		mut(&p)
		wantErr(t, name, p.Validate(), queue.ErrInvalid)
	}
	for _, p := range []queue.Policy{
		{Lease: 1, MaxAttempts: 1, BackoffBase: 1, BackoffCap: 1},
		{Lease: 30000, MaxAttempts: 100, BackoffBase: 1000, BackoffCap: 60000, Jitter: true, Fairness: queue.FairRotation},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v.Validate() = %v, want nil", p, err)
		}
	}
}

// §7.1: jitter is deterministic "full jitter": FNV-1a 64 of (ID, 0x00,
// generation, attempt as big-endian 8 bytes) mod (queue.Backoff(k)+1). The
// expected values were computed by an independent implementation of the
// documented formula (Python), so another backend can check itself
// against the same table.
func queuePolicy_7_1_JitterIsTheDocumentedHash(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	cases := []struct {
		id        string
		gen       int64
		attempt   int
		base, cap clock.Tick
		want      clock.Tick
	}{
		{"a-1", 1, 1, 2, 8, 2},
		{"a-1", 1, 2, 2, 8, 4},
		{"a-1", 2, 1, 2, 8, 0},
		{"evt-42", 7, 3, 1000, 30000, 3551},
		{"é", 5, 2, 100, 100, 33},
	}
	for _, c := range cases {
		p := queue.Policy{Lease: 5, MaxAttempts: 3, BackoffBase: c.base, BackoffCap: c.cap, Jitter: true}
		if got := p.Delay(c.id, c.gen, c.attempt); got != c.want {
			t.Errorf("Delay(%q, %d, %d) with base %d cap %d = %d, want %d", c.id, c.gen, c.attempt, c.base, c.cap, got, c.want)
		}
	}
	p := queue.Policy{Lease: 5, MaxAttempts: 10, BackoffBase: 10, BackoffCap: 1000, Jitter: true}
	seen := map[clock.Tick]bool{}
	for i := 0; i < 200; i++ {
		id := "e" + itoa(i)
		for k := 1; k <= 8; k++ {
			d := p.Delay(id, int64(k), k)
			if d < 0 || d > p.Backoff(k) {
				t.Fatalf("Delay(%q, %d, %d) = %d, outside [0, %d]", id, k, k, d, p.Backoff(k))
			}
			if d != p.Delay(id, int64(k), k) {
				t.Fatalf("Delay(%q) is not deterministic", id)
			}
			seen[d] = true
		}
	}
	if len(seen) < 50 {
		t.Fatalf("jittered delays took only %d distinct values over 1600 draws", len(seen))
	}
}

// §7.1: the policy is recorded when the file is created; every later Open
// uses it; a different explicit policy is queue.ErrPolicyMismatch naming both; an
// invalid or unimplemented one is queue.ErrInvalid.
func queuePolicy_7_1_RecordedAtCreation(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	path := bk.newLoc(t)
	custom := queue.Policy{Lease: 30000, MaxAttempts: 5, BackoffBase: 1000, BackoffCap: 60000, Jitter: true}
	s, err := bk.openAt(t, path, withPolicy(custom))
	if err != nil {
		t.Fatalf("bk.openAt(t, WithPolicy) error = %v", err)
	}
	s.Close()
	want := custom
	want.Fairness = queue.FairMinServed
	for _, opts := range [][]qOpt{nil, {withPolicy(custom)}, {withPolicy(want)}} {
		s, err := bk.openAt(t, path, opts...)
		if err != nil {
			t.Fatalf("reopen error = %v", err)
		}
		got, err := s.Policy(ctx)
		s.Close()
		if err != nil || !got.Equal(want) {
			t.Fatalf("Policy() = %+v, %v; want %+v", got, err, want)
		}
	}
	other := custom
	other.MaxAttempts = 4
	_, err = bk.openAt(t, path, withPolicy(other))
	wantErr(t, "bk.openAt(t, other policy)", err, queue.ErrPolicyMismatch)
	if err == nil || !strings.Contains(err.Error(), "MaxAttempts:5") || !strings.Contains(err.Error(), "MaxAttempts:4") {
		t.Fatalf("mismatch error %v does not name both policies", err)
	}
	_, err = bk.openAt(t, path, withPolicy(queue.DefaultPolicy()))
	wantErr(t, "bk.openAt(t, default policy on a custom file)", err, queue.ErrPolicyMismatch)

	bad := queue.DefaultPolicy()
	bad.Lease = 0
	_, err = bk.openAt(t, bk.newLoc(t), withPolicy(bad))
	wantErr(t, "bk.openAt(t, invalid policy)", err, queue.ErrInvalid)
	rot := queue.DefaultPolicy()
	rot.Fairness = queue.FairRotation
	rs, err := bk.openAt(t, bk.newLoc(t), withPolicy(rot))
	switch {
	case bk.Rotation && err != nil:
		t.Fatalf("bk.openAt(t, rotation) error = %v, want a store (the backend implements rotation)", err)
	case bk.Rotation:
		if got, err := rs.Policy(ctx); err != nil || !got.Equal(rot) {
			t.Fatalf("rotation store Policy() = %+v, %v; want %+v", got, err, rot)
		}
	case !bk.Rotation:
		wantErr(t, "bk.openAt(t, rotation)", err, queue.ErrInvalid)
		if err == nil || !strings.Contains(err.Error(), "not implemented") {
			t.Fatalf("bk.openAt(t, rotation) error = %v, want it to say not implemented", err)
		}
	}

	// A new file without WithPolicy records the default.
	d, _ := bk.openTest(t)
	if got, err := d.Policy(ctx); err != nil || !got.Equal(queue.DefaultPolicy()) {
		t.Fatalf("default file queue.Policy() = %+v, %v", got, err)
	}
}

// §7.1: claim and settle use the recorded policy, also in a Store opened
// without WithPolicy.
func queuePolicy_7_1_ClaimAndSettleUseRecordedPolicy(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	path := bk.newLoc(t)
	p := queue.Policy{Lease: 10, MaxAttempts: 2, BackoffBase: 3, BackoffCap: 5}
	first, err := bk.openAt(t, path, withPolicy(p))
	if err != nil {
		t.Fatalf("bk.openAt(t, ) error = %v", err)
	}
	defer first.Close()
	s, err := bk.openAt(t, path)
	if err != nil {
		t.Fatalf("bk.openAt(t, ) error = %v", err)
	}
	defer s.Close()
	enqueue(t, s, "a1", "a", "x", 0)
	c := mustClaim(t, s, 1)
	if c.LeaseUntil != 11 {
		t.Fatalf("LeaseUntil = %d, want 1 + queue.Lease 10", c.LeaseUntil)
	}
	if o := settle(t, s, "a1", c.Generation, failure("boom"), 2); o != queue.RetryScheduled {
		t.Fatalf("first failure = %s, want retry", o)
	}
	if e := event(t, s, "a1"); e.AvailableAt != 5 {
		t.Fatalf("retry available at %d, want 2 + queue.BackoffBase 3", e.AvailableAt)
	}
	if _, ok := claim(t, s, 4); ok {
		t.Fatalf("claimed during the backoff")
	}
	c = mustClaim(t, first, 5)
	if o := settle(t, first, "a1", c.Generation, failure("boom"), 6); o != queue.Quarantined {
		t.Fatalf("second failure with queue.MaxAttempts 2 = %s, want quarantined", o)
	}
	// Take-over on the last attempt uses queue.MaxAttempts 2 as well.
	enqueue(t, s, "b1", "b", "x", 10)
	c = mustClaim(t, s, 10)
	if _, ok := claim(t, s, 20); !ok { // lease 20 ran out: take-over, attempt 2
		t.Fatalf("no take-over at the lease end")
	}
	if _, ok := claim(t, s, 30); ok {
		t.Fatalf("claimed a used-up head")
	}
	if e := event(t, s, "b1"); e.State != queue.StateQuarantined || e.Reason != queue.ReasonLeaseExpired {
		t.Fatalf("b1 = %s, want quarantined lease_expired", jsonOf(e))
	}
	_ = c
}

// §7.1: SetPolicy validates, needs a reason, records the policy for every
// process and writes a 'policy' audit row; Audit keeps listing redrives
// only; the snapshot shows the non-default policy and the row.
func queuePolicy_7_1_SetPolicyAudited(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, path := bk.openTest(t)
	other, err := bk.openAt(t, path)
	if err != nil {
		t.Fatalf("bk.openAt(t, ) error = %v", err)
	}
	defer other.Close()
	enqueue(t, other, "a1", "a", "x", 1) // other has now read (and cached) the default policy
	before := snap(t, s)
	if b, _ := json.Marshal(before); strings.Contains(string(b), "policy") || strings.Contains(string(b), "operator_audit") {
		t.Fatalf("default snapshot shows policy fields: %s", b)
	}
	bad := queue.DefaultPolicy()
	bad.MaxAttempts = 0
	wantErr(t, "SetPolicy(invalid)", s.SetPolicy(ctx, bad, "r", 2), queue.ErrInvalid)
	p := queue.Policy{Lease: 7, MaxAttempts: 4, BackoffBase: 1, BackoffCap: 2, Jitter: true}
	wantErr(t, "SetPolicy(no reason)", s.SetPolicy(ctx, p, "", 2), queue.ErrInvalid, queue.ErrEmptyReason)
	wantErr(t, "SetPolicy(blank reason)", s.SetPolicy(ctx, p, "   ", 2), queue.ErrInvalid, queue.ErrEmptyReason)
	wantErr(t, "SetPolicy(past tick)", s.SetPolicy(ctx, p, "r", 0), queue.ErrTimeRegression)
	unknown := p
	unknown.Fairness = "round_robin"
	wantErr(t, "SetPolicy(unknown fairness)", s.SetPolicy(ctx, unknown, "r", 2), queue.ErrInvalid)
	if !bk.Rotation {
		rot := p
		rot.Fairness = queue.FairRotation
		wantErr(t, "SetPolicy(rotation)", s.SetPolicy(ctx, rot, "r", 2), queue.ErrInvalid)
	}
	assertUnchanged(t, "refused SetPolicy", before, snap(t, s))

	if err := s.SetPolicy(ctx, p, "longer handlers in prod", 3); err != nil {
		t.Fatalf("SetPolicy() error = %v", err)
	}
	p.Fairness = queue.FairMinServed
	// The other Store uses the new policy at its next write, not its cache.
	c := mustClaim(t, other, 4)
	if c.LeaseUntil != 11 {
		t.Fatalf("other store's claim LeaseUntil = %d, want 4 + 7", c.LeaseUntil)
	}
	all, err := s.AuditAll(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("AuditAll() = %s, %v; want one row", jsonOf(all), err)
	}
	var ch queue.PolicyChange
	if err := json.Unmarshal([]byte(all[0].Detail), &ch); err != nil || !ch.Old.Equal(queue.DefaultPolicy()) || !ch.New.Equal(p) {
		t.Fatalf("policy audit detail = %s (%v), want old default, new %+v", all[0].Detail, err, p)
	}
	if all[0].Kind != queue.AuditPolicy || all[0].Reason != "longer handlers in prod" || all[0].At != 3 || all[0].EventID != "" {
		t.Fatalf("policy audit row = %s", jsonOf(all[0]))
	}
	if a, err := s.Audit(ctx); err != nil || len(a) != 0 {
		t.Fatalf("Audit() = %s, %v; want no redrive rows", jsonOf(a), err)
	}
	sn := snap(t, s)
	if sn.Policy == nil || !sn.Policy.Equal(p) || len(sn.OperatorAudit) != 1 || sn.SchemaVersion != queue.SnapshotFormat {
		t.Fatalf("snapshot policy %v, operator audit %s", sn.Policy, jsonOf(sn.OperatorAudit))
	}
	if st, err := s.Stats(ctx); err != nil || st.SchemaVersion != bk.SchemaVersion || st.AuditRows != 1 {
		t.Fatalf("Stats() = %+v, %v", st, err)
	}
}

// §7.1: lowering queue.MaxAttempts below an in-flight event's attempts is safe:
// its next failure quarantines it (no retry, no CHECK failure).
func queuePolicy_7_1_LoweredMaxAttemptsQuarantinesNextFailure(t *testing.T, bk *QueueBackend) {
	t.Parallel()
	ctx := context.Background()
	s, _ := bk.openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	c := mustClaim(t, s, 0)
	settle(t, s, "a1", c.Generation, failure("boom"), 1)
	c = mustClaim(t, s, 3) // attempt 2
	p := queue.DefaultPolicy()
	p.MaxAttempts = 1
	if err := s.SetPolicy(ctx, p, "fail fast", 4); err != nil {
		t.Fatalf("SetPolicy() error = %v", err)
	}
	if o := settle(t, s, "a1", c.Generation, failure("boom"), 5); o != queue.Quarantined {
		t.Fatalf("failure after lowering queue.MaxAttempts = %s, want quarantined", o)
	}
	// Raising it above 3 lets attempts pass the old CHECK (attempts <= 3).
	p.MaxAttempts = 5
	if err := s.SetPolicy(ctx, p, "more attempts", 6); err != nil {
		t.Fatalf("SetPolicy() error = %v", err)
	}
	if err := s.Redrive(ctx, "a1", c.Generation, "again", 6); err != nil {
		t.Fatalf("Redrive() error = %v", err)
	}
	now := clock.Tick(6)
	for k := 1; k <= 4; k++ {
		c = mustClaim(t, s, now)
		if o := settle(t, s, "a1", c.Generation, failure("boom"), now); o != queue.RetryScheduled {
			t.Fatalf("attempt %d: %s, want retry", k, o)
		}
		now += p.Backoff(k)
	}
	c = mustClaim(t, s, now)
	if c.Attempts != 5 {
		t.Fatalf("attempts = %d, want 5", c.Attempts)
	}
}
