package fairness

import "testing"

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
