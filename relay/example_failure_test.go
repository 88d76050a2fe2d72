package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fairrelay/fairrelay/relay"
)

// errWarehouseDown stands for a downstream system that does not answer.
var errWarehouseDown = errors.New("warehouse: connection refused")

// ExampleFailPermanent is a handler that tells the relay what kind of
// failure it met: a body it can never apply is permanent (the event is
// quarantined at once, whatever attempts remain), a downstream system that
// is down is the destination's fault (the relay's breaker counts it and,
// when several come in a row, stops claiming and probes), and it may ask
// for a least wait before the next try.
func ExampleFailPermanent() {
	warehouseUp := false
	h := relay.HandlerFunc(func(_ context.Context, e relay.Event) error {
		var order struct {
			Qty int `json:"qty"`
		}
		if err := json.Unmarshal(e.Body, &order); err != nil {
			return relay.FailPermanent("invalid_body", err)
		}
		if order.Qty <= 0 {
			return relay.FailPermanent("invalid_qty", fmt.Errorf("qty %d", order.Qty))
		}
		if !warehouseUp {
			return relay.FailDestination("unavailable", errWarehouseDown).WithRetryAfter(30 * time.Second)
		}
		return nil
	})
	for _, body := range []string{`{"qty":2}`, `{"qty":0}`, `{"qty":`} {
		err := h.Handle(context.Background(), relay.Event{ID: "order-1", Flow: "customer-7", Seq: 1, Body: []byte(body), Attempt: 1})
		var f *relay.Failure
		if errors.As(err, &f) {
			fmt.Printf("%-10s %s: permanent=%v destination=%v retry_after=%v (%v)\n", body, f.Reason, f.Permanent, f.Destination, f.RetryAfter, f.Err)
		}
	}
	warehouseUp = true
	fmt.Println("warehouse back:", h.Handle(context.Background(), relay.Event{Body: []byte(`{"qty":2}`)}))
	// Output:
	// {"qty":2}  unavailable: permanent=false destination=true retry_after=30s (warehouse: connection refused)
	// {"qty":0}  invalid_qty: permanent=true destination=false retry_after=0s (qty 0)
	// {"qty":    invalid_body: permanent=true destination=false retry_after=0s (unexpected end of JSON input)
	// warehouse back: <nil>
}
