//go:build !race

package conformance

// raceDetector is true when the race detector is built in (race_on.go).
const raceDetector = false
