//go:build race

package experiment

// raceBuilt reports that this test binary runs under the race detector.
const raceBuilt = true
