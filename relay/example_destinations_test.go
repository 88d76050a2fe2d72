package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/relay"
)

// ExampleDestinations delivers each flow to its own destination: flows
// that name none go to the relay's own URL (the default destination), a
// flow whose first event names "billing" goes to billing's URL, signed
// with billing's secret.
func ExampleDestinations() {
	var mu sync.Mutex
	got := map[string][]string{}
	receiver := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got[name] = append(got[name], r.Header.Get("webhook-id"))
			mu.Unlock()
			w.Write([]byte(`{"outcome":"accepted"}`))
		}))
	}
	shop, billing := receiver("shop"), receiver("billing")
	defer shop.Close()
	defer billing.Close()

	dir, _ := os.MkdirTemp("", "relay-example")
	defer os.RemoveAll(dir)
	q, _ := queuestore.Open(filepath.Join(dir, "queue.db"))
	defer q.Close()
	ctx := context.Background()
	// A stored secret is what webhook.ParseSecret reads: "whsec_" and the
	// base64 of the key, or the key's own bytes.
	err := q.PutDestination(ctx, queue.Destination{Name: "billing", URL: billing.URL + "/hooks",
		Secrets: []string{"whsec_YmlsbGluZy1rZXk="}}, "billing has its own receiver", 0)
	fmt.Println("registered:", err)
	q.EnqueueBatch(ctx, []queue.Event{
		{ID: "o-1", Flow: "orders", Body: []byte(`{}`)},
		{ID: "i-1", Flow: "invoices", Body: []byte(`{}`), Destination: "billing"},
		{ID: "i-2", Flow: "invoices", Body: []byte(`{}`)}, // "": the flow's own destination
	}, 0)

	def, _ := relay.NewHTTP(shop.URL+"/hooks", []byte("shop-secret"), relay.HTTPOptions{})
	router, _ := relay.NewDestinations(q, def, relay.DestinationsOptions{})
	r, _ := relay.New(q, router, relay.Options{Clock: relay.NewManualClock(0)})
	fmt.Println("idle:", r.RunUntilIdle(ctx))
	for _, name := range []string{"shop", "billing"} {
		slices.Sort(got[name])
		fmt.Printf("%s: %s\n", name, strings.Join(got[name], " "))
	}
	// Output:
	// registered: <nil>
	// idle: <nil>
	// shop: o-1
	// billing: i-1 i-2
}
