package conformance

import (
	"context"
	"github.com/fairrelay/fairrelay/receiver"
	"reflect"
	"testing"
)

// Flows_ListsTotalsAndNextExpected checks the operator's per-flow view:
// only flows that accepted something, ordered by flow, with total and
// next-expected as docs/contract.md §3 rule 6 moves them (a gap moves nothing).
func receiverFlows_ListsTotalsAndNextExpected(t *testing.T, rk *ReceiverBackend) {
	t.Parallel()
	s, _ := rk.open(t)
	ctx := context.Background()
	if got, err := s.Flows(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Flows() on an empty store = %v, %v; want none", got, err)
	}
	rmustReceive(t, s, rmsg("b1", "b", 1, 7), receiver.Accepted)
	rmustReceive(t, s, rmsg("a1", "a", 1, 2), receiver.Accepted)
	rmustReceive(t, s, rmsg("a2", "a", 2, 3), receiver.Accepted)
	rmustReceive(t, s, rmsg("c5", "c", 5, 1), receiver.Gap)
	got, err := s.Flows(ctx)
	if err != nil {
		t.Fatalf("Flows() error = %v", err)
	}
	want := []receiver.FlowState{
		{Flow: "a", NextExpected: 3, Total: 5},
		{Flow: "b", NextExpected: 2, Total: 7},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Flows() = %+v, want %+v", got, want)
	}
}
