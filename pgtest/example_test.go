package pgtest_test

import (
	"fmt"

	"github.com/fairrelay/fairrelay/pgtest"
)

// Without FAIRRELAY_POSTGRES the tests use the project's local default.
func ExampleURL() {
	fmt.Println(pgtest.DefaultURL)
	// Output: postgres://postgres@127.0.0.1:5432/test?sslmode=disable
}
