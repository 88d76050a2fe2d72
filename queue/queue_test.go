package queue

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

func TestBackoffDefault(t *testing.T) {
	p := DefaultPolicy()
	want := []clock.Tick{2, 4, 8, 8, 8}
	for k, w := range want {
		if got := p.Backoff(k + 1); got != w {
			t.Errorf("Backoff(%d) = %d, want %d", k+1, got, w)
		}
	}
}

func TestBackoffNoOverflow(t *testing.T) {
	p := Policy{Lease: 1, MaxAttempts: 100, BackoffBase: 3, BackoffCap: clock.Tick(1<<62 + 1)}
	prev := clock.Tick(0)
	for k := 1; k <= 100; k++ {
		d := p.Backoff(k)
		if d < prev || d > p.BackoffCap || d <= 0 {
			t.Fatalf("Backoff(%d) = %d after %d, cap %d", k, d, prev, p.BackoffCap)
		}
		prev = d
	}
	if prev != p.BackoffCap {
		t.Fatalf("Backoff(100) = %d, want the cap %d", prev, p.BackoffCap)
	}
}

func TestDelayJitterDeterministicInRange(t *testing.T) {
	p := DefaultPolicy()
	p.Jitter = true
	seen := map[clock.Tick]bool{}
	for i := range 200 {
		id := "e" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		for k := 1; k <= 3; k++ {
			d := p.Delay(id, int64(i), k)
			if d < 0 || d > p.Backoff(k) {
				t.Fatalf("Delay(%q, %d, %d) = %d outside [0, %d]", id, i, k, d, p.Backoff(k))
			}
			if d2 := p.Delay(id, int64(i), k); d2 != d {
				t.Fatalf("Delay is not deterministic: %d then %d", d, d2)
			}
			seen[d] = true
		}
	}
	if len(seen) < 5 {
		t.Fatalf("jitter took only %d distinct values", len(seen))
	}
	p.Jitter = false
	if d := p.Delay("e", 1, 2); d != 4 {
		t.Fatalf("Delay without jitter = %d, want Backoff(2) = 4", d)
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Policy{
		{Lease: 0, MaxAttempts: 3, BackoffBase: 2, BackoffCap: 8},
		{Lease: 5, MaxAttempts: 0, BackoffBase: 2, BackoffCap: 8},
		{Lease: 5, MaxAttempts: 101, BackoffBase: 2, BackoffCap: 8},
		{Lease: 5, MaxAttempts: 3, BackoffBase: 0, BackoffCap: 8},
		{Lease: 5, MaxAttempts: 3, BackoffBase: 4, BackoffCap: 2},
		{Lease: 5, MaxAttempts: 3, BackoffBase: 2, BackoffCap: 8, Fairness: "lottery"},
	}
	for _, p := range bad {
		if err := p.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", p, err)
		}
	}
}

func TestInputRules(t *testing.T) {
	good := Event{ID: "e-1", Flow: "flow a", Body: []byte(`{"delta": 1}`)}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, e := range []Event{
		{ID: "", Flow: "f", Body: []byte("x")},
		{ID: strings.Repeat("i", MaxNameLen+1), Flow: "f", Body: []byte("x")},
		{ID: "a\tb", Flow: "f", Body: []byte("x")},
		{ID: "a", Flow: "\xff", Body: []byte("x")},
		{ID: "a", Flow: "f\u200b", Body: []byte("x")},
		{ID: "a", Flow: "f"},
		{ID: "a", Flow: "f", Body: make([]byte, MaxBodyLen+1)},
	} {
		if err := e.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q/%q/%d bytes: got %v, want ErrInvalid", e.ID, e.Flow, len(e.Body), err)
		}
	}
	if err := CheckReason(""); !errors.Is(err, ErrEmptyReason) || !errors.Is(err, ErrInvalid) {
		t.Errorf("empty reason: %v", err)
	}
	if err := (SettleItem{EventID: "e", Generation: -1, Result: Result{OK: true}}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative generation: %v", err)
	}
	for w, ok := range map[int]bool{MinWeight - 1: false, MinWeight: true, MaxWeight: true, MaxWeight + 1: false} {
		if err := CheckWeight(w); (err == nil) != ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("CheckWeight(%d) = %v, want ok %v (else ErrInvalid)", w, err, ok)
		}
	}
}

func TestBytesJSON(t *testing.T) {
	for _, b := range []Bytes{Bytes(`{"delta": 5}`), {0xff, 0, 1}} {
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var back Bytes
		if err := json.Unmarshal(js, &back); err != nil || string(back) != string(b) {
			t.Fatalf("%s: back %q, %v", js, back, err)
		}
	}
}

// The rotation fields of a snapshot are omitted under FairMinServed (nil
// Rotation, zero Weight, nil Pass and Joined), so a default queue's
// snapshot keeps its layout, and are encoded with queuestore's names
// otherwise.
func TestSnapshotRotationFieldsEncoding(t *testing.T) {
	plain, err := json.Marshal(Snapshot{Flows: []SnapshotFlow{{Flow: "a", LastSeq: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rotation", "weight", "pass", "joined", "vnow"} {
		if strings.Contains(string(plain), k) {
			t.Fatalf("min_served snapshot %s holds %q", plain, k)
		}
	}
	pass, joined := int64(720720), int64(2)
	rot, err := json.Marshal(Snapshot{Flows: []SnapshotFlow{{Flow: "a", LastSeq: 1, Weight: 3, Pass: &pass, Joined: &joined}},
		Rotation: &RotationState{VNow: 5, VTail: 720720, Joins: 2}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema_version":0,"clock_mark":0,"ticket":0,"flows":[{"flow":"a","last_seq":1,"served":0,"head_seq":null,"ready_at":null,"ready":false,"weight":3,"pass":720720,"joined":2}],"events":null,"audit":null,"rotation":{"vnow":5,"vtail":720720,"joins":2}}`
	if string(rot) != want {
		t.Fatalf("rotation snapshot\n%s\nwant\n%s", rot, want)
	}
}
