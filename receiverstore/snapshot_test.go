package receiverstore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// docs/contract.md §2.7 (shared rule): Snapshot returns every table in a stable order.
// Two stores fed the same messages in different arrival orders give the same
// JSON, byte for byte, and that JSON is readable (bodies as strings).
func TestSnapshot_StableOrderAndReadableJSON(t *testing.T) {
	t.Parallel()
	first := []Message{
		msg("b1", "b", 1, 2), msg("a1", "a", 1, 1), msg("a2", "a", 2, 3),
		msg("x", "a", 1, 9), msg("a1", "b", 1, 1), msg("b1", "b", 1, 4),
	}
	second := []Message{ // same messages: flows interleaved and conflicts seen in another order
		msg("a1", "a", 1, 1), msg("b1", "b", 1, 2), msg("b1", "b", 1, 4),
		msg("a1", "b", 1, 1), msg("a2", "a", 2, 3), msg("x", "a", 1, 9),
	}
	var got [2][]byte
	for i, ms := range [][]Message{first, second} {
		s, _ := open(t)
		for _, m := range ms {
			if _, err := s.Receive(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
		b, err := json.MarshalIndent(snap(t, s), "", " ")
		if err != nil {
			t.Fatal(err)
		}
		got[i] = b
	}
	if string(got[0]) != string(got[1]) {
		t.Fatalf("snapshots differ by arrival order:\n%s\n---\n%s", got[0], got[1])
	}
	want := `{
 "schema_version": 1,
 "flows": [
  {
   "flow": "a",
   "next_expected": 3,
   "total": 4
  },
  {
   "flow": "b",
   "next_expected": 2,
   "total": 2
  }
 ],
 "receipts": [
  {
   "id": "a1",
   "flow": "a",
   "seq": 1,
   "body": "{\"delta\": 1}",
   "delta": 1
  },
  {
   "id": "a2",
   "flow": "a",
   "seq": 2,
   "body": "{\"delta\": 3}",
   "delta": 3
  },
  {
   "id": "b1",
   "flow": "b",
   "seq": 1,
   "body": "{\"delta\": 2}",
   "delta": 2
  }
 ],
 "conflicts": [
  {
   "id": "x",
   "flow": "a",
   "seq": 1,
   "body": "{\"delta\": 9}",
   "rule": "seq_taken",
   "with_id": "a1",
   "with_flow": "a",
   "with_seq": 1
  },
  {
   "id": "a1",
   "flow": "b",
   "seq": 1,
   "body": "{\"delta\": 1}",
   "rule": "id_reused",
   "with_id": "a1",
   "with_flow": "a",
   "with_seq": 1
  },
  {
   "id": "b1",
   "flow": "b",
   "seq": 1,
   "body": "{\"delta\": 4}",
   "rule": "id_reused",
   "with_id": "b1",
   "with_flow": "b",
   "with_seq": 1
  }
 ]
}`
	if string(got[0]) != want {
		t.Fatalf("Snapshot JSON =\n%s\nwant\n%s", got[0], want)
	}
}

// An empty store snapshots as empty lists, not nulls.
func TestSnapshot_EmptyStore(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	b, err := json.Marshal(snap(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"schema_version":1,"flows":[],"receipts":[],"conflicts":[]}`; string(b) != want {
		t.Fatalf("Snapshot JSON = %s, want %s", b, want)
	}
}

// Snapshot reads all tables in one read transaction: while another Store
// accepts messages, every snapshot is internally consistent (each flow's
// total is the sum of its receipts' deltas, next-expected is 1 + their
// count). Reading the tables in separate transactions could break this.
func TestSnapshot_OneReadTransactionUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r.db")
	writer, reader := reopen(t, path), reopen(t, path)
	const n = 40
	var wg sync.WaitGroup
	writing := make(chan struct{})
	wg.Go(func() {
		defer close(writing)
		for i := 1; i <= n; i++ {
			for _, f := range []string{"a", "b"} {
				if _, err := writer.Receive(context.Background(), msg(fmt.Sprintf("%s%d", f, i), f, int64(i), i)); err != nil {
					t.Errorf("Receive() error = %v", err)
					return
				}
			}
		}
	})
	for done := false; !done; {
		select {
		case <-writing:
			done = true // one last snapshot after the writer stopped
		default:
		}
		sn := snap(t, reader)
		sum, count := map[string]int64{}, map[string]int64{}
		for _, r := range sn.Receipts {
			sum[r.Flow] += r.Delta
			count[r.Flow]++
		}
		for _, f := range sn.Flows {
			if f.Total != sum[f.Flow] || f.NextExpected != 1+count[f.Flow] {
				t.Fatalf("inconsistent snapshot: flow %+v, receipts sum %d count %d", f, sum[f.Flow], count[f.Flow])
			}
		}
		if len(sn.Flows) != len(sum) {
			t.Fatalf("inconsistent snapshot: %d flows, receipts for %d", len(sn.Flows), len(sum))
		}
		if done && len(sn.Receipts) != 2*n {
			t.Fatalf("final snapshot has %d receipts, want %d", len(sn.Receipts), 2*n)
		}
	}
	wg.Wait()
}
