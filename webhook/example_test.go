package webhook_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/fairrelay/fairrelay/webhook"
)

func Example() {
	key, _ := webhook.ParseSecret("whsec_c2hhcmVkLXNlY3JldA==")
	body := []byte(`{"amount":5}`)
	now := time.Unix(1_700_000_000, 0)

	// The sender signs...
	req := httptest.NewRequest(http.MethodPost, "/events", bytes.NewReader(body))
	webhook.SetHeaders(req.Header, key, "evt-7", "orders/42", 3, now, body)

	// ...and the receiver verifies the body and the route.
	err := webhook.Verify(key, req.Header, body, now.Add(10*time.Second), webhook.DefaultTolerance)
	flow, seq, rerr := webhook.VerifyRoute(key, req.Header, now.Add(10*time.Second), webhook.DefaultTolerance)
	fmt.Println(err, rerr, flow, seq)

	// A changed body no longer verifies.
	fmt.Println(webhook.Verify(key, req.Header, []byte(`{"amount":6}`), now, 0))
	// Output:
	// <nil> <nil> orders/42 3
	// webhook: no matching signature: webhook-signature
}
