//go:build !race

package queuestore

// raceBuild is true when the race detector is built in (race_on_test.go).
const raceBuild = false
