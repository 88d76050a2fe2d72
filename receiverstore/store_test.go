package receiverstore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
)

// open opens a fresh store in the test's own temporary directory.
func open(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "receiver.db")
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%q) error = %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
	})
	return s, path
}

// reopen opens another Store on path.
func reopen(t testing.TB, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%q) error = %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func body(delta int) []byte { return fmt.Appendf(nil, `{"delta": %d}`, delta) }

func msg(id, flow string, seq int64, delta int) Message {
	return Message{ID: id, Flow: flow, Seq: seq, Body: body(delta)}
}

func snap(t testing.TB, s *Store) Snapshot {
	t.Helper()
	sn, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot() error = %v", err)
	}
	return sn
}

func mustReceive(t testing.TB, s *Store, m Message, want Outcome) {
	t.Helper()
	got, err := s.Receive(context.Background(), m)
	if err != nil {
		t.Fatalf("Receive(%s/%s/%d %s) error = %v", m.ID, m.Flow, m.Seq, m.Body, err)
	}
	if got != want {
		t.Fatalf("Receive(%s/%s/%d %s) = %q, want %q", m.ID, m.Flow, m.Seq, m.Body, got, want)
	}
}

// assertUnchanged fails when the snapshot differs from before.
func assertUnchanged(t testing.TB, s *Store, before Snapshot, what string) {
	t.Helper()
	if after := snap(t, s); !reflect.DeepEqual(after, before) {
		t.Fatalf("%s changed the store:\n got %s\nwant %s", what, js(after), js(before))
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

func total(t testing.TB, s *Store, flow string) int64 {
	t.Helper()
	n, err := s.Total(context.Background(), flow)
	if err != nil {
		t.Fatalf("Total(%q) error = %v", flow, err)
	}
	return n
}
