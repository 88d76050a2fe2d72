package queuestore

import (
	"context"
	"testing"
)

// docs/contract.md §2.5: a redrive of a quarantined event with its generation keeps ID,
// flow, seq and body byte-identical, adds one to the generation, starts a
// new round (attempts 0, lifetime kept), makes it pending at now with the
// reason cleared, and writes one audit row with the NEW generation, the
// operator's reason and the tick.
func TestRedrive_2_5_StartsNewRoundWithAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	body := "{\"delta\": 1200}\x00\xff"
	enqueue(t, s, "a1", "a", body, 0)
	enqueue(t, s, "a2", "a", "x", 0)
	q, now := quarantineHead(t, s, 0)
	before := event(t, s, "a1")
	now += 3
	if err := s.Redrive(ctx, "a1", q.Generation, "raised MaxDelta after review", now); err != nil {
		t.Fatalf("Redrive() error = %v", err)
	}
	got := event(t, s, "a1")
	want := before
	want.Generation = before.Generation + 1
	want.Attempts = 0
	want.State = statePending
	want.AvailableAt = now
	want.Reason = ""
	want.LeaseUntil = 0
	if jsonOf(got) != jsonOf(want) || string(got.Body) != body {
		t.Fatalf("after Redrive: %s\nwant %s", jsonOf(got), jsonOf(want))
	}
	audit, err := s.Audit(ctx)
	if err != nil {
		t.Fatalf("Audit() error = %v", err)
	}
	wantAudit := []AuditEntry{{ID: 1, EventID: "a1", Generation: want.Generation, Reason: "raised MaxDelta after review", At: now}}
	if jsonOf(audit) != jsonOf(wantAudit) {
		t.Fatalf("Audit() = %s, want %s", jsonOf(audit), jsonOf(wantAudit))
	}
	// The flow is unblocked at once, with the redriven event as its head.
	c := mustClaim(t, s, now)
	if c.EventID != "a1" || c.Attempts != 1 || c.Generation != want.Generation+1 || string(c.Body) != body {
		t.Fatalf("claim after redrive = %s, want a1 attempts 1 generation %d", jsonOf(c), want.Generation+1)
	}
}

// docs/contract.md §2.5: three is a per-round budget: redrives raise lifetime attempts
// past 3, and each round gets three attempts again.
func TestRedrive_2_5_LifetimeAttemptsPastThree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 0)
	now := Lease
	for round := 1; round <= 3; round++ {
		var q Claim
		q, now = quarantineHead(t, s, now)
		if q.Attempts != MaxAttempts {
			t.Fatalf("round %d: last attempt = %d, want %d", round, q.Attempts, MaxAttempts)
		}
		e := event(t, s, "a1")
		if e.LifetimeAttempts != round*MaxAttempts {
			t.Fatalf("round %d: lifetime attempts = %d, want %d", round, e.LifetimeAttempts, round*MaxAttempts)
		}
		if err := s.Redrive(ctx, "a1", e.Generation, "retry", now); err != nil {
			t.Fatalf("round %d: Redrive() error = %v", round, err)
		}
	}
	if got, err := s.Audit(ctx); err != nil || len(got) != 3 {
		t.Fatalf("Audit() = %d rows, %v; want 3", len(got), err)
	}
}

// docs/contract.md §2.5: only a quarantined event whose generation matches, with a
// non-empty reason; otherwise ErrEmptyReason, ErrNotQuarantined,
// ErrStaleGeneration (or ErrNotFound), and nothing changes.
func TestRedrive_2_5_RefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTest(t)
	enqueue(t, s, "q1", "q", "x", 0)
	q, now := quarantineHead(t, s, 0)
	enqueue(t, s, "p1", "p", "x", now)
	p := mustClaim(t, s, now)
	cases := []struct {
		name    string
		id      string
		gen     int64
		reason  string
		targets []error
	}{
		{"empty reason", "q1", q.Generation, "", []error{ErrEmptyReason, ErrInvalid}},
		{"stale generation", "q1", q.Generation - 1, "r", []error{ErrStaleGeneration}},
		{"future generation", "q1", q.Generation + 1, "r", []error{ErrStaleGeneration}},
		{"inflight event", "p1", p.Generation, "r", []error{ErrNotQuarantined}},
		{"unknown event", "zz", 1, "r", []error{ErrNotFound}},
		{"negative generation", "q1", -1, "r", []error{ErrInvalid}},
		{"bad reason", "q1", q.Generation, "a\nb", []error{ErrInvalid}},
	}
	before := snap(t, s)
	for _, tc := range cases {
		err := s.Redrive(ctx, tc.id, tc.gen, tc.reason, now+1)
		wantErr(t, "Redrive("+tc.name+")", err, tc.targets...)
		assertUnchanged(t, "Redrive("+tc.name+")", before, snap(t, s))
	}
	// An acked event is not quarantined either.
	settle(t, s, "p1", p.Generation, success, now)
	err := s.Redrive(ctx, "p1", p.Generation, "r", now)
	wantErr(t, "Redrive(acked)", err, ErrNotQuarantined)
}
