package receiver_test

import (
	"fmt"

	"github.com/fairrelay/fairrelay/receiver"
)

// The body is a strict {"delta": N}; anything else is ErrInvalidBody.
func ExampleParseDelta() {
	n, err := receiver.ParseDelta([]byte(`{"delta": 7}`))
	fmt.Println(n, err)
	_, err = receiver.ParseDelta([]byte(`{"delta": 7.0}`))
	fmt.Println(err)
	// Output:
	// 7 <nil>
	// receiverstore: invalid body: not_an_integer: delta is "7.0", not an integer token (byte 10)
}
