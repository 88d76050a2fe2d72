//go:build race

package conformance

// raceDetector is true when the race detector is built in: the randomized
// clauses then run a quarter of their sequences (the detector makes each
// several times slower; the full count runs without it).
const raceDetector = true
