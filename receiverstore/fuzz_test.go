package receiverstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/fairrelay/fairrelay/receiver"
)

// FuzzParseDelta checks the body grammar against encoding/json: whatever
// receiver.ParseDelta accepts is a JSON object whose only member is "delta" holding
// that integer; and every body that compacts to exactly {"delta":N}, N an
// integer token in 1..1000, is accepted.
func FuzzParseDelta(f *testing.F) {
	for _, s := range []string{
		`{"delta": 5}`, `{"delta":1000}`, ` {"delta" : 1 } `, `{"delta": 1.5}`, `{"delta": 1e2}`,
		`{"delta": 5, "x": 1}`, `{"delta": 5}x`, `{"delta": 05}`, `{"delta": -1}`, `{"\u0064elta": 5}`,
		`{"delta": 5, "delta": 6}`, `[]`, ``, `{"delta": "5"}`, "{\"delta\":\t7\r\n}",
	} {
		f.Add([]byte(s))
	}
	intToken := regexp.MustCompile(`^\{"delta":(-?(?:0|[1-9][0-9]*))\}$`)
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := receiver.ParseDelta(b)
		if err != nil && !errors.Is(err, ErrInvalidBody) {
			t.Fatalf("receiver.ParseDelta(%q) error = %v, want ErrInvalidBody", b, err)
		}
		if err == nil {
			if n < 1 || n > 1000 {
				t.Fatalf("receiver.ParseDelta(%q) = %d, outside 1..1000", b, n)
			}
			var obj map[string]json.RawMessage
			if jerr := json.Unmarshal(b, &obj); jerr != nil {
				t.Fatalf("receiver.ParseDelta(%q) = %d but encoding/json says %v", b, n, jerr)
			}
			var v int64
			if len(obj) != 1 || json.Unmarshal(obj["delta"], &v) != nil || v != n {
				t.Fatalf("receiver.ParseDelta(%q) = %d but encoding/json reads %v", b, n, obj)
			}
		}
		var compact bytes.Buffer
		if json.Compact(&compact, b) != nil || len(b) > MaxBodyLen {
			if err == nil {
				t.Fatalf("receiver.ParseDelta(%q) accepted a body encoding/json does not", b)
			}
			return
		}
		if m := intToken.FindSubmatch(compact.Bytes()); m != nil {
			want, perr := strconv.ParseInt(string(m[1]), 10, 64)
			inRange := perr == nil && want >= 1 && want <= 1000
			if inRange && (err != nil || n != want) {
				t.Fatalf("receiver.ParseDelta(%q) = %d, %v; want %d, nil", b, n, err, want)
			}
			if !inRange && err == nil {
				t.Fatalf("receiver.ParseDelta(%q) = %d, want ErrInvalidBody", b, n)
			}
		}
	})
}

// FuzzReceive drives a fresh store with a fuzzed body and a fuzzed sequence
// of messages (first half through Receive, second half through one
// ReceiveBatch). It must never panic; every outcome must match the model of
// docs/contract.md §3; the flow totals must equal the sum of the deltas of the accepted
// messages (read with encoding/json, not with the store's parser); and each
// flow's next-expected must equal 1 + its accepted count.
func FuzzReceive(f *testing.F) {
	f.Add([]byte(`{"delta": 5}`), []byte{0, 0, 1, 0, 1, 0, 2, 0, 0, 0, 1, 1}, uint16(1000))
	f.Add([]byte(`{"delta": 1.0}`), []byte{0, 0, 1, 4, 0, 0, 1, 4, 1, 1, 2, 4}, uint16(3))
	f.Add([]byte(`{"delta":999}`), []byte{0, 0, 1, 4, 0, 0, 2, 0, 1, 0, 1, 0, 1, 0, 3, 2}, uint16(998))
	f.Add([]byte(`{"delta": 5}x`), []byte{5, 1, 0, 4, 0, 255, 1, 4}, uint16(0))
	f.Fuzz(func(t *testing.T, fuzzBody, ops []byte, maxDelta uint16) {
		md := 1 + int(maxDelta)%1000
		dir := t.TempDir()
		s, err := Open(filepath.Join(dir, "r.db"), WithMaxDelta(md))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		bodies := [][]byte{body(1), body(10), []byte(`{"delta":10}`), body(1000), fuzzBody}
		ids := []string{"a", "b", "c", "d", "", "e\x00"}
		flows := []string{"x", "y", "z", "w"}
		var ms []Message
		for i := 0; i+3 < len(ops) && len(ms) < 24; i += 4 {
			ms = append(ms, Message{
				ID:   ids[int(ops[i])%len(ids)],
				Flow: flows[int(ops[i+1])%len(flows)],
				Seq:  int64(ops[i+2]%6) - 1, // -1..4
				Body: bodies[int(ops[i+3])%len(bodies)],
			})
		}
		m := newModel(int64(md))
		ctx := context.Background()
		half := len(ms) / 2
		outs := make([]Outcome, len(ms))
		errs := make([]error, len(ms))
		for i, msg := range ms[:half] {
			outs[i], errs[i] = s.Receive(ctx, msg)
		}
		res, err := s.ReceiveBatch(ctx, ms[half:])
		if err != nil {
			t.Fatalf("ReceiveBatch() error = %v", err)
		}
		for i, r := range res {
			outs[half+i], errs[half+i] = r.Outcome, r.Err
		}

		sum := map[string]int64{}
		count := map[string]int64{}
		for i, msg := range ms {
			mout, merr := m.receive(msg)
			if outs[i] != mout || errClass(errs[i]) != errClass(merr) {
				t.Fatalf("message %d %+v: store = %q, %v; model = %q, %v", i, msg, outs[i], errs[i], mout, merr)
			}
			if errs[i] != nil && errClass(errs[i]) != "ErrInvalidBody" && errClass(errs[i]) != "ErrInvalid" {
				t.Fatalf("message %d: unexpected error %v", i, errs[i])
			}
			if outs[i] == Accepted {
				var b struct{ Delta int64 }
				if err := json.Unmarshal(msg.Body, &b); err != nil {
					t.Fatalf("accepted body %q that encoding/json refuses: %v", msg.Body, err)
				}
				sum[msg.Flow] += b.Delta
				count[msg.Flow]++
			}
		}
		for _, fl := range flows {
			tot, err := s.Total(ctx, fl)
			if err != nil {
				t.Fatal(err)
			}
			next, err := s.NextExpected(ctx, fl)
			if err != nil {
				t.Fatal(err)
			}
			if tot != sum[fl] || next != 1+count[fl] {
				t.Fatalf("flow %s: Total = %d, NextExpected = %d; want %d, %d", fl, tot, next, sum[fl], 1+count[fl])
			}
		}
		if err := m.check(snapOrFatal(t, s)); err != nil {
			t.Fatal(err)
		}
	})
}

func snapOrFatal(t *testing.T, s *Store) Snapshot {
	t.Helper()
	sn, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(fmt.Errorf("Snapshot(): %w", err))
	}
	return sn
}
