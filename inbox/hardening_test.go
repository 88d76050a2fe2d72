package inbox

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/webhook"
)

// hardened is a server as relayctl receive mounts it: one delivery path,
// the metrics beside it, over a real receiver.db, on a loopback listener.
func hardened(t *testing.T, o ServerOptions, opts ...receiverstore.Option) (*httptest.Server, *counting, *receiverstore.Store) {
	t.Helper()
	st, err := receiverstore.Open(filepath.Join(t.TempDir(), "receiver.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	o.Path, o.MetricsPath, o.Metrics = "/", "/metrics", reg
	o.MetricsHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	rc := &counting{Receiver: st}
	srv := httptest.NewServer(NewServer(rc, secret, o))
	t.Cleanup(srv.Close)
	return srv, rc, st
}

func do(t *testing.T, srv *httptest.Server, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// Only the delivery path receives: a signed delivery to any other path is
// 404 and reaches no store (before, the server answered on every path).
func TestServer_OnlyItsPath(t *testing.T) {
	t.Parallel()
	srv, rc, _ := hardened(t, ServerOptions{})
	for _, path := range []string{"/events", "/x/", "//", "/metrics/"} {
		st, _, body := do(t, srv, deliver("e1", "f", 1, `{"delta": 1}`).request(t, srv.URL+path))
		if st != 404 || !strings.Contains(body, `"outcome":"not_found"`) {
			t.Errorf("POST %s: %d %s, want 404 not_found", path, st, body)
		}
	}
	if n := rc.calls.Load(); n != 0 {
		t.Fatalf("store calls = %d, want 0", n)
	}
	if st, _, body := do(t, srv, deliver("e1", "f", 1, `{"delta": 1}`).request(t, srv.URL+"/")); st != 200 {
		t.Fatalf("POST /: %d %s", st, body)
	}
}

// /metrics answers GET and HEAD; a POST there (a relay given that URL by
// mistake) is 405, never 200 (before, it was 200 with the metrics text, and
// the relay counted every event delivered).
func TestServer_MetricsGetOnly(t *testing.T) {
	t.Parallel()
	srv, rc, _ := hardened(t, ServerOptions{})
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(m, srv.URL+"/metrics", nil)
		st, _, body := do(t, srv, req)
		if st != 200 || (m == http.MethodGet && !strings.Contains(body, "fairrelay_receiver_receives_total")) {
			t.Errorf("%s /metrics: %d %.80q", m, st, body)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		d := deliver("e1", "f", 1, `{"delta": 1}`)
		d.method = m
		st, h, body := do(t, srv, d.request(t, srv.URL+"/metrics"))
		if st != 405 || h.Get("Allow") != "GET, HEAD" || !strings.Contains(body, `"outcome":"method_not_allowed"`) {
			t.Errorf("%s /metrics: %d Allow %q %s; want 405, Allow: GET, HEAD", m, st, h.Get("Allow"), body)
		}
	}
	if rc.calls.Load() != 0 {
		t.Error("a request to /metrics reached the store")
	}
}

// A loopback server answers only loopback names and IP addresses in Host,
// or the names it is given (DNS rebinding: evil.example resolving to
// 127.0.0.1 must not read the metrics or deliver).
func TestServer_HostCheck(t *testing.T) {
	t.Parallel()
	srv, _, _ := hardened(t, ServerOptions{})
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	get := func(host string) int {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		req.Host = host
		st, _, _ := do(t, srv, req)
		return st
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "LOCALHOST.", "app.localhost" + port, "[::1]" + port, "10.1.2.3"} {
		if st := get(host); st != 200 {
			t.Errorf("Host %q: %d, want 200", host, st)
		}
	}
	for _, host := range []string{"evil.example" + port, "evil.example", "localhost.evil.example", "127.0.0.1.nip.io"} {
		if st := get(host); st != 403 {
			t.Errorf("Host %q: %d, want 403", host, st)
		}
		req := deliver("e1", "f", 1, `{"delta": 1}`).request(t, srv.URL+"/")
		req.Host = host
		if st, _, body := do(t, srv, req); st != 403 || !strings.Contains(body, `"outcome":"host_not_allowed"`) {
			t.Errorf("delivery with Host %q: %d %s, want 403 host_not_allowed", host, st, body)
		}
	}

	// Names given are accepted too; with names given, the check holds on
	// any address. Without, a server reached on a public address answers
	// any name (the address is the deployment's own business).
	named := NewServer(&counting{}, secret, ServerOptions{Hosts: []string{"Hooks.Example.com:443"}, Path: "/", Logger: slog.New(slog.DiscardHandler)})
	open := NewServer(&counting{}, secret, ServerOptions{Path: "/", Logger: slog.New(slog.DiscardHandler)})
	star := NewServer(&counting{}, secret, ServerOptions{Hosts: []string{"*"}, Path: "/", Logger: slog.New(slog.DiscardHandler)})
	public := &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 443}
	loop := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}
	for _, c := range []struct {
		h     http.Handler
		local net.Addr
		host  string
		want  int
	}{
		{named, loop, "hooks.example.com", 405},
		{named, public, "hooks.example.com:443", 405},
		{named, public, "other.example", 403},
		{named, loop, "evil.example", 403},
		{open, public, "other.example", 405},
		{open, loop, "other.example", 403},
		{star, loop, "evil.example", 405},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = c.host
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, c.local))
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, req)
		if w.Code != c.want { // 405: past the host check, a GET of the delivery path
			t.Errorf("Host %q on %v: %d, want %d", c.host, c.local, w.Code, c.want)
		}
	}
}

// Several secrets: a request signed with any one of them verifies (a
// rotation); one signed with none is 401.
func TestServer_SeveralSecrets(t *testing.T) {
	t.Parallel()
	oldKey := []byte("old-secret")
	srv, _, st := hardened(t, ServerOptions{ExtraSecrets: [][]byte{oldKey}})
	for i, c := range []struct {
		keys [][]byte
		want int
	}{
		{[][]byte{secret}, 200},
		{[][]byte{oldKey}, 200},
		{[][]byte{[]byte("new-new"), oldKey}, 200},
		{[][]byte{[]byte("unknown")}, 401},
	} {
		d := deliver("e"+string(rune('1'+i)), "f", int64(i+1), `{"delta": 1}`)
		req := d.request(t, srv.URL+"/")
		webhook.SetHeadersRotating(req.Header, c.keys, d.id, d.flow, d.seq, d.ts, d.body)
		if got, _, body := do(t, srv, req); got != c.want {
			t.Errorf("signed with %q: %d %s, want %d", c.keys, got, body, c.want)
		}
	}
	if total, err := st.Total(context.Background(), "f"); err != nil || total != 3 {
		t.Errorf("total = %d, %v; want 3", total, err)
	}
}

// A non-ASCII ID travels in webhook.EncodeID's form and is stored as
// itself; a raw non-ASCII webhook-id (what an old sender wrote) is 400
// invalid_header rule id_header.
func TestServer_NonASCIIID(t *testing.T) {
	t.Parallel()
	srv, _, st := hardened(t, ServerOptions{})
	if code, _, body := do(t, srv, deliver("café-1", "f", 1, `{"delta": 2}`).request(t, srv.URL+"/")); code != 200 {
		t.Fatalf("café-1: %d %s", code, body)
	}
	sn, err := st.Snapshot(context.Background())
	if err != nil || len(sn.Receipts) != 1 || sn.Receipts[0].ID != "café-1" {
		t.Fatalf("receipts = %+v, %v; want café-1", sn.Receipts, err)
	}
	d := deliver("x", "f", 2, `{"delta": 2}`)
	req := d.request(t, srv.URL+"/")
	req.Header.Set(webhook.HeaderID, "naïve") // signed as it is, not encoded
	req.Header.Set(webhook.HeaderIdempotencyKey, "naïve")
	req.Header.Set(webhook.HeaderSignature, webhook.Sign(secret, "naïve", d.ts, d.body))
	req.Header.Set(webhook.HeaderRoute, webhook.SignRoute(secret, "naïve", d.ts, "f", 2))
	if code, _, body := do(t, srv, req); code != 400 || !strings.Contains(body, `"rule":"id_header"`) {
		t.Fatalf("raw non-ASCII webhook-id: %d %s, want 400 rule id_header", code, body)
	}
}

// The swap forgery against a receiver whose effect takes any body: the
// route signature copied into webhook-signature over the body "flow.seq"
// is refused (webhook's TestRouteSignatureSwapForgery shows it verified
// with the old route signature).
func TestServer_SwapForgeryRefused(t *testing.T) {
	t.Parallel()
	srv, rc, _ := hardened(t, ServerOptions{}, receiverstore.WithEffect(
		func(context.Context, receiverstore.Tx, receiverstore.Message) error { return nil }))
	d := deliver("e1", "acct", 12, `{"op":"credit"}`)
	genuine := d.request(t, srv.URL+"/")
	forged := deliver("e1", "acct", 12, "acct.12")
	req := forged.request(t, srv.URL+"/")
	for _, k := range []string{webhook.HeaderID, webhook.HeaderTimestamp, webhook.HeaderFlow, webhook.HeaderSeq, webhook.HeaderRoute} {
		req.Header.Set(k, genuine.Header.Get(k))
	}
	_, mac, _ := strings.Cut(genuine.Header.Get(webhook.HeaderRoute), ",")
	req.Header.Set(webhook.HeaderSignature, "v1,"+mac)
	if code, _, body := do(t, srv, req); code != 401 {
		t.Fatalf("forged delivery: %d %s, want 401", code, body)
	}
	if rc.calls.Load() != 0 {
		t.Fatal("the forged delivery reached the store")
	}
}

// lockedBuffer is a log sink the server's goroutines write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// Every refusal is a WARN line with its reason, paced per reason: 20 bad
// signatures at one instant give LogBurst lines; a later one says how many
// were suppressed; another reason has its own pace; a refusal after
// verification names the event. The server's clock (ServerOptions.Now)
// paces the log, so the test needs no waiting.
func TestServer_RefusalLogIsPaced(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Unix(1_900_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var logs lockedBuffer
	srv, _, _ := hardened(t, ServerOptions{Now: clock, LogBurst: 5, LogEvery: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	send := func(d delivery, path string) int {
		d.ts = clock()
		code, _, _ := do(t, srv, d.request(t, srv.URL+path))
		return code
	}
	bad := deliver("e1", "f", 1, `{"delta": 1}`)
	bad.key = []byte("wrong")
	for range 20 {
		if code := send(bad, "/"); code != 401 {
			t.Fatalf("bad signature: %d", code)
		}
	}
	if got := logs.lines("reason=unauthorized"); len(got) != 5 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], `err="webhook: no matching signature`) {
		t.Fatalf("after 20 bad signatures at once: %d lines, want 5 WARN:\n%s", len(got), strings.Join(got, "\n"))
	}
	// Another reason is not held back by the first one's pace, and names the event.
	if code := send(deliver("e7", "tenant-a", 1, `{"delta": 1.5}`), "/"); code != 400 {
		t.Fatalf("invalid body: %d", code)
	}
	if got := logs.lines("reason=invalid_body"); len(got) != 1 || !strings.Contains(got[0], "rule=not_an_integer") ||
		!strings.Contains(got[0], "id=e7 flow=tenant-a seq=1") {
		t.Fatalf("invalid body lines:\n%s", strings.Join(got, "\n"))
	}
	if code := send(deliver("e1", "f", 1, `{"delta": 1}`), "/nowhere"); code != 404 {
		t.Fatalf("other path: %d", code)
	}
	if got := logs.lines("reason=not_found"); len(got) != 1 {
		t.Fatalf("not_found lines: %d", len(got))
	}
	// Two seconds later the reason may log again, and counts the 15 it dropped.
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	send(bad, "/")
	got := logs.lines("reason=unauthorized")
	if len(got) != 6 || !strings.Contains(got[5], "suppressed=15") {
		t.Fatalf("after 2 s: %d lines, want 6, the last with suppressed=15:\n%s", len(got), strings.Join(got, "\n"))
	}
}
