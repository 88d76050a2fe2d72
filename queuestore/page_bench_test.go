package queuestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var pageBenchOnce struct {
	sync.Once
	data []byte
	err  error
}

// pageBenchStore opens a copy of a store with 100,000 flows (every tenth
// with three events), made once per run.
func pageBenchStore(b *testing.B) *Store {
	b.Helper()
	pageBenchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "queuestore-page-bench-")
		if err != nil {
			pageBenchOnce.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "q.db")
		s, err := Open(path)
		if err != nil {
			pageBenchOnce.err = err
			return
		}
		var es []Event
		for i := range 100000 {
			f := fmt.Sprintf("tenant-%03d/flow-%06d", i%500, i)
			for j := range 1 + 2*btoi(i%10 == 0) {
				es = append(es, Event{ID: fmt.Sprintf("%s#%d", f, j), Flow: f, Body: []byte(`{"delta": 1}`)})
			}
		}
		if _, err := s.EnqueueBatch(context.Background(), es, 0); err != nil {
			pageBenchOnce.err = err
			return
		}
		if err := s.Close(); err != nil {
			pageBenchOnce.err = err
			return
		}
		pageBenchOnce.data, pageBenchOnce.err = os.ReadFile(path)
	})
	if pageBenchOnce.err != nil {
		b.Fatal(pageBenchOnce.err)
	}
	path := filepath.Join(b.TempDir(), "q.db")
	if err := os.WriteFile(path, pageBenchOnce.data, 0o600); err != nil {
		b.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkFlowsPage reads one page of 50 flows out of 100,000 at the
// start, in the middle (a keyset cursor) and at the end, by name and by
// backlog, and one prefix search: each page should cost about the same.
func BenchmarkFlowsPage(b *testing.B) {
	s := pageBenchStore(b)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		q    FlowQuery
	}{
		{"name/first", FlowQuery{}},
		{"name/middle", FlowQuery{After: "0:tenant-250/flow-050250"}},
		{"name/last", FlowQuery{Last: true}},
		{"backlog/first", FlowQuery{Sort: SortByBacklog}},
		{"backlog/middle", FlowQuery{Sort: SortByBacklog, After: "-1:tenant-250/flow-050251"}},
		{"backlog/last", FlowQuery{Sort: SortByBacklog, Last: true}},
		{"served/middle", FlowQuery{Sort: SortByServed, After: "0:tenant-250/flow-050251"}},
		{"blocked/middle", FlowQuery{Sort: SortByBlocked, After: "1:tenant-250/flow-050251"}},
		{"search", FlowQuery{Prefix: "tenant-123/"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				p, err := s.FlowsPage(ctx, tc.q)
				if err != nil || len(p.Flows) == 0 {
					b.Fatalf("FlowsPage(%+v) = %d flows, %v", tc.q, len(p.Flows), err)
				}
			}
		})
	}
}
