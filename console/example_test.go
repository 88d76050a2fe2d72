package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/fairrelay/fairrelay/console"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// A console over a queue and a receiver: pages are open to GET, and writes
// need the token.
func Example() {
	dir, _ := os.MkdirTemp("", "console-example-")
	defer os.RemoveAll(dir)
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		panic(err)
	}
	defer q.Close()
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		panic(err)
	}
	defer r.Close()
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, queuestore.Event{ID: "evt-1", Flow: "tenant-42", Body: []byte(`{"delta": 2}`)}, 0); err != nil {
		panic(err)
	}

	h, err := console.New(q, r, console.Options{Token: "example-token-0123456789"})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/flows?q=tenant-")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(body), "tenant-42"))

	// A write without the token (and without the form's CSRF value) is
	// refused and changes nothing.
	resp, err = http.PostForm(srv.URL+"/redrive", map[string][]string{"id": {"evt-1"}, "generation": {"0"}, "reason": {"x"}})
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// 200 true
	// 403
}
