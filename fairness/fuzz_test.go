package fairness

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzMinServed checks, for any candidate list, that MinServed's pick has the
// minimum Served and, among those, the smallest Flow.
func FuzzMinServed(f *testing.F) {
	f.Add([]byte{0, 1, 2}, "a,b,c")
	f.Add([]byte{3, 3, 3}, "c,b,a")
	f.Add([]byte{}, "")
	f.Add([]byte{255, 0}, "x,x")
	f.Fuzz(func(t *testing.T, served []byte, names string) {
		c := decode(served, names)
		i, ok := MinServed.Select(c)
		if len(c) == 0 {
			if ok {
				t.Fatalf("Select(empty) ok = true")
			}
			return
		}
		if !ok || i < 0 || i >= len(c) {
			t.Fatalf("Select(%v) = %d,%v; want an index in range", c, i, ok)
		}
		for _, o := range c {
			if o.Served < c[i].Served {
				t.Fatalf("Select(%v) picked %v but %v was served less", c, c[i], o)
			}
			if o.Served == c[i].Served && o.Flow < c[i].Flow {
				t.Fatalf("Select(%v) picked %v but tie %v has a smaller flow", c, c[i], o)
			}
		}
	})
}

// decode turns fuzz input into candidates: one per served byte, flows taken
// from the comma-separated names (cycled, so duplicates appear too).
func decode(served []byte, names string) []Candidate {
	var flows []string
	start := 0
	for i := 0; i <= len(names); i++ {
		if i == len(names) || names[i] == ',' {
			flows = append(flows, names[start:i])
			start = i + 1
		}
	}
	c := make([]Candidate, len(served))
	for i, s := range served {
		c[i] = Candidate{Flow: flows[i%len(flows)], Served: int64(s) - 128}
	}
	return c
}

// FuzzRotation runs any sequence of operations on up to eight flows through
// the oracle: every pick is the smallest (P, J), no later arrival gets ahead
// of a waiting flow, every wait stays within its bound, the invariants hold,
// and a call that fails with ErrFlowState or ErrWeight changes nothing.
func FuzzRotation(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 5, 0, 5, 0, 5, 0})
	f.Add([]byte{0, 0, 5, 0, 0, 1, 0, 2, 5, 0, 5, 0, 5, 0, 2, 0, 3, 0, 5, 0})
	f.Add([]byte{4, 0, 0, 0, 4, 1, 0, 1, 5, 0, 5, 0, 1, 1, 5, 0, 2, 1, 5, 0})
	f.Add([]byte{3, 0, 2, 0, 0, 0, 0, 0, 4, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		o := newOracle()
		for i := 0; i+1 < len(ops); i += 2 {
			flow := string(rune('a' + ops[i+1]%8))
			before := []any{o.r.Flows(), o.r.Clock()}
			var err error
			switch ops[i] % 6 {
			case 0:
				err = o.arrive(flow)
			case 1:
				err = o.block(flow)
			case 2:
				err = o.ready(flow)
			case 3:
				err = o.leave(flow)
			case 4:
				// Weights 0..1023 from the flow byte: the ones above 1000 and 0 are rejected.
				err = o.setWeight(flow, int(ops[i+1])<<2|int(ops[i]>>6))
			default:
				_, _, err = o.pick()
			}
			if errors.Is(err, ErrFlowState) || errors.Is(err, ErrWeight) {
				if after := []any{o.r.Flows(), o.r.Clock()}; !reflect.DeepEqual(before, after) {
					t.Fatalf("operation %d failed (%v) but changed the state: %v → %v", i/2, err, before, after)
				}
				continue
			}
			if err != nil {
				t.Fatalf("operation %d: %v", i/2, err)
			}
		}
	})
}
