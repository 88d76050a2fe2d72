//go:build race

package shard_test

// raceOn is set in a race-detector build.
const raceOn = true
