package receiverstore

import (
	"context"
	"reflect"
	"testing"
)

// TestFlows_ListsTotalsAndNextExpected checks the operator's per-flow view:
// only flows that accepted something, ordered by flow, with total and
// next-expected as docs/contract.md §3 rule 6 moves them (a gap moves nothing).
func TestFlows_ListsTotalsAndNextExpected(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	ctx := context.Background()
	if got, err := s.Flows(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Flows() on an empty store = %v, %v; want none", got, err)
	}
	mustReceive(t, s, msg("b1", "b", 1, 7), Accepted)
	mustReceive(t, s, msg("a1", "a", 1, 2), Accepted)
	mustReceive(t, s, msg("a2", "a", 2, 3), Accepted)
	mustReceive(t, s, msg("c5", "c", 5, 1), Gap)
	got, err := s.Flows(ctx)
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	want := []FlowState{
		{Flow: "a", NextExpected: 3, Total: 5},
		{Flow: "b", NextExpected: 2, Total: 7},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Flows() = %+v, want %+v", got, want)
	}
}
