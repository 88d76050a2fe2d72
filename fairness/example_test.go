package fairness_test

import (
	"fmt"
	"slices"

	"github.com/fairrelay/fairrelay/fairness"
)

// Three flows with two events each: min-served rotates a, b, c, a, b, c.
func ExampleSimulate_rotation() {
	order := fairness.Simulate(fairness.MinServed,
		fairness.Backlogs(map[string]int{"a": 2, "b": 2, "c": 2}), 6)
	fmt.Println(order)
	// Output: [a b c a b c]
}

// Lexicographic order is the counterexample: flow a always has work, so b,
// which has waited since step 0, is never served.
func ExampleSimulate_lexicographicStarvation() {
	arrivals := func(step int) []string {
		if step == 0 {
			return []string{"a", "b"}
		}
		return []string{"a"} // a is never empty
	}
	lex := fairness.Simulate(fairness.Lexicographic, arrivals, 8)
	fmt.Println("lexicographic:", lex)
	min := fairness.Simulate(fairness.MinServed, arrivals, 8)
	fmt.Println("min-served:   ", min)
	// Output:
	// lexicographic: [a a a a a a a a]
	// min-served:    [a b a a a a a a]
}

// The kept min-served counterexample: a new flow arrives at every step with
// served 0, so the old flow (served 1 after its first turn) waits forever.
// Min-served is not a global fairness or maximum-wait guarantee.
func ExampleSimulate_newFlowsCrowdOut() {
	arrivals := func(step int) []string {
		if step == 0 {
			return []string{"old", "old"}
		}
		return []string{fmt.Sprintf("new%d", step)}
	}
	order := fairness.Simulate(fairness.MinServed, arrivals, 6)
	fmt.Println(order)
	fmt.Println("old served after step 0:", slices.Contains(order[1:], "old"))
	// Output:
	// [old new1 new2 new3 new4 new5]
	// old served after step 0: false
}

func ExampleMinServed() {
	c := []fairness.Candidate{{Flow: "b", Served: 3}, {Flow: "c", Served: 1}, {Flow: "a", Served: 1}}
	i, _ := fairness.MinServed.Select(c)
	fmt.Println(c[i].Flow)
	// Output: a
}

// Rotation is the opt-in policy with bounded waiting and weights: b has
// weight 2, so it gets two turns for a's one; c arrives late and joins at the
// tail (pass vtail, the latest join number), after a and b, which tie with it.
func ExampleRotation() {
	var r fairness.Rotation
	_ = r.SetWeight("b", 2)
	_ = r.Arrive("a")
	_ = r.Arrive("b")
	var order []string
	for range 6 {
		f, _ := r.Pick()
		order = append(order, f)
	}
	_ = r.Arrive("c")
	c, _ := r.Flow("c")
	fmt.Printf("c arrives: pass %d = vtail %d, joined %d\n", c.Pass, r.Clock().VTail, c.Joined)
	for range 4 {
		f, _ := r.Pick()
		order = append(order, f)
	}
	fmt.Println(order)
	// Output:
	// c arrives: pass 1441440 = vtail 1441440, joined 3
	// [a b b a b b a b c b]
}

// The min-served counterexample fixed: under rotation each newcomer joins at
// the tail, so old's second event goes right after its first, and old is never
// crowded out however many new flows come.
func ExampleSimulateRotation_newFlowsCrowdOut() {
	arrivals := func(step int) []string {
		if step == 0 {
			return []string{"old", "old"}
		}
		return []string{fmt.Sprintf("new%d", step)}
	}
	fmt.Println("min-served:", fairness.Simulate(fairness.MinServed, arrivals, 6))
	order, _ := fairness.SimulateRotation(nil, arrivals, 6)
	fmt.Println("rotation:  ", order)
	// Output:
	// min-served: [old new1 new2 new3 new4 new5]
	// rotation:   [old old new1 new2 new3 new4]
}
