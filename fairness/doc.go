// Package fairness decides which flow is served next.
//
// A flow is a stream of events that must be handled in order (one agent
// conversation, one tenant). When several flows have work, a [Selector] picks
// one of them. [MinServed] is fairrelay's rule: the flow that has been served
// least goes next, ties to the smallest flow ID. [Lexicographic] is kept as a
// counterexample: it always prefers the smallest flow ID, so a flow that always
// has work starves every flow after it.
//
// [Simulate] replays a schedule of arrivals step by step with any selector, so
// that both the guarantee and its limits can be shown in a few lines. Min-served
// rotates finite backlogs (a, b, c, a, b, c, …), but it is not a global fairness
// or maximum-wait guarantee: a new flow every step starts at served 0 and keeps
// an older flow waiting forever. The tests keep that counterexample.
//
// [Rotation] models the opt-in rotation policy exactly, in the integer
// arithmetic a store implements: stride scheduling (each flow pays
// [Stride] = Scale/weight of virtual time per claim, weights 1..1000), a flow
// that arrives joins at the tail (pass = vtail, the next join number) and ties
// go to the earlier arrival. Once a flow's head is dispatchable, no flow that
// arrives later is served before it, and each flow already present is served
// at most ceil(w_j/w_lo)+1 times meanwhile; always-ready flows share claims in
// proportion to their weights. [SimulateRotation] is [Simulate] for it.
// docs/fairness.md states the rules, the bound and its proof.
//
// The package is pure: no I/O, no clock, nothing of fairrelay's imported.
package fairness
