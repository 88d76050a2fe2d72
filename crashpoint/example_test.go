package crashpoint_test

import (
	"fmt"

	"github.com/fairrelay/fairrelay/crashpoint"
)

// A parent builds the environment entry that arms its child; a misspelt point
// is refused before any child starts.
func ExampleEnv() {
	kv, err := crashpoint.Env(crashpoint.ClaimCommitted)
	fmt.Println(kv, err)
	_, err = crashpoint.Env("claim-comitted")
	fmt.Println(err)
	// Output:
	// FAIRRELAY_CRASHPOINT=claim-committed <nil>
	// crashpoint: unknown point: "claim-comitted"
}

// An unarmed trap lets every point pass.
func ExampleTrap_Hit() {
	var trap crashpoint.Trap // a child would use crashpoint.FromEnv()
	for _, p := range crashpoint.Points() {
		trap.Hit(p)
	}
	fmt.Println("still running")
	// Output: still running
}
