package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/webhook"
)

// serveReceive runs 'relayctl receive' in process until the returned stop
// is called; it returns the URL the command printed first.
func serveReceive(t *testing.T, dir string, args ...string) (url string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	e := newEnv(strings.NewReader(""), pw, &stderr)
	e.ctx = ctx
	e.dir = dir
	done := make(chan int, 1)
	go func() {
		code := e.main(append([]string{"receive"}, args...))
		pw.Close()
		done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no URL printed: %v; stderr:\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	var once bool
	var code int
	stop = func() (int, string) {
		if !once {
			once = true
			cancel()
			code = <-done
		}
		return code, stderr.String()
	}
	t.Cleanup(func() { stop() })
	return strings.TrimSpace(line), stop
}

func post(t *testing.T, url string, secret []byte, id, flow string, seq int64, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	webhook.SetHeaders(req.Header, secret, id, flow, seq, time.Now(), []byte(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// relayctl receive prints its URL first, receives signed deliveries into
// receiver.db (created), serves /metrics on the same listener, and exits 0
// when its context ends.
func TestReceive_ServesUntilInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url, stop := serveReceive(t, dir, "--listen", "127.0.0.1:0", "--secret", "whsec_c2VjcmV0", "--json")
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/") || strings.HasSuffix(url, ":0/") {
		t.Fatalf("first line = %q, want http://127.0.0.1:PORT/", url)
	}
	key := []byte("secret") // whsec_c2VjcmV0 decoded
	for _, c := range []struct {
		id   string
		seq  int64
		body string
		key  []byte
		want string
	}{
		{"e1", 1, `{"delta": 4}`, key, `200 {"outcome":"accepted"}`},
		{"e1", 1, `{"delta": 4}`, key, `200 {"outcome":"duplicate"}`},
		{"e3", 3, `{"delta": 4}`, key, `409 {"outcome":"gap"}`},
		{"e2", 2, `{"delta": 4}`, []byte("whsec_c2VjcmV0"), `401 {"outcome":"unauthorized","error":"webhook: no matching signature: webhook-signature"}`},
		{"e2", 2, `{"delta": 0}`, key, `400 {"outcome":"invalid_body","rule":"delta_out_of_range","error":"delta \"0\" outside 1..1000"}`},
		{"e2", 2, `{"delta": 3}`, key, `200 {"outcome":"accepted"}`},
	} {
		st, b := post(t, url, c.key, c.id, "tenant 7", c.seq, c.body)
		if got := strconv.Itoa(st) + " " + b; got != c.want {
			t.Errorf("%s seq %d %s: %s, want %s", c.id, c.seq, c.body, got, c.want)
		}
	}
	resp, err := http.Get(url + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`fairrelay_receiver_receives_total{outcome="accepted"} 2`, `fairrelay_receiver_receives_total{outcome="unauthorized"} 1`, "go_goroutines"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	code, stderr := stop()
	if code != exitOK {
		t.Fatalf("exit status = %d, want 0; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{`"msg":"receiving"`, `"msg":"stopped"`,
		`"level":"WARN","msg":"inbox: refused a request","reason":"unauthorized","status":401`,
		`"reason":"invalid_body","status":400,"remote":`, `"rule":"delta_out_of_range","id":"e2","flow":"tenant 7","seq":2`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr)
		}
	}
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if tot, err := r.Total(context.Background(), "tenant 7"); err != nil || tot != 7 {
		t.Errorf("Total(tenant 7) = %d, %v; want 7", tot, err)
	}
}

// The hardened receiver: deliveries on its printed path only (404
// elsewhere); /metrics to GET only (a POST there was 200 with the metrics
// text, so a relay given that URL took every event as delivered); only
// loopback names in Host unless --allow-host names more (DNS rebinding);
// several --secret values, any one verifying (a rotation), and an unpadded
// whsec_ secret (which made it refuse to start).
func TestReceive_Hardened(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// "whsec_bmV3LWtleQ" is base64 of "new-key" without its '=' padding.
	url, stop := serveReceive(t, dir, "--listen", "127.0.0.1:0", "--secret", "whsec_bmV3LWtleQ", "--secret", "old-key",
		"--allow-host", "hooks.example.com")
	for i, key := range []string{"new-key", "old-key"} {
		if st, b := post(t, url, []byte(key), "e"+strconv.Itoa(i+1), "f", int64(i+1), `{"delta": 1}`); st != 200 {
			t.Errorf("signed with %s: %d %s, want 200", key, st, b)
		}
	}
	if st, b := post(t, url, []byte("other"), "e3", "f", 3, `{"delta": 1}`); st != 401 {
		t.Errorf("signed with another secret: %d %s, want 401", st, b)
	}
	if st, b := post(t, url+"events", []byte("new-key"), "e3", "f", 3, `{"delta": 1}`); st != 404 {
		t.Errorf("POST /events: %d %s, want 404", st, b)
	}
	if st, b := post(t, url+"metrics", []byte("new-key"), "e3", "f", 3, `{"delta": 1}`); st != 405 {
		t.Errorf("POST /metrics: %d %s, want 405", st, b)
	}
	for host, want := range map[string]int{"": 200, "localhost": 200, "hooks.example.com": 200, "evil.example": 403} {
		req, _ := http.NewRequest(http.MethodGet, url+"metrics", nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /metrics with Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
	if code, stderr := stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if tot, err := r.Total(context.Background(), "f"); err != nil || tot != 2 {
		t.Errorf("Total(f) = %d, %v; want 2", tot, err)
	}
}
