//go:build race

package queuestore

// raceBuild is true when the race detector is built in: the randomized
// equivalence test then runs fewer cases (every operation costs several
// times more under the detector), and `mage test` runs it again at full
// count without it.
const raceBuild = true
