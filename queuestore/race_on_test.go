//go:build race

package queuestore

// raceBuild is true when the race detector is built in: the randomized model
// tests then run a tenth of their sequences (every operation costs several
// times more under the detector), and `mage test` runs them again at full
// count without it.
const raceBuild = true
