package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/relay"
	"github.com/fairrelay/fairrelay/webhook"
)

var (
	hookSecret = []byte("relay-test-secret")
	hookEvent  = relay.Event{ID: "evt-9", Flow: "orders/7 eu", Seq: 12, Body: []byte(`{"total":3}`), Attempt: 1, Generation: 1}
)

func newHTTP(t *testing.T, url string, o relay.HTTPOptions) *relay.HTTP {
	t.Helper()
	h, err := relay.NewHTTP(url, hookSecret, o)
	if err != nil {
		t.Fatalf("NewHTTP() error = %v", err)
	}
	return h
}

// reason returns "" for success, else the Failure's reason.
func reason(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var f *relay.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error %v is not a *relay.Failure", err)
	}
	return f.Reason
}

// TestHTTPRequestIsSignedAndVerifiable checks the request a receiver gets:
// method, content type, byte-identical body, idempotency key, and both
// signatures verifiable with the webhook package.
func TestHTTPRequestIsSignedAndVerifiable(t *testing.T) {
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := func() error {
			switch {
			case r.Method != http.MethodPost:
				return errors.New("method " + r.Method)
			case r.Header.Get("Content-Type") != "application/json":
				return errors.New("content type " + r.Header.Get("Content-Type"))
			case !bytes.Equal(body, hookEvent.Body):
				return errors.New("body " + string(body))
			case r.Header.Get(webhook.HeaderIdempotencyKey) != hookEvent.ID:
				return errors.New("idempotency key " + r.Header.Get(webhook.HeaderIdempotencyKey))
			}
			if err := webhook.Verify(hookSecret, r.Header, body, time.Now(), 0); err != nil {
				return err
			}
			flow, seq, err := webhook.VerifyRoute(hookSecret, r.Header, time.Now(), 0)
			if err != nil {
				return err
			}
			if flow != hookEvent.Flow || seq != hookEvent.Seq {
				return errors.New("route " + flow)
			}
			return nil
		}()
		got <- err
		io.WriteString(w, `{"outcome":"accepted"}`)
	}))
	defer srv.Close()
	if err := newHTTP(t, srv.URL, relay.HTTPOptions{}).Handle(context.Background(), hookEvent); err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("receiver saw: %v", err)
	}
}

// TestHTTPReusesConnections: 20 requests one after the other, and 8 at a
// time, open no more connections than requests run at once.
func TestHTTPReusesConnections(t *testing.T) {
	var opened atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"outcome":"accepted"}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	h := newHTTP(t, srv.URL, relay.HTTPOptions{MaxIdleConns: 8})
	for range 20 {
		if err := h.Handle(context.Background(), hookEvent); err != nil {
			t.Fatal(err)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("connections for 20 sequential requests = %d, want 1", n)
	}
	// A large answer is capped, and the connection survives a small one.
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- h.Handle(context.Background(), hookEvent) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := opened.Load(); n > 8 {
		t.Fatalf("connections = %d, want at most 8", n)
	}
}

func TestHTTPCapsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(409)
		w.Write(bytes.Repeat([]byte("x"), 1<<20))
	}))
	defer srv.Close()
	err := newHTTP(t, srv.URL, relay.HTTPOptions{MaxResponseBytes: 1024}).Handle(context.Background(), hookEvent)
	if reason(t, err) != relay.ReasonConflict {
		t.Fatalf("Handle() = %v, want conflict", err)
	}
}

func TestNewHTTPRefusesBadInput(t *testing.T) {
	for _, tt := range []struct {
		url    string
		secret []byte
		o      relay.HTTPOptions
	}{
		{"ftp://x/", hookSecret, relay.HTTPOptions{}},
		{"/relative", hookSecret, relay.HTTPOptions{}},
		{"http://%zz", hookSecret, relay.HTTPOptions{}},
		{"http://127.0.0.1/", nil, relay.HTTPOptions{}},
		{"http://127.0.0.1/", hookSecret, relay.HTTPOptions{Timeout: -1}},
		{"http://127.0.0.1/", hookSecret, relay.HTTPOptions{MaxRetryAfter: -time.Second}},
	} {
		if _, err := relay.NewHTTP(tt.url, tt.secret, tt.o); !errors.Is(err, relay.ErrInvalid) {
			t.Errorf("NewHTTP(%q, %q, %+v) error = %v, want ErrInvalid", tt.url, tt.secret, tt.o, err)
		}
	}
}

// TestHTTPSendsTheWave: a relay delivering over HTTP at concurrency 4 sends
// each request with its wave in fairrelay-wave: one id and size 4 for the
// 4 events of each claim, another id for the next claim; a delivery
// outside a relay sends none.
func TestHTTPSendsTheWave(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // event ID -> fairrelay-wave
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get(webhook.HeaderID)] = r.Header.Get(webhook.HeaderWave)
		mu.Unlock()
	}))
	defer srv.Close()
	h := newHTTP(t, srv.URL, relay.HTTPOptions{})
	if err := h.Handle(context.Background(), hookEvent); err != nil {
		t.Fatal(err)
	}
	q := newFake(testPolicy(600, 3))
	for i := range 8 {
		q.enqueue(fmt.Sprintf("f%d", i), 1)
	}
	start(t, q, h, relay.Options{Clock: relay.NewManualClock(0), Concurrency: 4, Linger: time.Hour, Poll: time.Hour})
	q.waitFor(t, "8 acked", allAcked(q))
	mu.Lock()
	defer mu.Unlock()
	if v := got[hookEvent.ID]; v != "" {
		t.Errorf("a delivery outside a relay sent fairrelay-wave %q", v)
	}
	ids := map[string]bool{}
	for i := range 8 {
		id, n, ok := webhook.ParseWave(got[fmt.Sprintf("f%d/1", i)])
		first, _, _ := webhook.ParseWave(got[fmt.Sprintf("f%d/1", i/4*4)])
		if !ok || n != 4 || id != first {
			t.Errorf("f%d/1: fairrelay-wave %q; want its claim's id and size 4", i, got[fmt.Sprintf("f%d/1", i)])
		}
		ids[id] = true
	}
	if len(ids) != 2 {
		t.Errorf("wave ids %v; want 2", ids)
	}
}
